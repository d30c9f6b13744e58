// Sequence composites written from registered ops (diff, repeat_interleave, tril_indices and
// triu_indices), so autograd, a Python key and every device see the ops they call.
#include <algorithm>
#include <optional>
#include <vector>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/any.h"
#include "kael/ops/arange.h"
#include "kael/ops/cat.h"
#include "kael/ops/clone.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/cumsum.h"
#include "kael/ops/expand.h"
#include "kael/ops/index_select.h"
#include "kael/ops/logical_xor.h"
#include "kael/ops/lt.h"
#include "kael/ops/narrow.h"
#include "kael/ops/nonzero.h"
#include "kael/ops/ones.h"
#include "kael/ops/repeat_interleave.h"
#include "kael/ops/reshape.h"
#include "kael/ops/searchsorted.h"
#include "kael/ops/select.h"
#include "kael/ops/sub.h"
#include "kael/ops/t.h"
#include "kael/ops/to.h"
#include "kael/ops/tril.h"
#include "kael/ops/triu.h"
#include "kael/ops/unsqueeze.h"

namespace kael::native {

Tensor diff(const Tensor& self, std::int64_t n, std::int64_t dim, const std::optional<Tensor>& prepend,
            const std::optional<Tensor>& append) {
  KAEL_CHECK(self.dim() > 0, "diff expects input to be at least one-dimensional");
  KAEL_CHECK(n >= 0, "diff: order must be non-negative but got " << n);
  Tensor x = self;
  if (prepend || append) {
    std::vector<Tensor> parts;
    if (prepend) parts.push_back(*prepend);
    parts.push_back(self);
    if (append) parts.push_back(*append);
    x = kael::cat(parts, dim);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t size = x.size(dim);
    if (size == 0) break;
    const Tensor a = kael::narrow(x, dim, 1, size - 1);
    const Tensor b = kael::narrow(x, dim, 0, size - 1);
    x = x.dtype() == ScalarType::Bool ? kael::logical_xor(a, b) : kael::sub(a, b);
  }
  return n == 0 ? kael::clone(x) : x;  // n == 0: a new tensor in the graph, as torch, never input itself
}

namespace {
// input flattened when dim is None, and dim wrapped and checked.
std::int64_t repeat_dim(Tensor& input, std::optional<std::int64_t> dim) {
  if (!dim) {
    const std::int64_t flat[] = {-1};
    input = kael::reshape(input, flat);
    return 0;
  }
  const std::int64_t d = *dim < 0 ? *dim + input.dim() : *dim;
  KAEL_CHECK_INDEX(d >= 0 && d < std::max<std::int64_t>(input.dim(), 1),
                   "repeat_interleave: Dimension out of range (expected to be in range of [" << -input.dim() << ", "
                   << input.dim() - 1 << "], but got " << d << ")");
  return d;
}

// Each slice along dim repeated `repeats` times: a new dim after dim, expanded, then merged.
Tensor repeat_each(const Tensor& input, std::int64_t dim, std::int64_t repeats) {
  KAEL_CHECK(repeats >= 0, "repeat_interleave: repeats can not be negative");
  const Tensor unsqueezed = kael::unsqueeze(input, dim + 1);  // raises for a 0-d input, dim being 0
  DimVector shape(input.sizes());
  DimVector expanded(unsqueezed.sizes());
  expanded[dim + 1] = repeats;
  shape[dim] *= repeats;
  return kael::reshape(kael::expand(unsqueezed, expanded.view()), shape.view());
}
}  // namespace

Tensor repeat_interleave_self_tensor(const Tensor& self, const Tensor& repeats, std::optional<std::int64_t> dim,
                                     std::optional<std::int64_t> /*output_size*/) {
  Tensor input = self;
  const std::int64_t d = repeat_dim(input, dim);
  if (repeats.dim() == 0) return repeat_each(input, d, repeats.item().to<std::int64_t>());
  KAEL_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  KAEL_CHECK(repeats.dtype() == ScalarType::Int64 || repeats.dtype() == ScalarType::Int32,
             "repeat_interleave: repeats has to be Long or Int tensor");
  KAEL_CHECK(repeats.numel() == input.size(d),
             "repeat_interleave: repeats must have the same size as input along dim, but got repeats.size(0) = "
                 << repeats.numel() << " and input.size(" << d << ") = " << input.size(d));
  KAEL_CHECK(repeats.numel() == 0 || !kael::any(kael::lt(repeats, 0), std::nullopt).item().to<bool>(),
             "repeat_interleave: repeats can not be negative");
  const Tensor ends = kael::cumsum(repeats, 0);
  const std::int64_t total = repeats.numel() ? kael::select(ends, 0, -1).item().to<std::int64_t>() : 0;
  const Tensor index =
      kael::searchsorted(ends, kael::arange(Scalar(total), ends.dtype(), ends.device()), false, true);
  return kael::index_select(input, d, index);
}

Tensor repeat_interleave_self_int(const Tensor& self, std::int64_t repeats, std::optional<std::int64_t> dim,
                                  std::optional<std::int64_t> /*output_size*/) {
  Tensor input = self;
  const std::int64_t d = repeat_dim(input, dim);
  return repeat_each(input, d, repeats);
}

// repeat_interleave(counts): the indices 0, 1, ... each repeated counts[i] times.
Tensor repeat_interleave_counts(const Tensor& self, std::optional<std::int64_t> output_size) {
  return kael::repeat_interleave(kael::arange(Scalar(self.numel()), std::nullopt, self.device()), self, 0,
                                 output_size);
}

namespace {
Tensor triangle_indices(const char* op, bool lower, std::int64_t row, std::int64_t col, std::int64_t offset,
                        std::optional<ScalarType> dtype, std::optional<Device> device) {
  KAEL_CHECK(row >= 0 && col >= 0, op << ": row and col must be non-negative, got " << row << " and " << col);
  KAEL_CHECK(!dtype || *dtype == ScalarType::Int64 || *dtype == ScalarType::Int32,
             "\"" << op << "\" not implemented for '" << *dtype << "'");
  const std::int64_t size[] = {row, col};
  const Tensor ones = kael::ones(size, ScalarType::Bool, device);
  const Tensor mask = lower ? kael::tril(ones, offset) : kael::triu(ones, offset);
  return kael::to(kael::contiguous(kael::t(kael::nonzero(mask))), dtype.value_or(ScalarType::Int64));
}
}  // namespace

Tensor tril_indices(std::int64_t row, std::int64_t col, std::int64_t offset, std::optional<ScalarType> dtype,
                    std::optional<Device> device) {
  return triangle_indices("tril_indices", true, row, col, offset, dtype, device);
}

Tensor triu_indices(std::int64_t row, std::int64_t col, std::int64_t offset, std::optional<ScalarType> dtype,
                    std::optional<Device> device) {
  return triangle_indices("triu_indices", false, row, col, offset, dtype, device);
}

}  // namespace kael::native
