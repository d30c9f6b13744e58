// Helpers of the derivative formulas of views, copies and cat (see kael/autograd/formula_helpers.h).
#include <algorithm>
#include <numeric>
#include <utility>

#include "kael/autograd/formula_helpers.h"
#include "kael/autograd/slice_grad_target.h"
#include "kael/core/error.h"
#include "kael/ops/sum_to_size.h"
#include "kael/ops/add.h"
#include "kael/ops/arange.h"
#include "kael/ops/copy_.h"
#include "kael/ops/full.h"
#include "kael/ops/index_add.h"
#include "kael/ops/index_select.h"
#include "kael/ops/matmul.h"
#include "kael/ops/transpose.h"
#include "kael/ops/unsqueeze.h"
#include "kael/ops/mul.h"
#include "kael/ops/narrow.h"
#include "kael/ops/permute.h"
#include "kael/ops/reshape.h"
#include "kael/ops/select.h"
#include "kael/ops/slice.h"
#include "kael/ops/zeros.h"
#include "kael/ops/zeros_like.h"

namespace kael::autograd::detail {

namespace {
// The storage position of every element of a geometry, as an int64 tensor of its sizes.
Tensor positions(IntArrayRef sizes, IntArrayRef strides, std::int64_t offset) {
  const std::int64_t* none = nullptr;
  Tensor idx = kael::full(IntArrayRef(none, 0), Scalar(offset), ScalarType::Int64);
  const std::size_t n = sizes.size();
  for (std::size_t d = 0; d < n; ++d) {
    DimVector shape(n, 1);
    shape[d] = sizes[d];
    Tensor a = kael::mul(kael::arange(Scalar(sizes[d]), ScalarType::Int64), Scalar(strides[d]));
    idx = kael::add(idx, kael::reshape(a, shape));
  }
  return idx;
}

std::int64_t extent(IntArrayRef sizes, IntArrayRef strides, std::int64_t offset) {
  std::int64_t last = offset;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return offset;
    last += (sizes[d] - 1) * strides[d];
  }
  return last + 1;
}
}  // namespace

Tensor as_strided_backward(const Tensor& grad, const Tensor& self, IntArrayRef size, IntArrayRef stride,
                           std::optional<std::int64_t> storage_offset) {
  const std::int64_t view_offset = storage_offset.value_or(self.impl()->offset());
  const std::int64_t n = std::max(extent(size, stride, view_offset),
                                  extent(self.sizes(), self.strides(), self.impl()->offset()));
  const std::int64_t flat[] = {n};
  const std::int64_t minus_one[] = {-1};
  Tensor buf = kael::zeros(flat, grad.dtype());
  buf = kael::index_add(buf, 0, kael::reshape(positions(size, stride, view_offset), minus_one),
                        kael::reshape(grad, minus_one));
  Tensor at_self = kael::reshape(positions(self.sizes(), self.strides(), self.impl()->offset()), minus_one);
  return kael::reshape(kael::index_select(buf, 0, at_self), self.sizes());
}

Tensor*& slice_grad_target() {
  thread_local Tensor* target = nullptr;
  return target;
}

Tensor slice_backward(const Tensor& grad, IntArrayRef sizes, std::int64_t dim, std::optional<std::int64_t> start,
                      std::optional<std::int64_t> end, std::int64_t step) {
  // Note [Slice gradients added in place]
  Tensor* target = std::exchange(slice_grad_target(), nullptr);
  if (target != nullptr && target->dtype() == grad.dtype() &&
      std::equal(target->sizes().begin(), target->sizes().end(), sizes.begin(), sizes.end())) {
    kael::add_(kael::slice(*target, dim, start, end, step), grad);
    return *target;
  }
  Tensor g = kael::zeros(sizes, grad.dtype());
  kael::copy_(kael::slice(g, dim, start, end, step), grad);
  return g;
}

Tensor select_backward(const Tensor& grad, IntArrayRef sizes, std::int64_t dim, std::int64_t index) {
  Tensor g = kael::zeros(sizes, grad.dtype());
  kael::copy_(kael::select(g, dim, index), grad);
  return g;
}

Tensor permute_backward(const Tensor& grad, IntArrayRef dims) {
  const std::int64_t n = static_cast<std::int64_t>(dims.size());
  DimVector inverse(dims.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) inverse[wrap_dim("permute", dims[i], n)] = i;
  return kael::permute(grad, inverse);
}

std::vector<Tensor> cat_backward(const Tensor& grad, TensorList tensors, std::int64_t dim) {
  std::vector<Tensor> out;
  const std::int64_t d = wrap_dim("cat", dim, grad.dim());
  std::int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (t.dim() == 1 && t.numel() == 0 && grad.dim() != 1) {  // skipped by cat
      out.push_back(kael::zeros_like(t));
      continue;
    }
    const std::int64_t len = t.size(d);
    out.push_back(kael::narrow(grad, d, offset, len));
    offset += len;
  }
  return out;
}

Tensor matmul_backward(int which, const Tensor& grad, const Tensor& self, const Tensor& other) {
  // Promote vectors to matrices as matmul does, and grad with them.
  Tensor s = self, o = other, g = grad;
  if (self.dim() == 1) {
    s = kael::unsqueeze(self, 0);
    g = kael::unsqueeze(g, g.dim() == 0 ? 0 : -2 + (other.dim() == 1 ? 1 : 0));
  }
  if (other.dim() == 1) {
    o = kael::unsqueeze(other, 1);
    g = kael::unsqueeze(g, -1);
  }
  if (which == 0) {
    const Tensor r = kael::matmul(g, kael::transpose(o, -2, -1));
    return kael::reshape(kael::sum_to_size(r, s.sizes()), self.sizes());
  }
  // A column-major 2-d other (a transposed weight, as an LM head's x @ wte^T): its gradient is
  // computed as (g^T s)^T, so that it has other's layout and flows back to the weight it views
  // as a contiguous tensor, as mm_mat2_backward does.
  if (s.dim() == 2 && o.dim() == 2 && o.strides()[0] == 1 && o.strides()[1] == o.sizes()[0] && o.sizes()[0] > 1 &&
      o.sizes()[1] > 1)
    return kael::reshape(kael::transpose(kael::matmul(kael::transpose(g, 0, 1), s), 0, 1), other.sizes());
  const Tensor r = kael::matmul(kael::transpose(s, -2, -1), g);
  return kael::reshape(kael::sum_to_size(r, o.sizes()), other.sizes());
}

}  // namespace kael::autograd::detail
