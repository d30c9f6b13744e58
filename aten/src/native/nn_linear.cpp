// linear: addmm for a 2-d input or a flattened contiguous one with a bias row, else matmul and
// the bias added in place; composed of registered ops (CompositeImplicit), so every device's
// kernels serve it. The CPU kernels of addmm, bmm and baddbmm are cpu/addmm.cpp.
#include <algorithm>
#include <optional>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/add.h"
#include "kael/ops/addmm.h"
#include "kael/ops/matmul.h"
#include "kael/ops/t.h"
#include "kael/ops/view.h"

namespace kael::native {

Tensor linear(const Tensor& self, const Tensor& weight, const std::optional<Tensor>& bias) {
  KAEL_CHECK(weight.dim() == 1 || weight.dim() == 2,
             "linear: expected a 1-D or 2-D weight, got a " << weight.dim() << "-D tensor");
  KAEL_CHECK(self.dim() >= 1, "linear: expected an input of at least 1 dim, got a 0-D tensor");
  // As PyTorch: with a bias, a 2-d input is one addmm, and so is a contiguous input of any
  // other rank, flattened to 2-d, where the bias is contiguous and has one dim of more than one
  // element at most (a row, maybe with dims of 1): float16/bfloat16 round once, and the bias
  // and the weight must share the input's dtype. Otherwise matmul, then the bias added in place
  // (the product keeps its dtype and shape).
  if (bias) {
    if (self.dim() == 2) return kael::addmm(*bias, self, kael::t(weight));
    const IntArrayRef bias_sizes = bias->sizes();
    const bool row_bias = bias->dim() == 1 || std::count_if(bias_sizes.begin(), bias_sizes.end(),
                                                             [](std::int64_t n) { return n != 1; }) == 1;
    if (row_bias && bias->is_contiguous() && self.is_contiguous()) {
      const IntArrayRef sizes = self.sizes();
      // The rows are a product, not -1: a dim of 0 must not make the view ambiguous. With a
      // last dim of 0 the other dims may multiply past int64.
      std::int64_t rows = 1;
      bool overflow = false;
      for (std::size_t i = 0; i + 1 < sizes.size(); ++i) overflow |= __builtin_mul_overflow(rows, sizes[i], &rows);
      KAEL_CHECK(!overflow || std::find(sizes.begin(), sizes.end() - 1, 0) != sizes.end() - 1,
                 "linear: the input of shape " << shape_str(sizes) << " has more rows than int64 holds");
      if (overflow) rows = 0;
      const DimVector flat{rows, sizes.back()};
      const Tensor out = kael::addmm(*bias, kael::view(self, flat), kael::t(weight));
      DimVector shape;
      for (std::size_t i = 0; i + 1 < sizes.size(); ++i) shape.push_back(sizes[i]);
      shape.push_back(out.sizes()[1]);
      return kael::view(out, shape);
    }
  }
  Tensor out = kael::matmul(self, weight.dim() == 2 ? kael::t(weight) : weight);
  if (bias) kael::add_(out, *bias);
  return out;
}

}  // namespace kael::native
