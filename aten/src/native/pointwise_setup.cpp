// Set-up of pointwise calls, the same for every device (it allocates and converts through the
// device-neutral helpers of setup.cpp); see kael/native/pointwise.h and Note [Loop geometry].
#include "kael/native/pointwise.h"

#include <algorithm>

#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/core/warning.h"

namespace kael::native {

bool try_broadcast_shapes(IntArrayRef a, IntArrayRef b, DimVector& out) {
  if (a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin())) {
    out = DimVector(a);
    return true;
  }
  const std::size_t n = std::max(a.size(), b.size());
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

DimVector broadcast_shapes(const char* op, IntArrayRef a, IntArrayRef b) {
  DimVector out;
  KAEL_CHECK(try_broadcast_shapes(a, b, out), op << ": shapes " << shape_str(a) << " and " << shape_str(b)
                                                 << " are not broadcastable");
  return out;
}

DimVector broadcast_strides(IntArrayRef shape, const OperandView& op, std::int64_t scale) {
  const std::int64_t nd = static_cast<std::int64_t>(shape.size());
  const std::int64_t od = static_cast<std::int64_t>(op.sizes.size());
  DimVector out(nd, 0);
  // An operand with elements has strides in bytes that fit in int64 (its storage does); an empty
  // one's may not (shape (0, 2^62)), and nothing reads them, so the product wraps there.
  for (std::int64_t i = 0; i < od; ++i)
    out[nd - od + i] = op.sizes[i] == 1 ? 0
                                        : static_cast<std::int64_t>(static_cast<std::uint64_t>(op.strides[i]) *
                                                                    static_cast<std::uint64_t>(scale));
  return out;
}

DimVector iteration_order(IntArrayRef shape, const DimVector* strides, int count) {
  // PyTorch's rule: an operand whose strides differ decides (smaller stride is faster); equal
  // strides prefer the larger dim slower; stride-0 (broadcast) dims decide nothing.
  auto compare = [&](std::int64_t d0, std::int64_t d1) {
    for (int k = 0; k < count; ++k) {
      const std::int64_t s0 = strides[k][d0], s1 = strides[k][d1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  const std::int64_t nd = static_cast<std::int64_t>(shape.size());
  DimVector perm(nd);  // perm[0] is the fastest dim; start from row-major order
  for (std::int64_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  for (std::int64_t i = 1; i < nd; ++i) {  // insertion sort, stable for undecided pairs
    std::int64_t d1 = i;
    for (std::int64_t d0 = i - 1; d0 >= 0; --d0) {
      const int c = compare(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  return perm;
}

DimVector output_strides_like(IntArrayRef shape, const OperandView* inputs, int count) {
  // The inputs' iteration order, then contiguous strides in that order.
  DimVector bstrides[PointwiseCall::kMaxInputs];
  for (int k = 0; k < count; ++k) bstrides[k] = broadcast_strides(shape, inputs[k], 1);
  const DimVector perm = iteration_order(shape, bstrides, count);
  const std::int64_t nd = static_cast<std::int64_t>(shape.size());
  DimVector strides(nd);
  std::int64_t s = 1;
  for (std::int64_t i = 0; i < nd; ++i) {
    strides[perm[i]] = s;
    s *= std::max<std::int64_t>(shape[perm[i]], 1);
  }
  return strides;
}

PointwiseCall::PointwiseCall(const PointwiseSpec& spec, std::initializer_list<const Operand*> inputs)
    : spec_(spec) {
  setup(inputs);
  allocate_output();
}

PointwiseCall::PointwiseCall(const PointwiseSpec& spec, const Tensor& self,
                             std::initializer_list<const Operand*> inputs)
    : spec_(spec), self_(&self), suffix_("_") {
  setup(inputs);
  KAEL_CHECK(shape_ == DimVector(self.sizes()), spec_.name << "_: output with shape " << shape_str(self.sizes())
                                                           << " doesn't match the broadcast shape "
                                                           << shape_str(shape_));
  check_destination();
}

PointwiseCall::PointwiseCall(const PointwiseSpec& spec, const Tensor& out,
                             std::initializer_list<const Operand*> inputs, OutArgument)
    : spec_(spec), self_(&out), suffix_("") {
  setup(inputs);
  // Numbers only (add(1.0, 2.0, out=o)): out gave the call its dispatch key, but the loops need
  // a tensor input; the error of the call without out= (dispatch::check_has_tensor).
  KAEL_CHECK_TYPE(std::any_of(operands_.begin(), operands_.begin() + count_,
                              [](const Operand* op) { return op->is_tensor(); }),
                  spec_.name << ": expected at least one tensor argument, got only numbers");
  check_same_device(spec_.name, device_, out.device());
  // An out that is also an input is not resized (PyTorch's read-write operand).
  for (int k = 0; k < count_; ++k)
    KAEL_CHECK(!operands_[k]->is_tensor() || !operands_[k]->tensor().is_same(out) ||
                   shape_ == DimVector(out.sizes()),
               spec_.name << ": output with shape " << shape_str(out.sizes()) << " doesn't match the broadcast shape "
                          << shape_str(shape_));
  check_destination();
}

// Every check on the destination, before anything is written (out is checked as given, before
// a resize would give it new memory, as PyTorch does): the result dtype must cast to it, and its
// memory must not overlap the inputs (see Note [Memory overlap]).
void PointwiseCall::check_destination() {
  check_overlap(suffix_);
  const Tensor& dst = *self_;
  KAEL_CHECK(can_cast(out_dtype_, dst.dtype()), spec_.name << suffix_ << ": result type " << out_dtype_
                                                           << " can't be cast to the desired output type "
                                                           << dst.dtype());
}

// The first write: resizes out when the shape differs (with a warning if it had elements, as in
// PyTorch), bumps the version and writes into the destination directly when the dtypes agree
// (otherwise into a temporary that finish() copies over with copy_, which bumps it then).
void PointwiseCall::begin_write() {
  if (self_ == nullptr) return;  // a fresh output
  const Tensor& dst = *self_;
  if (shape_ != DimVector(dst.sizes())) {
    if (dst.numel() > 0)
      warn(WarningKind::User, std::string(spec_.name) + ": an output with one or more elements was resized since it "
                                  "had shape " + shape_str(dst.sizes()) + ", which does not match the required "
                                  "output shape " + shape_str(shape_));
    resize_tensor(dst, shape_);
    // PyTorch lays a resized output out as it would a new one: in the inputs' order. The
    // permuted strides span the same elements as the row-major ones resize_ made room for.
    const DimVector strides = result_strides();
    if (!strides.empty()) dst.impl()->set_geometry(DimVector(shape_), strides, dst.impl()->offset());
  }
  if (dst.dtype() == out_dtype_) {
    dst.bump_version();
    out_ = dst;
  } else {
    allocate_output();  // finish() writes dst with copy_, which bumps its version
  }
}

// See Note [Memory overlap]: the destination must not write one location twice nor partially
// overlap an input; an input that may share memory with it in a layout too hard to tell is
// read from a snapshot, so no write can reach it before it is read.
void PointwiseCall::check_overlap(const char* suffix) {
  const Tensor& dst = *self_;
  const std::string op = std::string(spec_.name) + suffix;
  assert_no_internal_overlap(op.c_str(), dst);
  for (int k = 0; k < count_; ++k) {
    if (!operands_[k]->is_tensor()) continue;
    const Tensor& input = operands_[k]->tensor();
    const MemOverlapStatus status = get_overlap_status(dst, input);
    assert_no_partial_overlap(op.c_str(), dst, input);
    if (status == MemOverlapStatus::TooHard && converted_[k].is_same(input) && may_share_memory(dst, input)) {
      Tensor snapshot = empty_on(input.sizes(), input.dtype(), input.device());
      copy_on_device(snapshot, input);
      converted_[k] = std::move(snapshot);
    }
  }
}

// PyTorch's resize_: contiguous strides from the tensor's storage offset, in its storage when
// (offset + numel) elements fit, otherwise the storage grows in place (Note [Growing a storage
// in place] in kael/core/storage.h), so views sharing it see the result.
void resize_tensor(const Tensor& t, IntArrayRef sizes) {
  TensorImpl* impl = t.impl();
  const std::int64_t n = checked_numel("resize_", sizes);
  if (n > 0) {
    std::int64_t elements = 0, bytes = 0;
    KAEL_CHECK(!__builtin_add_overflow(impl->offset(), n, &elements) &&
                   !__builtin_mul_overflow(elements, static_cast<std::int64_t>(itemsize(t.dtype())), &bytes),
               "resize_: storage size calculation overflowed for size " << shape_str(sizes) << " at offset "
                                                                         << impl->offset());
    impl->storage()->grow(static_cast<std::size_t>(bytes), "resize_");
  }
  impl->set_geometry(DimVector(sizes), contiguous_strides(sizes), impl->offset());
}

void PointwiseCall::setup(std::initializer_list<const Operand*> inputs) {
  ResultTypeState state;
  bool has_device = false;
  for (const Operand* op : inputs) {
    const bool promotes = !(spec_.condition_first && count_ == 0);
    operands_[count_++] = op;
    if (op->is_tensor()) {
      const Tensor& t = op->tensor();
      if (promotes) state.add_tensor(t.dtype(), t.dim() == 0);
      if (!has_device) device_ = t.device();
      has_device = true;
      check_same_device(spec_.name, device_, t.device());
    } else if (promotes) {
      state.add_wrapped(op->scalar().wrapped_dtype());
    }
  }
  compute_ = state.result();
  if (spec_.promotion == Promotion::IntToFloat && !is_floating(compute_)) compute_ = default_dtype();
  KAEL_CHECK_IMPLEMENTED((spec_.dtypes >> static_cast<int>(compute_)) & 1u,
                         spec_.name << ": not implemented for dtype " << compute_);
  out_dtype_ = spec_.promotion == Promotion::AlwaysBool ? ScalarType::Bool : compute_;

  bool first = true;
  for (int k = 0; k < count_; ++k) {
    if (!operands_[k]->is_tensor()) continue;
    const Tensor& t = operands_[k]->tensor();
    converted_[k] = t.dtype() == compute_ ? t : to_dtype_on_device(t, compute_);
    if (first) {
      shape_ = DimVector(t.sizes());
      first = false;
    } else {
      shape_ = broadcast_shapes(spec_.name, shape_, t.sizes());
    }
  }
}

// The strides of a result of shape_: row-major when every tensor input is contiguous (returns
// an empty vector), otherwise the order the inputs follow.
// The layout follows the inputs as PyTorch's TensorIterator sees them: an input in the compute
// dtype as given, a converted one as `t.to(dtype)` would lay it out (memory format preserved):
// its own strides when it is non-overlapping and dense, row-major otherwise. So exp of a
// transposed int64 tensor is a transposed float32 one, while an expanded float32 input that
// is promoted to float64 decides nothing about the order.
DimVector PointwiseCall::result_strides() const {
  if (spec_.number_self_contiguous && !operands_[0]->is_tensor()) return {};
  bool all_contiguous = true;
  OperandView views[kMaxInputs];
  DimVector row_major[kMaxInputs];
  int n = 0;
  for (int k = 0; k < count_; ++k) {
    if (!operands_[k]->is_tensor()) continue;
    const Tensor& t = operands_[k]->tensor();
    all_contiguous = all_contiguous && t.is_contiguous();
    views[n] = view_of(t);
    if (t.dtype() != compute_ && !t.is_contiguous() && !is_non_overlapping_and_dense(t)) {
      row_major[n] = contiguous_strides(t.sizes());
      views[n].strides = row_major[n];
    }
    ++n;
  }
  if (all_contiguous) return {};
  return output_strides_like(shape_, views, n);
}

void PointwiseCall::allocate_output() {
  const DimVector strides = result_strides();
  if (strides.empty()) {
    out_ = empty_on(shape_, out_dtype_, device_);
  } else {
    out_ = empty_strided_on(shape_, strides, out_dtype_, device_);
  }
}

Tensor PointwiseCall::finish() {
  if (self_ == nullptr) return std::move(out_);
  if (!out_.is_same(*self_)) copy_on_device(*self_, out_);
  return *self_;
}

}  // namespace kael::native
