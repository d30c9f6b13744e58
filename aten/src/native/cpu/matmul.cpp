// matmul on the CPU: float32 through kael's AVX-512 GEMM (cpu/gemm.cpp) where the build has it
// and the result has 16 columns or more, else oneDNN's matmul primitive (primitives cached per
// shape, since creating one costs milliseconds); a blocked loop for float64 and the integer dtypes.
// float16/bfloat16 go through oneDNN's f16/bf16 matmul (f32 accumulation, one rounding) where
// this CPU has it; elsewhere they are converted to float32, multiplied, and rounded once. A few
// rows (at most kSmallM) by a matrix with contiguous rows or columns go to gemm_small_m, in any
// of the three dtypes (Note [Small-M products] in cpu/gemm_small_m.cpp).
//
// a: (..., n, k), b: (..., k, m) -> out: (broadcast(...), n, m). A 1-d a is (1, k) and a 1-d b
// is (k, 1), with that dim removed from the result (NumPy semantics).
#include <pthread.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>
#include <vector>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/gemm.h"
#include "kael/native/matmul.h"
#include "kael/native/math.h"
#include "kael/native/pointwise.h"
#include "kael/ops/unsqueeze.h"
#include "kael/ops/view.h"
#include "kael/runtime/threads.h"

namespace kael::native {

namespace {

constexpr std::size_t kMaxDnnlDims = 12;  // DNNL_MAX_NDIMS
// Below this many multiply-adds per matrix, the loop beats oneDNN's per-call set-up.
constexpr std::int64_t kSmallProduct = 16 * 16 * 16;

struct Operands {
  Tensor a, b;             // at least 2-d, padded to the same number of dims
  DimVector out_shape;     // broadcast batch, n, m
  DimVector result_shape;  // out_shape with the dims of 1-d inputs removed
};

// Pads t's shape on the left with 1s to nd dims.
Tensor pad_dims(Tensor t, std::int64_t nd) {
  while (t.dim() < nd) t = kael::unsqueeze(t, 0);
  return t;
}

Operands prepare(const Tensor& self, const Tensor& other) {
  KAEL_CHECK(self.dim() >= 1 && other.dim() >= 1, "matmul: both arguments to matmul need to be at least 1D, but they are "
                                                      << self.dim() << "D and " << other.dim() << "D");
  KAEL_CHECK(self.dtype() == other.dtype(), "matmul: expected both operands to have the same dtype, but got "
                                                << self.dtype() << " and " << other.dtype());
  KAEL_CHECK_IMPLEMENTED(self.dtype() != ScalarType::Bool, "matmul: not implemented for dtype bool");
  KAEL_CHECK(self.device().is_cpu() && other.device().is_cpu(), "matmul: expected cpu tensors");
  Operands r;
  Tensor a = self, b = other;
  if (a.dim() == 1) a = kael::unsqueeze(a, 0);
  if (b.dim() == 1) b = kael::unsqueeze(b, 1);
  const std::int64_t n = a.sizes()[a.dim() - 2], k = a.sizes()[a.dim() - 1];
  const std::int64_t k2 = b.sizes()[b.dim() - 2], m = b.sizes()[b.dim() - 1];
  KAEL_CHECK(k == k2, "matmul: shapes " << shape_str(self.sizes()) << " and " << shape_str(other.sizes())
                                        << " cannot be multiplied (" << n << "x" << k << " and " << k2 << "x" << m
                                        << ")");
  DimVector batch = broadcast_shapes("matmul", a.sizes().subspan(0, a.dim() - 2), b.sizes().subspan(0, b.dim() - 2));
  const std::int64_t nd = static_cast<std::int64_t>(batch.size()) + 2;
  r.a = pad_dims(a, nd);
  r.b = pad_dims(b, nd);
  r.out_shape = batch;
  r.out_shape.push_back(n);
  r.out_shape.push_back(m);
  r.result_shape = batch;
  if (self.dim() > 1) r.result_shape.push_back(n);
  if (other.dim() > 1) r.result_shape.push_back(m);
  return r;
}

// ---- float32 through oneDNN

struct PrimitiveCache {
  std::mutex mutex;
  std::map<std::vector<std::int64_t>, dnnl::matmul> primitives;
};

PrimitiveCache& cache() {
  static PrimitiveCache* c = new PrimitiveCache();
  return *c;
}

// A thread creating a primitive holds the mutex (and oneDNN's own cache lock) for milliseconds; a
// fork() at that moment would leave the child's copy locked forever. The mutex is held across
// fork(), so the child starts with it free (Note [Threads after fork] in kael/runtime/threads.h).
struct CacheForkHandlers {
  CacheForkHandlers() {
    pthread_atfork([] { cache().mutex.lock(); }, [] { cache().mutex.unlock(); }, [] { cache().mutex.unlock(); });
  }
} cache_fork_handlers;

dnnl::engine& engine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

dnnl::memory::dims dims_of(IntArrayRef v) { return dnnl::memory::dims(v.begin(), v.end()); }

// Whether oneDNN takes t's layout as it is: strides of a plain layout that never lands on an
// element twice. Sorted by stride, each dim longer than 1 must step over the whole extent of
// the one before, as oneDNN's memory descriptor requires ("could not construct a memory
// descriptor using strides" otherwise): no 0 strides over such a dim, no overlapping windows
// (as_strided's sliding windows, the im2col pattern). Any other layout is copied to a dense
// one first, so every dtype takes every layout that float32's GEMM and loop take.
bool dnnl_friendly(const Tensor& t) {
  DimVector dims;
  for (std::int64_t i = 0; i < t.dim(); ++i)
    if (t.sizes()[i] > 1) dims.push_back(i);
  std::stable_sort(dims.begin(), dims.end(),
                   [&](std::int64_t x, std::int64_t y) { return t.strides()[x] < t.strides()[y]; });
  std::int64_t extent = 1;  // the elements the dims so far span: the next stride must reach past it
  for (const std::int64_t d : dims) {
    if (t.strides()[d] < extent) return false;
    extent = t.strides()[d] * t.sizes()[d];
  }
  return true;
}

// t as oneDNN takes it: t itself, or a contiguous copy; dims of size 1 get the strides of a
// contiguous tensor of t's shape (their stride steps nowhere, and oneDNN checks it all the same).
Tensor dnnl_layout(const Tensor& t) {
  const Tensor dense = dnnl_friendly(t) ? t : contiguous(t);
  bool size_one = false;
  for (std::int64_t i = 0; i < dense.dim(); ++i) size_one = size_one || dense.sizes()[i] == 1;
  if (!size_one || dense.is_contiguous()) return dense;
  DimVector strides(dense.strides());
  for (std::int64_t i = dense.dim() - 1; i >= 0; --i)
    if (dense.sizes()[i] == 1) {
      std::int64_t inner = 1;  // the extent of the dims inside it
      for (std::int64_t j = 0; j < dense.dim(); ++j)
        if (dense.sizes()[j] > 1) inner = std::max(inner, dense.strides()[j] * dense.sizes()[j]);
      strides[i] = inner;
    }
  return Tensor(TensorImpl::make_view(*dense.impl(), dense.sizes(), strides, dense.impl()->offset()));
}

dnnl::memory::data_type dnnl_type(ScalarType t) {
  using dt = dnnl::memory::data_type;
  switch (t) {
    case ScalarType::Float16:
      return dt::f16;
    case ScalarType::BFloat16:
      return dt::bf16;
    default:
      return dt::f32;
  }
}

// Whether oneDNN implements a matmul of 2x2 matrices of data type dt on this CPU.
bool dnnl_has_matmul(dnnl::memory::data_type dt) {
  try {
    const dnnl::memory::desc md({2, 2}, dt, dnnl::memory::format_tag::ab);
    dnnl::matmul::primitive_desc(engine(), md, md, md);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// Whether oneDNN implements matmul of dtype t on this CPU (asked once per dtype).
bool dnnl_supports(ScalarType t) {
  static const bool f16 = dnnl_has_matmul(dnnl::memory::data_type::f16);
  static const bool bf16 = dnnl_has_matmul(dnnl::memory::data_type::bf16);
  if (t == ScalarType::Float16) return f16;
  if (t == ScalarType::BFloat16) return bf16;
  return t == ScalarType::Float32;
}

// out <- a @ b (+ bias, a contiguous row of out's last dim, added in oneDNN's accumulator). a and b
// share a dtype; out (and bias) may be float32 with half a and b: oneDNN reads the half operands,
// accumulates in float32 and writes float32, with no float32 copy of a or b.
void matmul_dnnl(const Tensor& a_in, const Tensor& b_in, const Tensor& out, const Tensor* bias = nullptr) {
  const Tensor a = dnnl_layout(a_in);
  const Tensor b = dnnl_layout(b_in);
  // oneDNN takes its thread count from the calling thread's OpenMP setting, and a primitive
  // may size its work for the count it was created with (Note [Process-wide thread count]; one
  // thread in a forked child, Note [Threads after fork]).
  sync_openmp_threads();
  std::vector<std::int64_t> key;
  key.reserve(4 * a.dim() + 3);
  key.push_back(static_cast<std::int64_t>(out.dtype()));
  key.push_back(static_cast<std::int64_t>(a.dtype()));
  key.push_back(bias != nullptr ? static_cast<std::int64_t>(bias->dtype()) : -1);
  key.push_back(openmp_threads());
  key.push_back(bias != nullptr ? 1 : 0);
  key.push_back(a.dim());
  for (std::int64_t i = 0; i < a.dim(); ++i) {
    key.push_back(a.sizes()[i]);
    key.push_back(a.strides()[i]);
    key.push_back(b.sizes()[i]);
    key.push_back(b.strides()[i]);
  }
  const dnnl::memory::data_type src_dt = dnnl_type(a.dtype());
  const dnnl::memory::desc a_md(dims_of(a.sizes()), src_dt, dims_of(a.strides()));
  const dnnl::memory::desc b_md(dims_of(b.sizes()), src_dt, dims_of(b.strides()));
  const dnnl::memory::desc o_md(dims_of(out.sizes()), dnnl_type(out.dtype()), dims_of(out.strides()));
  dnnl::memory::desc bias_md;
  if (bias != nullptr) {
    // a row of out's width, broadcast over the other dims
    const std::int64_t width = out.sizes()[out.dim() - 1];
    dnnl::memory::dims bias_dims(static_cast<std::size_t>(out.dim()), 1), bias_strides(bias_dims.size(), width);
    bias_dims.back() = width;
    bias_strides.back() = 1;
    bias_md = dnnl::memory::desc(bias_dims, dnnl_type(bias->dtype()), bias_strides);
  }
  dnnl::matmul prim;
  {
    PrimitiveCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.primitives.find(key);
    if (it == c.primitives.end()) {
      if (c.primitives.size() >= 1024) c.primitives.clear();
      it = c.primitives
               .emplace(key, bias != nullptr
                                 ? dnnl::matmul(dnnl::matmul::primitive_desc(engine(), a_md, b_md, bias_md, o_md))
                                 : dnnl::matmul(dnnl::matmul::primitive_desc(engine(), a_md, b_md, o_md)))
               .first;
    }
    prim = it->second;
  }
  thread_local dnnl::stream stream(engine());
  dnnl::memory a_mem(a_md, engine(), a.data_ptr()), b_mem(b_md, engine(), b.data_ptr()),
      o_mem(o_md, engine(), out.data_ptr());
  if (bias != nullptr) {
    dnnl::memory bias_mem(bias_md, engine(), bias->data_ptr());
    prim.execute(stream,
                 {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_BIAS, bias_mem}, {DNNL_ARG_DST, o_mem}});
  } else {
    prim.execute(stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, o_mem}});
  }
  stream.wait();
}

// The element offsets in a and b of matrix `batch` of out's batch dims (row-major over out's
// batch dims; a size-1 batch dim of a or b repeats).
std::pair<std::int64_t, std::int64_t> batch_offsets(const Tensor& out, const Tensor& a, const Tensor& b,
                                                    std::int64_t batch) {
  std::int64_t rem = batch, a_off = 0, b_off = 0;
  for (std::int64_t d = out.dim() - 3; d >= 0; --d) {
    const std::int64_t idx = rem % out.sizes()[d];
    rem /= out.sizes()[d];
    if (a.sizes()[d] != 1) a_off += idx * a.strides()[d];
    if (b.sizes()[d] != 1) b_off += idx * b.strides()[d];
  }
  return {a_off, b_off};
}

// ---- float64 / integers: a blocked i-k-j loop per batch over contiguous copies (integers wrap
// as in PyTorch: the products are computed in T's width)

template <typename T>
void matmul_loop(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  using W = math::compute_t<T>;  // int64 wraps around (see Note [Wrapping integer arithmetic])
  const Tensor a = contiguous(a_in), b = contiguous(b_in);
  const std::int64_t nd = out.dim(), n = out.sizes()[nd - 2], m = out.sizes()[nd - 1], k = a.sizes()[nd - 1];
  const std::int64_t batches = out.numel() / std::max<std::int64_t>(n * m, 1);
  if (n * m == 0) return;
  const T* A = a.data<T>();
  const T* B = b.data<T>();
  T* C = out.data<T>();
  // Batches split among the pool's threads when the whole product is large.
  const std::int64_t grain = batches * n * m * k > (1 << 18) ? 1 : batches;
  parallel_for(0, batches, grain, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t batch = first; batch < last; ++batch) {
      const auto [a_off, b_off] = batch_offsets(out, a, b, batch);
      const T* Ab = A + a_off;
      const T* Bb = B + b_off;
      T* Cb = C + batch * n * m;
      for (std::int64_t i = 0; i < n * m; ++i) Cb[i] = T(0);
      constexpr std::int64_t kBlock = 64;
      for (std::int64_t k0 = 0; k0 < k; k0 += kBlock) {
        const std::int64_t k1 = std::min(k, k0 + kBlock);
        for (std::int64_t i = 0; i < n; ++i) {
          T* __restrict c = Cb + i * m;
          for (std::int64_t p = k0; p < k1; ++p) {
            const W av = Ab[i * k + p];
            const T* __restrict bp = Bb + p * m;
            for (std::int64_t j = 0; j < m; ++j) c[j] = static_cast<T>(W(c[j]) + av * W(bp[j]));
          }
        }
      }
    }
  });
}

