// The CPU kernel of cat (cat_impl, which the list ops of list_ops.cpp also call).
#include <span>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/index_ops.h"
#include "kael/native/pointwise.h"
#include "index_kernels.h"

namespace kael::native {

using index_kernels::narrow_view;

Tensor cat_impl(std::span<const Tensor> tensors, std::int64_t dim) {
  constexpr const char* op = "cat";
  KAEL_CHECK_VALUE(!tensors.empty(), op << ": expected a non-empty list of Tensors");
  // PyTorch's legacy rule: 1-d empty tensors take no part in the shape checks
  auto skipped = [](const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; };
  const Tensor* ref = nullptr;
  ResultTypeState types;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KAEL_CHECK(t.dim() > 0, op << ": zero-dimensional tensor (at position " << i << ") cannot be concatenated");
    check_same_device(op, tensors[0].device(), t.device());
    types.add_tensor(t.dtype(), false);
    if (!ref && !skipped(t)) ref = &t;
  }
  const ScalarType dtype = types.result();
  if (!ref) {
    wrap_dim(op, dim, 1);
    return alloc_cpu(tensors[0].sizes(), dtype);
  }
  const std::int64_t nd = ref->dim();
  const std::int64_t d = wrap_dim(op, dim, nd);
  DimVector shape(ref->sizes());
  std::int64_t total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped(t)) continue;
    KAEL_CHECK(t.dim() == nd, op << ": Tensors must have same number of dimensions: got " << nd << " and "
                                 << t.dim());
    for (std::int64_t k = 0; k < nd; ++k)
      KAEL_CHECK(k == d || t.sizes()[k] == shape[k],
                 op << ": Sizes of tensors must match except in dimension " << d << ". Expected size "
                    << shape[k] << " but got size " << t.sizes()[k] << " for tensor number " << i
                    << " in the list (dimension " << k << ")");
    KAEL_CHECK(!__builtin_add_overflow(total, t.sizes()[d], &total), op << ": the result is too large");
  }
  shape[d] = total;
  Tensor out = alloc_cpu(shape, dtype);
  std::int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (skipped(t)) continue;
    const std::int64_t n = t.sizes()[d];
    if (n > 0) copy_cpu(narrow_view(out, d, offset, n), t);
    offset += n;
  }
  return out;
}

Tensor cat_cpu(TensorList tensors, std::int64_t dim) { return cat_impl(tensors, dim); }

}  // namespace kael::native
