// Device-independent set-up of sum and mean (kael/native/reduce.h).
#include <cstdint>

#include "kael/core/error.h"
#include "kael/native/pointwise.h"
#include "kael/native/reduce.h"

namespace kael::native {

ReduceDims reduce_dims(const char* op, const Tensor& self, const std::optional<IntArrayRef>& dim, bool keepdim) {
  const std::int64_t nd = self.dim();
  ReduceDims r;
  r.reduced.assign(nd, !dim.has_value() || dim->empty());
  if (dim && !dim->empty()) {
    // every dim's range first (IndexError), then repeats (a 0-d tensor's dims are 0 and -1), as
    // PyTorch checks them
    for (std::int64_t d : *dim) wrap_dim(op, d, nd);
    std::uint64_t seen = 0;  // (a tensor has at most 64 dims)
    for (std::int64_t d : *dim) {
      const std::int64_t w = wrap_dim(op, d, nd);
      const std::uint64_t bit = std::uint64_t{1} << w;
      KAEL_CHECK(!(seen & bit), op << ": dim " << w << " appears multiple times in the list of dims");
      seen |= bit;
      if (nd > 0) r.reduced[w] = true;
    }
  }
  for (std::int64_t i = 0; i < nd; ++i) {
    const std::int64_t s = self.sizes()[i];
    if (r.reduced[i]) {
      r.count *= s;
      r.kept_shape.push_back(1);
      if (keepdim) r.out_shape.push_back(1);
    } else {
      r.all = false;
      r.kept_shape.push_back(s);
      r.out_shape.push_back(s);
    }
  }
  return r;
}

SumSetup setup_sum(const Tensor& self, const std::optional<IntArrayRef>& dim, bool keepdim,
                   std::optional<ScalarType> dtype, bool mean) {
  const char* op = mean ? "mean" : "sum";
  SumSetup s;
  if (mean) {
    s.out_dtype = dtype.value_or(self.dtype());
    KAEL_CHECK(is_floating(s.out_dtype),
               "mean: could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
               "Got: " << s.out_dtype);
  } else {
    s.out_dtype = dtype.value_or(is_floating(self.dtype()) ? self.dtype() : ScalarType::Int64);
  }
  s.dims = reduce_dims(op, self, dim, keepdim);
  // dtype= converts the input first, as PyTorch does (float -> int64 truncates each element).
  s.input = dtype ? to_dtype_on_device(self, *dtype) : self;
  s.out = empty_on(s.dims.out_shape, s.out_dtype, self.device());
  return s;
}

}  // namespace kael::native

namespace kael::native {

ReduceDims reduce_no_dims(const Tensor& self) {
  ReduceDims r;
  r.reduced.assign(self.dim(), false);
  r.all = self.dim() == 0;  // a 0-d input is its own (one-element) reduction
  for (std::int64_t s : self.sizes()) {
    r.kept_shape.push_back(s);
    r.out_shape.push_back(s);
  }
  return r;
}

ReduceDims reduce_dim(const char* op, const Tensor& self, std::optional<std::int64_t> dim, bool keepdim) {
  if (!dim) return reduce_dims(op, self, std::nullopt, keepdim);
  const std::int64_t d[] = {*dim};
  return reduce_dims(op, self, IntArrayRef(d), keepdim);
}

void check_nonempty_reduction(const char* op, const Tensor& self, const ReduceDims& r, bool dim_given,
                              NoDimError no_dim_error) {
  if (self.numel() != 0) return;
  if (!dim_given) {
    constexpr const char* kMessage =
        ": Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the "
        "'dim' argument.";
    if (no_dim_error == NoDimError::Index) KAEL_CHECK_INDEX(false, op << kMessage);
    KAEL_CHECK(false, op << kMessage);
  }
  for (std::int64_t d = 0; d < self.dim(); ++d)
    KAEL_CHECK_INDEX(!r.reduced[d] || self.sizes()[d] != 0,
                     op << ": Expected reduction dim " << d << " to have non-zero size.");
}

ReduceSetup setup_reduction(const Tensor& self, ReduceDims dims, ScalarType input_dtype, ScalarType out_dtype,
                            bool with_indices) {
  ReduceSetup s;
  s.input = self.dtype() == input_dtype ? self : to_dtype_on_device(self, input_dtype);
  s.out = empty_on(dims.out_shape, out_dtype, self.device());
  if (with_indices) s.indices = empty_on(dims.out_shape, ScalarType::Int64, self.device());
  s.dims = std::move(dims);
  return s;
}

ScalarType integer_upcast_dtype(const Tensor& self, std::optional<ScalarType> dtype) {
  if (dtype) return *dtype;
  return is_floating(self.dtype()) ? self.dtype() : ScalarType::Int64;
}

LineSetup setup_lines(const char* op, const Tensor& self, std::int64_t dim, ScalarType input_dtype,
                      ScalarType out_dtype, bool with_indices, std::int64_t out_length) {
  LineSetup s;
  s.dim = wrap_dim(op, dim, self.dim());
  DimVector shape;
  for (std::int64_t size : self.sizes()) shape.push_back(size);
  if (out_length >= 0 && !shape.empty()) shape[s.dim] = out_length;
  s.input = self.dtype() == input_dtype ? self : to_dtype_on_device(self, input_dtype);
  s.out = empty_on(shape, out_dtype, self.device());
  if (with_indices) s.indices = empty_on(shape, ScalarType::Int64, self.device());
  return s;
}

}  // namespace kael::native