// Whether kael's GEMM takes the float32 product a @ b (Note [float32 GEMM] in cpu/gemm.cpp):
// every product with a result of 16 columns or more where the build has the GEMM. Narrower
// results (a matrix-vector product) would leave most of its 32 lanes idle and go to oneDNN. A
// transposed b (linear's x @ w.t()) stays with the GEMM although oneDNN, which reads that layout
// in place, multiplies it faster alone at 1 thread: a training step that alternates the two runs
// oneDNN's OpenMP threads beside kael's pool, which is slower at 2 threads than the GEMM
// throughout (docs/performance.md, "float32 GEMM" and "Training step").
bool use_gemm(std::int64_t columns) { return columns >= 16 && gemm_f32_available(); }

// out (contiguous) <- a @ b (+ out when accumulate) for float32 a, b of out's dims (batch dims
// broadcast), one gemm_f32 per matrix: the matrices split among the pool's threads when each is
// too small to split by itself.
void matmul_gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const std::int64_t nd = out.dim(), n = out.sizes()[nd - 2], m = out.sizes()[nd - 1], k = a.sizes()[nd - 1];
  if (n * m == 0) return;
  const std::int64_t batches = out.numel() / (n * m);
  const float* A = a.data<float>();
  const float* B = b.data<float>();
  float* C = out.data<float>();
  const std::int64_t a_rs = a.strides()[nd - 2], a_cs = a.strides()[nd - 1];
  const std::int64_t b_rs = b.strides()[nd - 2], b_cs = b.strides()[nd - 1];
  auto run = [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t batch = first; batch < last; ++batch) {
      const auto [a_off, b_off] = batch_offsets(out, a, b, batch);
      gemm_f32(n, m, k, A + a_off, a_rs, a_cs, B + b_off, b_rs, b_cs, C + batch * n * m, m, accumulate);
    }
  };
  const std::int64_t work = n * m * k;
  if (batches == 1 || work >= kGemmParallelWork) {
    run(0, batches);  // each product splits itself
  } else {
    parallel_for(0, batches, std::max<std::int64_t>(1, kGemmParallelWork / work), run);
  }
}

