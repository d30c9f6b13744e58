#pragma once
// Entry points of the CPU matmul (cpu/matmul.cpp) that other kernels call directly.

#include "kael/core/tensor.h"

namespace kael::native {

// bias + mat1 @ mat2 for 2-d mat1, mat2 (any strides) and a contiguous 1-d bias of mat2's column
// count, all float32 (or all float16/bfloat16 where oneDNN has the half matmul), the bias added
// in the GEMM's float32 accumulation and the result rounded once, as a GEMM with beta = 1
// (kael's GEMM starts each row of the result from the bias; oneDNN adds it to its accumulator). An undefined tensor when the operands do not qualify (other
// dtypes, shapes, small products): the caller then multiplies and adds itself. The caller has
// checked the shapes and dtypes.
Tensor addmm_bias_cpu(const Tensor& bias, const Tensor& mat1, const Tensor& mat2);

// mat1 @ mat2 as float32 for float16/bfloat16 mat1, mat2 of 2 dims (or 3, one batch dim of the
// same size) where oneDNN has the half matmul: the half operands are read in place (no float32
// copy of either), the sums are float32. An undefined tensor when they do not qualify. For the
// add* ops, which combine the product with their input in float32 and round once.
Tensor matmul_float32_cpu(const Tensor& mat1, const Tensor& mat2);

}  // namespace kael::native
