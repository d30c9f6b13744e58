#pragma once
// Set-up of a pointwise op: validate -> promote -> broadcast -> allocate on the operands'
// device, then run a generated scalar formula through the CPU loop engine (see Note [Loop
// geometry]) or a device's loops (Note [Pointwise backends] in kael/native/cuda/pointwise.cuh).
// Generated kernels (codegen/templates/pointwise_kernel.cpp.j2, .cu.j2) are thin users of this.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kael/core/concurrency.h"
#include "kael/core/tensor.h"
#include "kael/core/error.h"
#include "kael/native/loops.h"

namespace kael::native {

enum class Promotion : std::uint8_t {
  Default,     // result dtype = promoted dtype of the operands
  IntToFloat,  // integral/bool results become the default float dtype (exp, div, ...)
  AlwaysBool,  // compute in the promoted dtype, return bool (comparisons)
};

struct PointwiseSpec {
  const char* name;
  Promotion promotion;
  std::uint32_t dtypes;  // bit (1 << ScalarType) set for each supported compute dtype
  // A number or one-element tensor as second input is read in float32 for float16/bfloat16,
  // not rounded to them first (the registry's opmath_other_scalar, codegen/README.md).
  bool opmath_other_scalar = false;
  // A number as first input gives a contiguous result, whatever the second input's layout
  // (PyTorch's pow(Scalar, Tensor) overload; the registry's number_self_contiguous).
  bool number_self_contiguous = false;
  // The first input is a condition (where's): it takes no part in type promotion, so a uint8
  // condition does not raise the result's dtype (the registry's condition_first).
  bool condition_first = false;
};

class PointwiseCall {
 public:
  static constexpr int kMaxInputs = 3;

  // Out-of-place call; allocates the output.
  PointwiseCall(const PointwiseSpec& spec, std::initializer_list<const Operand*> inputs);
  // In-place call writing into `self`, which is also the first input.
  PointwiseCall(const PointwiseSpec& spec, const Tensor& self, std::initializer_list<const Operand*> inputs);
  // out= call writing into `out`, which is resized to the broadcast shape when it differs
  // (with a warning if it had elements, as in PyTorch).
  // The constructors only check: the destination is first written (resized, its version
  // bumped) when run() starts, so a call that fails a check, or whose kernel rejects a scalar
  // argument before run(), leaves it untouched.
  struct OutArgument {};
  PointwiseCall(const PointwiseSpec& spec, const Tensor& out, std::initializer_list<const Operand*> inputs,
                OutArgument);

  ScalarType compute_dtype() const { return compute_; }

  // Runs f: (T...) -> Out over the broadcast shape; K is the number of inputs.
  template <typename T, typename Out, int K, typename F>
  void run(F f);

  // The result (for in-place calls, `self`).
  Tensor finish();

  // The device-independent set-up a backend's loops run over (kael/native/cuda/pointwise.cuh):
  // the tensor written (in the output dtype), the operands, and the tensor inputs converted
  // to the compute dtype (undefined for number operands), all broadcast to shape().
  const Tensor& output() const { return out_; }
  const Operand& operand(int k) const { return *operands_[k]; }
  const Tensor& input(int k) const { return converted_[k]; }
  IntArrayRef shape() const { return shape_; }

 private:
  void setup(std::initializer_list<const Operand*> inputs);
  void allocate_output();
  DimVector result_strides() const;
  template <typename Out, typename T, int K, typename F>
  void run_tensors(const std::array<int, K>& which, F f);

