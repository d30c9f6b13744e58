// tensor_split and its spellings hsplit, vsplit and dsplit: views (narrow) of the input, so
// autograd, a Python key and every device see them; the checks and messages are PyTorch's.
#include <algorithm>
#include <vector>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/narrow.h"

namespace kael::native {

namespace {

void check_splittable(const char* op, const Tensor& self) {
  KAEL_CHECK(self.dim() > 0,
             op << ": tensor_split expected at least a 1-dimensional tensor, but got a tensor with " << self.dim()
                << " dims");
}

// Python's slice bounds: a negative index counts from the end, both are clamped to [0, size],
// and a stop before the start gives an empty piece.
std::int64_t clamp_index(std::int64_t i, std::int64_t size) {
  if (i < 0) i = i < -size ? 0 : i + size;
  return std::min(i, size);
}

std::vector<Tensor> split_at(const char* op, const Tensor& self, IntArrayRef indices, std::int64_t dim) {
  check_splittable(op, self);
  const std::int64_t d = wrap_dim(op, dim, self.dim());
  const std::int64_t size = self.sizes()[d];
  std::vector<Tensor> out;
  out.reserve(indices.size() + 1);
  std::int64_t start = 0;
  for (const std::int64_t index : indices) {
    const std::int64_t stop = clamp_index(index, size);
    out.push_back(kael::narrow(self, d, start, std::max<std::int64_t>(stop - start, 0)));
    start = stop;  // the next piece starts at this index even when it lies before this piece's start
  }
  out.push_back(kael::narrow(self, d, start, size - start));
  return out;
}

std::vector<Tensor> split_sections(const char* op, const Tensor& self, std::int64_t sections, std::int64_t dim) {
  check_splittable(op, self);
  KAEL_CHECK(sections > 0, op << ": number of sections must be larger than 0, got " << sections);
  const std::int64_t d = wrap_dim(op, dim, self.dim());
  const std::int64_t size = self.sizes()[d];
  const std::int64_t base = size / sections, longer = size % sections;
  std::vector<Tensor> out;
  out.reserve(static_cast<std::size_t>(std::min<std::int64_t>(sections, 1 << 20)));
  std::int64_t start = 0;
  for (std::int64_t i = 0; i < sections; ++i) {
    const std::int64_t length = base + (i < longer ? 1 : 0);
    out.push_back(kael::narrow(self, d, start, length));
    start += length;
  }
  return out;
}

// hsplit, vsplit, dsplit: tensor_split along a fixed dim of a tensor of at least min_dims dims;
// a number of sections must divide the dim's size.
void check_split_dims(const char* op, const Tensor& self, std::int64_t min_dims) {
  KAEL_CHECK(self.dim() >= min_dims, op << ": torch." << op << " requires a tensor with at least " << min_dims
                                        << " dimension, but got a tensor with " << self.dim() << " dimensions!");
}

std::vector<Tensor> split_evenly(const char* op, const Tensor& self, std::int64_t sections, std::int64_t dim,
                                 std::int64_t min_dims) {
  check_split_dims(op, self, min_dims);
  const std::int64_t size = self.sizes()[dim];
  KAEL_CHECK(sections != 0 && size % sections == 0,
             op << ": torch." << op << " attempted to split along dimension " << dim
                << ", but the size of the dimension " << size << " is not divisible by the split_size " << sections
                << "!");
  return split_sections(op, self, sections, dim);
}

}  // namespace

std::vector<Tensor> tensor_split_sections(const Tensor& self, std::int64_t sections, std::int64_t dim) {
  return split_sections("tensor_split", self, sections, dim);
}

std::vector<Tensor> tensor_split_indices(const Tensor& self, IntArrayRef indices, std::int64_t dim) {
  return split_at("tensor_split", self, indices, dim);
}

// A 0-d int64 tensor is a number of sections, a 1-d one the indices (read on the CPU, as PyTorch
// requires them to be).
std::vector<Tensor> tensor_split_tensor(const Tensor& self, const Tensor& tensor_indices_or_sections, std::int64_t dim) {
  constexpr const char* op = "tensor_split";
  const Tensor& spec = tensor_indices_or_sections;
  KAEL_CHECK(spec.device().is_cpu(), op << ": tensor_split expected tensor_indices_or_sections to be on cpu, but it's on "
                                        << spec.device());
  KAEL_CHECK(spec.dtype() == ScalarType::Int64,
             op << ": tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                << dtype_name(spec.dtype()));
  KAEL_CHECK(spec.dim() <= 1, op << ": tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                                    "one-dimensional tensor, but got a tensor with "
                                 << spec.dim() << " dims");
  if (spec.dim() == 0) return split_sections(op, self, spec.item().to<std::int64_t>(), dim);
  const Tensor dense = kael::contiguous(spec);
  const auto* data = static_cast<const std::int64_t*>(dense.data_ptr());
  const std::vector<std::int64_t> indices(data, data + dense.numel());
  return split_at(op, self, IntArrayRef(indices), dim);
}

std::vector<Tensor> hsplit_int(const Tensor& self, std::int64_t sections) {
  check_split_dims("hsplit", self, 1);
  return split_evenly("hsplit", self, sections, self.dim() == 1 ? 0 : 1, 1);
}
std::vector<Tensor> hsplit_array(const Tensor& self, IntArrayRef indices) {
  check_split_dims("hsplit", self, 1);
  return split_at("hsplit", self, indices, self.dim() == 1 ? 0 : 1);
}
std::vector<Tensor> vsplit_int(const Tensor& self, std::int64_t sections) {
  return split_evenly("vsplit", self, sections, 0, 2);
}
std::vector<Tensor> vsplit_array(const Tensor& self, IntArrayRef indices) {
  check_split_dims("vsplit", self, 2);
  return split_at("vsplit", self, indices, 0);
}
std::vector<Tensor> dsplit_int(const Tensor& self, std::int64_t sections) {
  return split_evenly("dsplit", self, sections, 2, 3);
}
std::vector<Tensor> dsplit_array(const Tensor& self, IntArrayRef indices) {
  check_split_dims("dsplit", self, 3);
  return split_at("dsplit", self, indices, 2);
}

}  // namespace kael::native
