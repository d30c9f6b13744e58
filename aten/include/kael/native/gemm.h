#pragma once
// kael's float32 GEMM for CPUs with AVX-512 (aten/src/native/cpu/gemm.cpp, Note [float32 GEMM]).

#include <cstdint>

namespace kael::native {

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

}  // namespace kael::native
