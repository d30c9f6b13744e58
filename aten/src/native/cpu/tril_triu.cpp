// CPU kernels of tril and triu (and their in-place forms).
#include <algorithm>

#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "index_kernels.h"

namespace kael::native {

using index_kernels::clone_cpu;

namespace {

// Zeroes the elements of t (at least 2 dims) that tril (lower) or triu keeps out: column j of
// row i is kept when j - i <= diagonal (tril) or j - i >= diagonal (triu).
void zero_triangle(const Tensor& t, std::int64_t diagonal, bool lower) {
  const std::int64_t nd = t.dim();
  const std::int64_t rows = t.sizes()[nd - 2], cols = t.sizes()[nd - 1];
  if (t.numel() == 0) return;
  const std::int64_t rs = t.strides()[nd - 2], cs = t.strides()[nd - 1];
  diagonal = std::clamp<std::int64_t>(diagonal, -rows - 1, cols + 1);  // no overflow below
  const DimVector batch_shape(t.sizes().subspan(0, nd - 2));
  const DimVector batch_strides(t.strides().subspan(0, nd - 2));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto matrix = [&](char* base) {
      T* m = reinterpret_cast<T*>(base);
      for (std::int64_t i = 0; i < rows; ++i) {
        // tril zeroes columns (i + diagonal, cols); triu zeroes [0, i + diagonal)
        std::int64_t lo, hi;
        if (lower) {
          lo = std::clamp<std::int64_t>(i + diagonal + 1, 0, cols);
          hi = cols;
        } else {
          lo = 0;
          hi = std::clamp<std::int64_t>(i + diagonal, 0, cols);
        }
        for (std::int64_t j = lo; j < hi; ++j) m[i * rs + j * cs] = T(0);
      }
    };
    if (batch_shape.empty()) {
      matrix(static_cast<char*>(t.data_ptr()));
      return;
    }
    const OperandView v{static_cast<char*>(t.data_ptr()), batch_shape, batch_strides,
                        static_cast<int>(t.element_size())};
    const LoopGeometry<1> g = make_geometry<1>(batch_shape, {v});
    run_loop<1>(g, [&](char* const* ptrs, const std::int64_t* s, std::int64_t n) {
      for (std::int64_t b = 0; b < n; ++b) matrix(ptrs[0] + b * s[0]);
    });
  });
}

void check_triangle(const char* op, const Tensor& self) {
  KAEL_CHECK(self.dim() >= 2, op << ": input tensor must have at least 2 dimensions");
}

}  // namespace

Tensor tril_cpu(const Tensor& self, std::int64_t diagonal) {
  check_triangle("tril", self);
  Tensor out = clone_cpu(self);
  zero_triangle(out, diagonal, /*lower=*/true);
  return out;
}

Tensor triu_cpu(const Tensor& self, std::int64_t diagonal) {
  check_triangle("triu", self);
  Tensor out = clone_cpu(self);
  zero_triangle(out, diagonal, /*lower=*/false);
  return out;
}

const Tensor& tril_cpu_(const Tensor& self, std::int64_t diagonal) {
  check_triangle("tril_", self);
  assert_no_internal_overlap("tril_", self);
  self.bump_version();
  zero_triangle(self, diagonal, /*lower=*/true);
  return self;
}

const Tensor& triu_cpu_(const Tensor& self, std::int64_t diagonal) {
  check_triangle("triu_", self);
  assert_no_internal_overlap("triu_", self);
  self.bump_version();
  zero_triangle(self, diagonal, /*lower=*/false);
  return self;
}

}  // namespace kael::native
