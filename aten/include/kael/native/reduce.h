#pragma once
// Device-independent set-up of reductions over dims (sum, mean): which dims are reduced, the
// output's shape and dtype, the input in the dtype asked for, and the output allocated on the
// input's device. A backend kernel then only runs its loop (cpu/reduce.cpp).

#include <optional>
#include <vector>

#include "kael/core/tensor.h"

namespace kael::native {

struct ReduceDims {
  std::vector<bool> reduced;  // per input dim
  DimVector out_shape;        // with keepdim applied
  DimVector kept_shape;       // input shape with reduced dims set to 1
  std::int64_t count = 1;     // elements reduced into each output
  bool all = true;
};

// The dims `dim` reduces (every dim when None or empty); raises naming `op` for a dim out of
// range or given twice.
ReduceDims reduce_dims(const char* op, const Tensor& self, const std::optional<IntArrayRef>& dim, bool keepdim);

struct SumSetup {
  Tensor input;          // self, converted to dtype= first when given (as PyTorch does)
  ReduceDims dims;
  ScalarType out_dtype;  // sum: integral and bool inputs give int64; mean: a floating dtype
  Tensor out;            // uninitialised, on the input's device
};

// Checks and prepares sum (mean = false) or mean of self over dim.
SumSetup setup_sum(const Tensor& self, const std::optional<IntArrayRef>& dim, bool keepdim,
                   std::optional<ScalarType> dtype, bool mean);

}  // namespace kael::native