// out <- a @ b for float16/bfloat16 a, b, out of a few rows (one matrix, at most kSmallM rows) and
// b with contiguous rows or columns: a widened to float32 (small), b read once in place by
// gemm_small_m (Note [Small-M products] in cpu/gemm_small_m.cpp), float32 sums rounded once.
// False when the operands do not qualify.
bool multiply_small_m_half(const Tensor& a, const Tensor& b, const Tensor& out) {
  const std::int64_t nd = out.dim(), n = out.sizes()[nd - 2], m = out.sizes()[nd - 1], k = a.sizes()[nd - 1];
  const std::int64_t b_rs = b.strides()[nd - 2], b_cs = b.strides()[nd - 1];
  if (n > kSmallM || out.numel() != n * m || (b_cs != 1 && b_rs != 1) || !gemm_f32_available()) return false;
  const Tensor a32 = to_dtype_cpu(a, ScalarType::Float32);
  const DimVector shape{n, m};
  const Tensor out32 = alloc_cpu(shape, ScalarType::Float32);
  if (!gemm_small_m(n, m, k, a32.data<float>(), a32.strides()[nd - 2], a32.strides()[nd - 1], b.data_ptr(), b.dtype(),
                    b_rs, b_cs, out32.data<float>(), m, /*accumulate=*/false))
    return false;
  copy_cpu(out, kael::view(out32, out.sizes()));
  return true;
}

