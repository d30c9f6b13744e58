// Bool tensors with bytes other than 0 and 1 (Note [Bool bytes] in kael/core/convert.h;
// kael/native/bool_input.h).
#include "kael/native/bool_input.h"

#include <cstdint>

#include "kael/core/small_vector.h"
#include "kael/core/tensor_impl.h"
#include "kael/ops/empty.h"

namespace kael::native {

namespace {

// t's geometry with each dim of stride 0 (an expanded dim: the same bytes again) cut to size 1.
struct Distinct {
  DimVector sizes, strides;
};

Distinct distinct_elements(const Tensor& t) {
  Distinct d{DimVector(t.sizes()), DimVector(t.strides())};
  for (std::size_t i = 0; i < d.sizes.size(); ++i)
    if (d.strides[i] == 0 && d.sizes[i] > 0) d.sizes[i] = 1;
  return d;
}

// f(row, n, stride) for each innermost row of the elements at `base` with the given geometry
// (byte strides: bool's element is a byte); a 0-d tensor is one row of one element. Nothing for
// no elements.
template <typename F>
void for_each_row(const unsigned char* base, const DimVector& sizes, const DimVector& strides, F f) {
  const std::size_t nd = sizes.size();
  for (const std::int64_t s : sizes)
    if (s == 0) return;
  if (nd == 0) {
    f(base, 1, 1);
    return;
  }
  DimVector index(nd, 0);
  const std::int64_t n = sizes[nd - 1], stride = strides[nd - 1];
  for (;;) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d + 1 < nd; ++d) offset += index[d] * strides[d];
    f(base + offset, n, stride);
    std::size_t d = nd - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

bool bool_bytes_canonical(const Tensor& t) {
  const Distinct d = distinct_elements(t);
  unsigned char bits = 0;  // every byte's bits ORed: 0 or 1 only when each byte is
  for_each_row(static_cast<const unsigned char*>(t.data_ptr()), d.sizes, d.strides,
               [&](const unsigned char* row, std::int64_t n, std::int64_t stride) {
                 if (stride == 1) {
                   for (std::int64_t i = 0; i < n; ++i) bits |= row[i];
                 } else {
                   for (std::int64_t i = 0; i < n; ++i) bits |= row[i * stride];
                 }
               });
  return (bits & 0xFE) == 0;
}

Tensor canonical_bool_copy(const Tensor& t) {
  const Distinct d = distinct_elements(t);
  const Tensor dense = kael::empty(d.sizes, ScalarType::Bool, t.device());
  auto* out = static_cast<unsigned char*>(dense.data_ptr());
  for_each_row(static_cast<const unsigned char*>(t.data_ptr()), d.sizes, d.strides,
               [&](const unsigned char* row, std::int64_t n, std::int64_t stride) {
                 for (std::int64_t i = 0; i < n; ++i) *out++ = row[i * stride] != 0 ? 1 : 0;
               });
  // t's shape again, the expanded dims over the one copy of their bytes
  DimVector strides(dense.strides());
  for (std::size_t i = 0; i < strides.size(); ++i)
    if (t.strides()[i] == 0) strides[i] = 0;
  return Tensor(TensorImpl::make(dense.impl()->storage_ptr(), ScalarType::Bool, DimVector(t.sizes()),
                                 std::move(strides), 0));
}

}  // namespace kael::native
