// Device-independent set-up of sum and mean (kael/native/reduce.h).
#include "kael/core/error.h"
#include "kael/native/pointwise.h"
#include "kael/native/reduce.h"

namespace kael::native {

ReduceDims reduce_dims(const char* op, const Tensor& self, const std::optional<IntArrayRef>& dim, bool keepdim) {
  const std::int64_t nd = self.dim();
  ReduceDims r;
  r.reduced.assign(nd, !dim.has_value() || dim->empty());
  if (dim && !dim->empty()) {
    for (std::int64_t d : *dim) {
      const std::int64_t w = wrap_dim(op, d, nd);
      if (nd == 0) continue;
      KAEL_CHECK(!r.reduced[w], op << ": dim " << w << " appears multiple times in the list of dims");
      r.reduced[w] = true;
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