// out <- a @ b for a, b, out of one dtype other than bool and the half types.
void multiply_into(const Tensor& a, const Tensor& b, const Tensor& out) {
  const std::int64_t k = a.sizes()[a.dim() - 1];
  if (out.dtype() == ScalarType::Float32 && out.sizes()[out.dim() - 2] * out.sizes()[out.dim() - 1] * k > kSmallProduct) {
    if (use_gemm(out.sizes()[out.dim() - 1])) {
      matmul_gemm(a, b, out, /*accumulate=*/false);
      return;
    }
    if (static_cast<std::size_t>(out.dim()) <= kMaxDnnlDims) {
      matmul_dnnl(a, b, out);
      return;
    }
  }
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool> || is_reduced_floating_v<T>) {
      KAEL_INTERNAL_ASSERT(false);
    } else {
      matmul_loop<T>(a, b, out);
    }
  });
}

}  // namespace

Tensor matmul_cpu(const Tensor& self, const Tensor& other) {
  Operands ops = prepare(self, other);
  // The result has its final shape; the kernels write it through a view with the 1-d inputs'
  // dims restored.
  const ScalarType dtype = self.dtype();
  Tensor result = alloc_cpu(ops.result_shape, dtype);
  const Tensor out = ops.result_shape == ops.out_shape ? result : kael::view(result, ops.out_shape);
  // The products run on the call's own inputs (Note [Concurrency] in kael/core/concurrency.h);
  // the output is new, no other thread sees it yet.
  UnlockedSection section;
  if (section.active()) {
    ops.a = section.own(ops.a);
    ops.b = section.own(ops.b);
  }
  section.unlock();
  if (out.numel() > 0) {
    const std::int64_t k = ops.a.sizes()[ops.a.dim() - 1];
    if (k == 0) {
      fill_cpu(out, Scalar(std::int64_t{0}));
    } else if (is_reduced_floating(dtype)) {
      if (multiply_small_m_half(ops.a, ops.b, out)) {
        // done: a few rows, the matrix streamed once
      } else if (static_cast<std::size_t>(out.dim()) <= kMaxDnnlDims && dnnl_supports(dtype)) {
        matmul_dnnl(ops.a, ops.b, out);
      } else {
        const Tensor out32 = alloc_cpu(ops.out_shape, ScalarType::Float32);
        multiply_into(to_dtype_cpu(ops.a, ScalarType::Float32), to_dtype_cpu(ops.b, ScalarType::Float32), out32);
        copy_cpu(out, out32);
      }
    } else {
      multiply_into(ops.a, ops.b, out);
    }
  }
  return result;
}

