#pragma once
// CUDA loops of the generated pointwise kernels (codegen/templates/pointwise_kernel.cu.j2).
//
// Note [Pointwise backends]
// Promotion, broadcasting, output allocation and layout, and the checks of a pointwise call
// are device-independent (PointwiseCall in kael/native/pointwise.h, allocating through the
// device's allocator); only the loops are per device. The CPU loops are PointwiseCall::run
// (kael/native/loops.h). The CUDA loops below launch one elementwise kernel over the same
// set-up; the formula of a `pointwise:` entry is a functor whose call operator is
// __host__ __device__ and whose math comes from kael::native::math (kael/native/math.h).
// Codegen writes one .cu per `pointwise:` entry into the build tree; CMake compiles them
// only with -DKAEL_BUILD_CUDA=ON and nvcc found. test_codegen.py compiles every generated
// .cu with nvcc (no GPU needed) when nvcc is installed.

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "kael/core/error.h"
#include "kael/native/pointwise.h"

#define KAEL_CUDA_CHECK(expr)                                                           \
  do {                                                                                  \
    const cudaError_t kael_cuda_error_ = (expr);                                        \
    KAEL_CHECK(kael_cuda_error_ == cudaSuccess, "CUDA error: " << cudaGetErrorString(kael_cuda_error_)); \
  } while (0)

namespace kael::native::cuda {

inline constexpr int kMaxDims = 12;

// N operands (the output first): data pointers and element strides broadcast to the shape.
template <int N>
struct Geometry {
  int ndim = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[N][kMaxDims] = {};
  char* data[N] = {};
};

template <typename Out, typename T, int K, typename F>
__global__ void elementwise_kernel(std::int64_t n, Geometry<K + 1> g, F f) {
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    std::int64_t offset[K + 1] = {};
    std::int64_t rest = i;
    for (int d = g.ndim - 1; d >= 0; --d) {
      const std::int64_t index = rest % g.sizes[d];
      rest /= g.sizes[d];
      for (int k = 0; k <= K; ++k) offset[k] += index * g.strides[k][d];
    }
    Out* out = reinterpret_cast<Out*>(g.data[0]) + offset[0];
    const T* a = reinterpret_cast<const T*>(g.data[1]) + offset[1];
    if constexpr (K == 1) {
      *out = static_cast<Out>(f(*a));
    } else if constexpr (K == 2) {
      const T* b = reinterpret_cast<const T*>(g.data[2]) + offset[2];
      *out = static_cast<Out>(f(*a, *b));
    } else {
      const T* b = reinterpret_cast<const T*>(g.data[2]) + offset[2];
      const T* c = reinterpret_cast<const T*>(g.data[3]) + offset[3];
      *out = static_cast<Out>(f(*a, *b, *c));
    }
  }
}

// A two-input formula with one input fixed to a number.
template <typename F, typename T>
struct BindFirst {
  F f;
  T a;
  __host__ __device__ auto operator()(T b) const { return f(a, b); }
};
template <typename F, typename T>
struct BindSecond {
  F f;
  T b;
  __host__ __device__ auto operator()(T a) const { return f(a, b); }
};

// A three-input formula with the inputs that are numbers fixed (A, B, C: input 0, 1, 2 is a
// tensor and comes from the kernel's arguments, in order).
template <typename F, typename T, bool A, bool B, bool C>
struct Bind3 {
  F f;
  T s0, s1, s2;
  template <typename... Args>
  __host__ __device__ auto operator()(Args... args) const {
    const T given[] = {args...};
    int j = 0;
    const T a = A ? given[j++] : s0;
    const T b = B ? given[j++] : s1;
    const T c = C ? given[j++] : s2;
    return f(a, b, c);
  }
};

template <int N>
void set_operand(Geometry<N>& g, int k, const Tensor& t) {
  g.data[k] = static_cast<char*>(t.data_ptr());
  const int od = static_cast<int>(t.dim());
  for (int i = 0; i < od; ++i) g.strides[k][g.ndim - od + i] = t.sizes()[i] == 1 ? 0 : t.strides()[i];
}

template <typename Out, typename T, int K, typename F>
void launch(const PointwiseCall& call, const std::array<int, K>& which, F f) {
  const Tensor& out = call.output();
  const std::int64_t n = out.numel();
  if (n == 0) return;
  const IntArrayRef shape = call.shape();
  KAEL_CHECK(shape.size() <= static_cast<std::size_t>(kMaxDims),
             "pointwise: CUDA kernels support at most " << kMaxDims << " dimensions, got " << shape.size());
  Geometry<K + 1> g;
  g.ndim = static_cast<int>(shape.size());
  for (int d = 0; d < g.ndim; ++d) g.sizes[d] = shape[d];
  set_operand(g, 0, out);
  for (int k = 0; k < K; ++k) set_operand(g, k + 1, call.input(which[k]));
  constexpr int kThreads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((n + kThreads - 1) / kThreads, std::int64_t{1} << 16);
  elementwise_kernel<Out, T, K><<<static_cast<unsigned>(blocks), kThreads>>>(n, g, f);
  KAEL_CUDA_CHECK(cudaGetLastError());
}

// The CUDA counterpart of PointwiseCall::run: f: (T...) -> Out over the broadcast shape.
template <typename T, typename Out, int K, typename F>
void run(const PointwiseCall& call, F f) {
  static_assert(K >= 1 && K <= 3, "pointwise ops of one to three inputs");
  if constexpr (K == 1) {
    launch<Out, T, 1>(call, {0}, f);
  } else if constexpr (K == 3) {
    const bool t0 = call.operand(0).is_tensor(), t1 = call.operand(1).is_tensor(), t2 = call.operand(2).is_tensor();
    const T s0 = t0 ? T() : call.operand(0).scalar().template to<T>();
    const T s1 = t1 ? T() : call.operand(1).scalar().template to<T>();
    const T s2 = t2 ? T() : call.operand(2).scalar().template to<T>();
    if (t0 && t1 && t2) {
      launch<Out, T, 3>(call, {0, 1, 2}, f);
    } else if (t0 && t1) {
      launch<Out, T, 2>(call, {0, 1}, Bind3<F, T, true, true, false>{f, s0, s1, s2});
    } else if (t0 && t2) {
      launch<Out, T, 2>(call, {0, 2}, Bind3<F, T, true, false, true>{f, s0, s1, s2});
    } else if (t1 && t2) {
      launch<Out, T, 2>(call, {1, 2}, Bind3<F, T, false, true, true>{f, s0, s1, s2});
    } else if (t0) {
      launch<Out, T, 1>(call, {0}, Bind3<F, T, true, false, false>{f, s0, s1, s2});
    } else if (t1) {
      launch<Out, T, 1>(call, {1}, Bind3<F, T, false, true, false>{f, s0, s1, s2});
    } else {
      launch<Out, T, 1>(call, {2}, Bind3<F, T, false, false, true>{f, s0, s1, s2});
    }
  } else {
    const bool t0 = call.operand(0).is_tensor(), t1 = call.operand(1).is_tensor();
    if (t0 && t1) {
      launch<Out, T, 2>(call, {0, 1}, f);
    } else if (t0) {
      launch<Out, T, 1>(call, {0}, BindSecond<F, T>{f, call.operand(1).scalar().template to<T>()});
    } else {
      launch<Out, T, 1>(call, {1}, BindFirst<F, T>{f, call.operand(0).scalar().template to<T>()});
    }
  }
}

}  // namespace kael::native::cuda
