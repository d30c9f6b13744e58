#pragma once
// Device-independent set-up of reductions over dims (sum, mean, prod, amax, norm, var, argmax,
// ...) and of the ops along one dim (cumsum, sort, topk): which dims are reduced, the output's
// shape and dtype, the input in the dtype asked for, PyTorch's errors for empty reductions, and
// the outputs allocated on the input's device. A backend kernel then only runs its loop
// (cpu/reduce.cpp, cpu/reduce_ops.cpp, cpu/extremes.cpp, cpu/logsumexp.cpp, cpu/sort.cpp,
// cpu/scan.cpp).

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

// No dim reduced: all(x, dim=()) and any(x, dim=()) reduce nothing, as in PyTorch.
ReduceDims reduce_no_dims(const Tensor& self);

// The dims one int `dim` reduces (every dim when None).
ReduceDims reduce_dim(const char* op, const Tensor& self, std::optional<std::int64_t> dim, bool keepdim);

// PyTorch's errors for a reduction without an identity (max, amin, argmax, norm with p=inf)
// over no elements: with no dim given (or every dim) and an empty input, `no_dim_error` ("<op>:
// Expected reduction dim to be specified for input.numel() == 0. ..."); a reduced dim of size 0
// otherwise (IndexError "<op>: Expected reduction dim 1 to have non-zero size."). The class of
// the first follows PyTorch: RuntimeError for max/amax, IndexError for argmax.
enum class NoDimError { Runtime, Index };
void check_nonempty_reduction(const char* op, const Tensor& self, const ReduceDims& r, bool dim_given,
                              NoDimError no_dim_error);

struct ReduceSetup {
  Tensor input;    // self, converted to the dtype the kernel reads
  ReduceDims dims;
  Tensor out;      // uninitialised, contiguous, on the input's device
  Tensor indices;  // int64 like out, for value-and-index reductions (max.dim); else undefined
};

// The set-up of a reduction that reads `input_dtype` and writes `out_dtype`.
ReduceSetup setup_reduction(const Tensor& self, ReduceDims dims, ScalarType input_dtype, ScalarType out_dtype,
                            bool with_indices = false);

// The dtype prod, cumsum and cumprod compute and return in: dtype= when given, int64 for
// integral and bool inputs, the input's own dtype otherwise.
ScalarType integer_upcast_dtype(const Tensor& self, std::optional<ScalarType> dtype);

// Ops along one dim (cumsum, cumprod, sort, topk): the input viewed as lines along `dim`.
struct LineSetup {
  Tensor input;       // converted to the dtype the kernel reads
  std::int64_t dim;   // wrapped; 0 for a 0-d input
  Tensor out;         // the values, contiguous (uninitialised)
  Tensor indices;     // int64, same shape as out (sort, topk); else undefined
};

// out (and indices) have self's shape with dim's size replaced by `out_length` (-1: kept).
LineSetup setup_lines(const char* op, const Tensor& self, std::int64_t dim, ScalarType input_dtype,
                      ScalarType out_dtype, bool with_indices, std::int64_t out_length = -1);

}  // namespace kael::native