Tensor addmm_bias_cpu(const Tensor& bias, const Tensor& mat1, const Tensor& mat2) {
  const ScalarType dtype = mat1.dtype();
  const bool half = is_reduced_floating(dtype);
  if ((dtype != ScalarType::Float32 && !(half && dnnl_supports(dtype))) || mat2.dtype() != dtype ||
      bias.dtype() != dtype || mat1.dim() != 2 || mat2.dim() != 2 || bias.dim() != 1 || !bias.is_contiguous() ||
      !bias.device().is_cpu() || !mat1.device().is_cpu() || !mat2.device().is_cpu())
    return Tensor();
  const std::int64_t n = mat1.sizes()[0], k = mat1.sizes()[1], m = mat2.sizes()[1];
  if (mat2.sizes()[0] != k || bias.sizes()[0] != m || n * m * k <= kSmallProduct || k == 0) return Tensor();
  const DimVector shape{n, m};
  Tensor out = alloc_cpu(shape, dtype);
  Tensor a = mat1, b = mat2, c = bias;
  UnlockedSection section;
  if (section.active()) {
    a = section.own(a);
    b = section.own(b);
    c = section.own(c);
  }
  section.unlock();
  if (!half && use_gemm(m)) {
    // out's rows start as the bias; the product is added to them.
    const float* bias_row = c.data<float>();
    float* o = out.data<float>();
    for (std::int64_t i = 0; i < n; ++i) std::copy(bias_row, bias_row + m, o + i * m);
    matmul_gemm(a, b, out, /*accumulate=*/true);
  } else {
    matmul_dnnl(a, b, out, &c);
  }
  return out;
}

