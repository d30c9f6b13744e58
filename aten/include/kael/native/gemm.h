#pragma once
// kael's float32 GEMM for CPUs with AVX-512 (aten/src/native/cpu/gemm.cpp, Note [float32 GEMM]).

#include <cstdint>

#include "kael/core/scalar_type.h"

namespace kael::native {

// The k blocks of the GEMM's sums (Note [float32 GEMM]): each C element is a sum of one float32
// FMA chain per block of kGemmKBlock, in ascending order; gemm_small_m sums the same way.
inline constexpr std::int64_t kGemmKBlock = 256;

// Whether this build has the AVX-512 kernel (the build targets x86-64-v4); without it
// gemm_f32 must not be called and matmul stays on oneDNN.
bool gemm_f32_available() noexcept;

// Multiply-adds (m * n * k) below which gemm_f32 runs on the calling thread.
constexpr std::int64_t kGemmParallelWork = std::int64_t{1} << 23;

// One row-major M x N matrix product with arbitrary operand strides (elements, any sign, 0 for a
// broadcast dim):
//   C[i, j] (+)= sum_k A[i*a_rs + k*a_cs] * B[k*b_rs + j*b_cs]     (C row-major, ldc >= N)
// accumulate: add to C's values instead of overwriting them. Every C element is summed over k in
// the same order (ascending blocks of kKc, each block one float32 FMA chain) whatever the thread
// count, the matrix's size or where the element lies in it, so results do not depend on how the
// work is split. Runs on kael's pool (parallel_for) when the product is large enough; the caller
// holds no lock that a worker needs.
void gemm_f32(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_rs, std::int64_t a_cs,
              const float* b, std::int64_t b_rs, std::int64_t b_cs, float* c, std::int64_t ldc, bool accumulate);


// The most rows gemm_small_m takes.
inline constexpr std::int64_t kSmallM = 8;

// C (+)= A @ B for a product of few rows (m <= kSmallM), the weight-streaming case of a layer
// applied to a few tokens (Note [Small-M products] in cpu/gemm_small_m.cpp):
//   C[i, j] (+)= sum_k A[i*a_rs + k*a_cs] * B[k*b_rs + j*b_cs]     (C row-major, ldc >= n)
// A is float32 (any strides); B is float32, bfloat16 or float16 (b_type) with contiguous rows
// (b_cs == 1: a (k, n) row-major matrix, Conv1D's weight) or contiguous columns (b_rs == 1: the
// transpose of a row-major (n, k) matrix, Linear's w.t() or the LM head's wte.t()); the sums are
// float32, in the order of gemm_f32 (ascending kGemmKBlock blocks, one FMA chain each), so a row's
// results do not depend on m, on the thread count, or on whether gemm_f32 or this computes them.
// Splits B's columns among kael's pool when B is large enough. Returns false, having done
// nothing, when the operands do not qualify (m > kSmallM, another layout or dtype, no AVX-512).
bool gemm_small_m(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_rs,
                  std::int64_t a_cs, const void* b, ScalarType b_type, std::int64_t b_rs, std::int64_t b_cs,
                  float* c, std::int64_t ldc, bool accumulate);

}  // namespace kael::native