  const PointwiseSpec& spec_;
  int count_ = 0;
  std::array<const Operand*, kMaxInputs> operands_{};
  std::array<Tensor, kMaxInputs> converted_;  // tensor inputs in the compute dtype
  DimVector shape_;
  ScalarType compute_ = ScalarType::Float32;
  ScalarType out_dtype_ = ScalarType::Float32;
  Tensor out_;
  const Tensor* self_ = nullptr;  // the tensor written: self of an in-place call, or out
  Device device_ = kCPU;          // of the tensor operands (all on one device)
  const char* suffix_ = "";       // "_" for in-place calls, in messages
  void check_destination();
  void check_overlap(const char* suffix);
  void begin_write();
};

// The promoted dtype of the operands (see Note [Type promotion]).
ScalarType result_type(std::initializer_list<const Operand*> operands);

// Helpers kernels share. Device-independent (aten/src/native/setup.cpp): a new tensor on a
// device, through its allocator; the same-device check with PyTorch's message
// ("<op>: expected all tensors to be on the same device, but found at least two devices, cpu
// and cuda:0"); copy_'s shape check; dtype conversion and copies that run the loops of the
// tensors' device.
Tensor empty_on(IntArrayRef sizes, ScalarType dtype, Device device);
Tensor empty_strided_on(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype, Device device);
[[noreturn]] void raise_device_mismatch(const char* op, Device expected, Device found);
inline void check_same_device(const char* op, Device expected, Device found) {
  if (expected != found) [[unlikely]] raise_device_mismatch(op, expected, found);
}
// copy_'s shape rule: src broadcasts to dst (ValueError otherwise).
void check_copy_shapes(const Tensor& dst, const Tensor& src);
Tensor to_dtype_on_device(const Tensor& src, ScalarType dtype);
void copy_on_device(const Tensor& dst, const Tensor& src);
inline Tensor alloc_cpu(IntArrayRef sizes, ScalarType dtype) { return empty_on(sizes, dtype, kCPU); }
inline Tensor alloc_strided_cpu(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype) {
  return empty_strided_on(sizes, strides, dtype, kCPU);
}
// dst <- src (broadcast to dst's shape, converted to dst's dtype); both on the CPU. Raises as
// PyTorch's copy_ does when dst writes one location twice or partially overlaps src, and reads
// src from a snapshot when they may overlap in a way too hard to tell (Note [Memory overlap]).
void copy_cpu(const Tensor& dst, const Tensor& src);
// copy_cpu as the copy_ kernel runs it: its loop may drop the caller's lock (Note [Concurrency]).
void copy_cpu_op(const Tensor& dst, const Tensor& src);
// A contiguous copy of src in new memory, same dtype.
Tensor snapshot_cpu(const Tensor& src);
// dst[...] = src with the semantics of PyTorch's __setitem__ (its copy_to), through the
// registered ops: a source of dst's shape is copied (copy_); a 0-d source is read first (clone),
// then copied; any other source is expanded to dst's shape, then copied. copy_ checks overlap
// (Note [Memory overlap]) against the source as expanded, before it writes.
void assign(const Tensor& dst, const Tensor& src);
// dst[...] = value: an expanded dst raises (as in PyTorch, although fill_ itself allows it), and
// the checked conversion of value names the op "index" (float16/bfloat16: rounded, unchecked,
// as PyTorch does); then fill_.
void assign(const Tensor& dst, const Scalar& value);
// The write of a composite in-place op (clamp_, div_(rounding_mode=), square_...): its result,
// computed out of place, is checked against self (the result dtype must cast to self's, the
// shape must be self's: "<op>: result type ... can't be cast ...", "<op>: output with shape
// ... doesn't match the broadcast shape ...") before copy_ writes it, so that a failing check
// leaves self untouched and an input that overlaps self was read whole first. Returns self.
const Tensor& write_in_place(const char* op, const Tensor& self, const Tensor& result);
// What such an op computes its result from: self, or a copy of self when autograd records the
// ops it calls (grad mode on and self or one of `others` requiring grad): those ops may save self
// for their backward, and the write would change it under them (the backward pass's version
// check would refuse it).
Tensor in_place_source(const Tensor& self, std::initializer_list<const Tensor*> others = {});
// src converted to dtype (a new contiguous tensor; src itself when it already has it).
Tensor to_dtype_cpu(const Tensor& src, ScalarType dtype);
// Resizes t as PyTorch's resize_ does: contiguous strides from its storage offset, its storage
// grown in place when too small (contents of new elements undefined).
void resize_tensor(const Tensor& t, IntArrayRef sizes);
// Writes value into every element of dst.
void fill_cpu(const Tensor& dst, const Scalar& value);
// Broadcast shape of a and b; RuntimeError (as torch) naming `op` when they are not broadcastable.
DimVector broadcast_shapes(const char* op, IntArrayRef a, IntArrayRef b);
// The same without raising: false (out unspecified) when a and b do not broadcast, for callers
// whose error is another (indexing's IndexError, index_put_'s shape mismatch of the values).
bool try_broadcast_shapes(IntArrayRef a, IntArrayRef b, DimVector& out);

inline OperandView view_of(const Tensor& t) {
  return {static_cast<char*>(t.data_ptr()), t.sizes(), t.strides(), static_cast<int>(t.element_size())};
}

template <typename T, typename Out, int K, typename F>
void PointwiseCall::run(F f) {
  static_assert(K >= 1 && K <= kMaxInputs);
  if constexpr (K == 1) {
    run_tensors<Out, T, 1>({0}, f);
  } else if constexpr (K == 2) {
    const bool t0 = operands_[0]->is_tensor(), t1 = operands_[1]->is_tensor();
    using M = opmath_t<T>;
    // PyTorch's mul and div read such a second input from its own value in float32
    const bool opmath_other = !std::is_same_v<M, T> && spec_.opmath_other_scalar && t0 &&
                              (!t1 || (operands_[1]->tensor().numel() == 1 && operands_[1]->tensor().dtype() != compute_));
    if (t0 && t1 && !opmath_other) {
      run_tensors<Out, T, 2>({0, 1}, f);
    } else if (t0) {
      const M b = !opmath_other ? static_cast<M>(operands_[1]->scalar().template to<T>())
                  : t1          ? operands_[1]->tensor().item().template to<M>()
                                : operands_[1]->scalar().template to<M>();
      run_tensors<Out, T, 1>({0}, [f, b](T a) { return f(a, b); });
    } else {
      const T a = operands_[0]->scalar().template to<T>();
      run_tensors<Out, T, 1>({1}, [f, a](T b) { return f(a, b); });
    }
  } else {
    // Three inputs: the numbers among them are bound into the formula, the tensors loop. The
    // numbers keep the precision the formula computes in (lerp's weight 0.3 is not rounded to
    // bfloat16 first, as in PyTorch; where's choice is rounded once, when stored).
    using M = opmath_t<T>;
    const bool t0 = operands_[0]->is_tensor(), t1 = operands_[1]->is_tensor(), t2 = operands_[2]->is_tensor();
    const M s0 = t0 ? M() : operands_[0]->scalar().template to<M>();
    const M s1 = t1 ? M() : operands_[1]->scalar().template to<M>();
    const M s2 = t2 ? M() : operands_[2]->scalar().template to<M>();
    if (t0 && t1 && t2) {
      run_tensors<Out, T, 3>({0, 1, 2}, f);
    } else if (t0 && t1) {
      run_tensors<Out, T, 2>({0, 1}, [f, s2](M a, M b) { return f(a, b, s2); });
    } else if (t0 && t2) {
      run_tensors<Out, T, 2>({0, 2}, [f, s1](M a, M c) { return f(a, s1, c); });
    } else if (t1 && t2) {
      run_tensors<Out, T, 2>({1, 2}, [f, s0](M b, M c) { return f(s0, b, c); });
    } else if (t0) {
      run_tensors<Out, T, 1>({0}, [f, s1, s2](M a) { return f(a, s1, s2); });
    } else if (t1) {
      run_tensors<Out, T, 1>({1}, [f, s0, s2](M b) { return f(s0, b, s2); });
    } else {
      run_tensors<Out, T, 1>({2}, [f, s0, s1](M c) { return f(s0, s1, c); });
    }
  }
}

// A bool input read as a byte, true when not 0 (Note [Bool bytes] in kael/core/convert.h).
template <typename F>
struct BoolLoads {
  F f;
  template <typename... A>
  KAEL_INNER_INLINE auto operator()(A... a) const {
    return f(static_cast<bool>(a != 0)...);
  }
};

template <typename Out, typename T, int K, typename F>
void PointwiseCall::run_tensors(const std::array<int, K>& which, F f) {
  if constexpr (std::is_same_v<T, bool>) {
    // bool inputs read as bytes (Note [Bool bytes])
    run_tensors<Out, std::uint8_t, K>(which, BoolLoads<F>{f});
    return;
  }
  begin_write();
  // The loop runs on the call's own tensors (Note [Concurrency] in kael/core/concurrency.h).
  UnlockedSection section;
  const Tensor& out = section.own(out_);
  std::array<const Tensor*, K> in;
  for (int k = 0; k < K; ++k) in[k] = &section.own(converted_[which[k]]);
  section.unlock();
  const PointwiseInner<Out, T, K, F> inner{f};
  // Fast path: every operand contiguous with the output's element count. Broadcasting that
  // keeps the count expands nothing, so all operands share one flat element order.
  bool flat = out.is_contiguous();
  const std::int64_t n = out.numel();
  for (int k = 0; k < K && flat; ++k) flat = in[k]->is_contiguous() && in[k]->numel() == n;
  if (flat) {
    std::array<char*, K + 1> ptrs;
    std::array<std::int64_t, K + 1> strides;
    ptrs[0] = static_cast<char*>(out.data_ptr());
    strides[0] = sizeof(Out);
    for (int k = 0; k < K; ++k) {
      ptrs[k + 1] = static_cast<char*>(in[k]->data_ptr());
      strides[k + 1] = sizeof(T);
    }
    if (n < kParallelGrain) {
      if (n > 0) inner.contiguous(ptrs.data(), n);
      return;
    }
    LoopGeometry<K + 1> g;
    g.shape.push_back(n);
    g.numel = n;
    for (int k = 0; k <= K; ++k) {
      g.data[k] = ptrs[k];
      g.strides[k].push_back(strides[k]);
    }
    run_rows<K + 1>(g, &PointwiseInner<Out, T, K, F>::row, &inner);
    return;
  }
  std::array<OperandView, K + 1> ops;
  ops[0] = view_of(out);
  for (int k = 0; k < K; ++k) ops[k + 1] = view_of(*in[k]);
  LoopGeometry<K + 1> g = make_geometry<K + 1>(shape_, ops);
  std::vector<char> repeated;  // Note [Repeating inputs] in kael/native/loops.h
  widen_repeating_inputs<K + 1>(g, 1, static_cast<std::int64_t>(sizeof(T)), repeated);
  run_rows<K + 1>(g, &PointwiseInner<Out, T, K, F>::row, &inner);
}

}  // namespace kael::native
