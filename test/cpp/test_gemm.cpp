// kael's float32 GEMM called directly (Note [float32 GEMM] in aten/src/native/cpu/gemm.cpp): strides
// matmul never passes (negative ones), accumulation, an empty sum, and a result whose rows are
// padded: every element against a float64 sum, and nothing written outside the result.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kael/native/gemm.h"
#include "kael/runtime/threads.h"

namespace {

using kael::native::gemm_f32;
using kael::native::gemm_f32_available;

struct Matrix {
  std::vector<float> storage;
  const float* origin;  // element (0, 0)
  std::int64_t rs, cs;
  float at(std::int64_t i, std::int64_t j) const { return origin[i * rs + j * cs]; }
};

// A rows x cols matrix in a buffer of its own, with the strides chosen by `layout`:
// 0 row-major, 1 column-major, 2 row-major with both strides negated, 3 every row the same.
Matrix make(std::int64_t rows, std::int64_t cols, int layout, std::mt19937& gen) {
  std::normal_distribution<float> dist;
  Matrix m;
  m.storage.resize(static_cast<std::size_t>(rows * cols));
  for (float& v : m.storage) v = dist(gen);
  m.origin = m.storage.data();
  switch (layout) {
    case 0:
      m.rs = cols, m.cs = 1;
      break;
    case 1:
      m.rs = 1, m.cs = rows;
      break;
    case 2:
      m.rs = -cols, m.cs = -1;
      m.origin += rows * cols - 1;
      break;
    default:
      m.rs = 0, m.cs = 1;
      break;
  }
  return m;
}

// Runs C (m x n, row stride ldc = n + 5, pad columns holding a sentinel) = [C +] A B and checks
// every element against the float64 sum within K * 2^-24 * |A||B|, and the pad untouched.
void check(std::int64_t m, std::int64_t n, std::int64_t k, int la, int lb, bool accumulate, std::mt19937& gen) {
  const Matrix a = make(m, k, la, gen), b = make(k, n, lb, gen);
  const std::int64_t ldc = n + 5;
  constexpr float kSentinel = -12345.0f;
  std::vector<float> c(static_cast<std::size_t>(m * ldc + 3), kSentinel), start(c.size());
  std::normal_distribution<float> dist;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) c[static_cast<std::size_t>(i * ldc + j)] = dist(gen);
  start = c;
  gemm_f32(m, n, k, a.origin, a.rs, a.cs, b.origin, b.rs, b.cs, c.data(), ldc, accumulate);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < ldc; ++j) {
      const std::size_t at = static_cast<std::size_t>(i * ldc + j);
      if (j >= n) {
        ASSERT_EQ(c[at], kSentinel) << "wrote outside the result at row " << i << " column " << j;
        continue;
      }
      double exact = accumulate ? start[at] : 0.0, magnitude = accumulate ? std::fabs(start[at]) : 0.0;
      for (std::int64_t p = 0; p < k; ++p) {
        exact += static_cast<double>(a.at(i, p)) * b.at(p, j);
        magnitude += std::fabs(static_cast<double>(a.at(i, p)) * b.at(p, j));
      }
      const double bound = static_cast<double>(k + 2) * std::ldexp(1.0, -24) * magnitude + 1e-30;
      ASSERT_LE(std::fabs(c[at] - exact), bound)
          << "C[" << i << ", " << j << "] of " << m << "x" << n << "x" << k << " layouts " << la << "," << lb;
    }
  }
  for (std::size_t t = static_cast<std::size_t>(m * ldc); t < c.size(); ++t) ASSERT_EQ(c[t], kSentinel);
}

TEST(Gemm, EveryLayoutAndEdgeAgainstFloat64) {
  if (!gemm_f32_available()) GTEST_SKIP() << "this build has no AVX-512 GEMM (matmul runs on oneDNN)";
  std::mt19937 gen(42);
  const std::int64_t shapes[][3] = {{1, 1, 1},   {1, 16, 5},   {13, 31, 15}, {14, 32, 16},  {15, 33, 17},
                                    {71, 40, 3}, {29, 95, 257}, {3, 1030, 9}, {150, 17, 300}};
  for (const auto& s : shapes)
    for (int la = 0; la < 4; ++la)
      for (int lb = 0; lb < 4; ++lb)
        for (bool acc : {false, true}) check(s[0], s[1], s[2], la, lb, acc, gen);
}

TEST(Gemm, ThreadedSplitsAgainstFloat64) {
  if (!gemm_f32_available()) GTEST_SKIP() << "this build has no AVX-512 GEMM (matmul runs on oneDNN)";
  const int previous = kael::intra_op_threads();
  kael::set_num_threads(3);
  std::mt19937 gen(7);
  check(100, 300, 300, 0, 0, false, gen);   // column ranges
  check(2000, 20, 260, 2, 1, true, gen);    // row ranges
  kael::set_num_threads(previous);
}

TEST(Gemm, AnEmptySumZeroesOrKeepsTheResult) {
  if (!gemm_f32_available()) GTEST_SKIP() << "this build has no AVX-512 GEMM (matmul runs on oneDNN)";
  std::vector<float> c(4 * 6, 3.0f);
  const float unused = 1.0f;
  gemm_f32(4, 5, 0, &unused, 0, 0, &unused, 0, 0, c.data(), 6, /*accumulate=*/true);
  for (float v : c) EXPECT_EQ(v, 3.0f);
  gemm_f32(4, 5, 0, &unused, 0, 0, &unused, 0, 0, c.data(), 6, /*accumulate=*/false);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(c[i * 6 + j], j < 5 ? 0.0f : 3.0f);
}

}  // namespace