Tensor matmul_float32_cpu(const Tensor& mat1, const Tensor& mat2) {
  const ScalarType dtype = mat1.dtype();
  const std::int64_t nd = mat1.dim();
  if (!is_reduced_floating(dtype) || mat2.dtype() != dtype || !dnnl_supports(dtype) || nd < 2 || nd > 3 ||
      mat2.dim() != nd || !mat1.device().is_cpu() || !mat2.device().is_cpu())
    return Tensor();
  if (nd == 3 && mat1.sizes()[0] != mat2.sizes()[0]) return Tensor();
  const std::int64_t k = mat1.sizes()[nd - 1];
  if (mat2.sizes()[nd - 2] != k || k == 0 || mat1.numel() == 0 || mat2.numel() == 0) return Tensor();
  DimVector shape;
  for (std::int64_t i = 0; i + 1 < nd; ++i) shape.push_back(mat1.sizes()[i]);
  shape.push_back(mat2.sizes()[nd - 1]);
  Tensor out = alloc_cpu(shape, ScalarType::Float32);
  Tensor a = mat1, b = mat2;
  UnlockedSection section;
  if (section.active()) {
    a = section.own(a);
    b = section.own(b);
  }
  section.unlock();
  matmul_dnnl(a, b, out);
  return out;
}

}  // namespace kael::native
