#pragma once
// Entry points of the CPU matmul (cpu/matmul.cpp) that other kernels call directly.

#include "kael/core/tensor.h"

namespace kael::native {

// bias + mat1 @ mat2 for 2-d float32 mat1, mat2 (any strides) and a contiguous 1-d float32 bias
// of mat2's column count, the bias added in the GEMM's float32 accumulation, as a GEMM with
// beta = 1 (kael's GEMM starts each row of the result from the bias; oneDNN adds it to its
// accumulator). An undefined tensor when the operands do not qualify (other
// dtypes, shapes, small products): the caller then multiplies and adds itself. The caller has
// checked the shapes and dtypes.
Tensor addmm_bias_cpu(const Tensor& bias, const Tensor& mat1, const Tensor& mat2);

}  // namespace kael::native
