// Composites that build index sequences or counts: repeat_interleave (the indices of repeated
// slices, then index_select), tril_indices/triu_indices, and histc (bincount of the bins).
// Written in terms of registered ops, so autograd, a Python key and every device see them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/arange.h"
#include "kael/ops/bincount.h"
#include "kael/ops/clamp.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/cumsum.h"
#include "kael/ops/empty.h"
#include "kael/ops/expand.h"
#include "kael/ops/floor.h"
#include "kael/ops/full.h"
#include "kael/ops/ge.h"
#include "kael/ops/index_select.h"
#include "kael/ops/le.h"
#include "kael/ops/logical_and.h"
#include "kael/ops/masked_select.h"
#include "kael/ops/amax.h"
#include "kael/ops/amin.h"
#include "kael/ops/mul.h"
#include "kael/ops/reshape.h"
#include "kael/ops/searchsorted.h"
#include "kael/ops/select.h"
#include "kael/ops/sub.h"
#include "kael/ops/to.h"
#include "kael/ops/zeros.h"

namespace kael::native {

// The indices 0..n-1 of `repeats` (1-d, int64 or int32, none negative), index i repeated
// repeats[i] times, in repeats' dtype: cumsum, then for each output position the first count
// whose running total exceeds it (searchsorted on the right).
Tensor repeat_interleave_counts(const Tensor& repeats, std::optional<std::int64_t> output_size) {
  constexpr const char* op = "repeat_interleave";
  KAEL_CHECK(repeats.dim() == 1, op << ": repeat_interleave only accept 1D vector as repeat (got a " << repeats.dim()
                                    << "-d tensor)");
  KAEL_CHECK_IMPLEMENTED(repeats.dtype() == ScalarType::Int64 || repeats.dtype() == ScalarType::Int32,
                         op << ": repeats has to be Long or Int tensor, got " << dtype_name(repeats.dtype()));
  const std::int64_t n = repeats.numel();
  KAEL_CHECK(n == 0 || kael::amin(repeats).item().to<std::int64_t>() >= 0, op << ": repeats can not be negative");
  const Tensor ends = kael::cumsum(repeats, 0, ScalarType::Int64);
  const std::int64_t total = n == 0 ? 0 : kael::select(ends, 0, n - 1).item().to<std::int64_t>();
  KAEL_CHECK(!output_size || *output_size == total, op << ": allocated size does not match required size (output_size "
                                                       << *output_size << ", the repeats sum to " << total << ")");
  const Tensor positions = kael::arange(Scalar(total), ScalarType::Int64, repeats.device());
  return kael::to(kael::searchsorted(ends, positions, false, true), repeats.dtype());
}

Tensor repeat_interleave_self_tensor(const Tensor& self, const Tensor& repeats, std::optional<std::int64_t> dim,
                                     std::optional<std::int64_t> output_size) {
  constexpr const char* op = "repeat_interleave";
  const std::int64_t flat[] = {-1};
  const Tensor input = dim ? self : kael::reshape(self, IntArrayRef(flat));
  const std::int64_t d = dim ? wrap_dim(op, *dim, self.dim()) : 0;
  KAEL_CHECK_INDEX(input.dim() > 0, op << ": dimension " << *dim << " of a 0-d tensor has no size");
  const std::int64_t length = input.sizes()[d];
  Tensor counts = repeats;
  if (repeats.dim() == 0 || (repeats.dim() == 1 && repeats.sizes()[0] == 1)) {
    const std::int64_t one[] = {1}, size[] = {length};
    counts = kael::expand(kael::reshape(repeats, IntArrayRef(one)), IntArrayRef(size));
  } else {
    KAEL_CHECK(repeats.dim() == 1, op << ": repeats must be 0-dim or 1-dim tensor (got a " << repeats.dim() << "-d one)");
    KAEL_CHECK(repeats.sizes()[0] == length, op << ": repeats must have the same size as input along dim, but got "
                                                   "repeats.size(0) = " << repeats.sizes()[0] << " and input.size("
                                                << d << ") = " << length);
  }
  return kael::index_select(input, d, repeat_interleave_counts(kael::contiguous(counts), output_size));
}

Tensor repeat_interleave_self_int(const Tensor& self, std::int64_t repeats, std::optional<std::int64_t> dim,
                                  std::optional<std::int64_t> output_size) {
  KAEL_CHECK(repeats >= 0, "repeat_interleave: Repeats must be non-negative, got " << repeats);
  const std::int64_t one[] = {1};
  return repeat_interleave_self_tensor(self, kael::full(IntArrayRef(one), Scalar(repeats), ScalarType::Int64,
                                                        self.device()),
                                       dim, output_size);
}

namespace {

__extension__ typedef __int128 Wide;  // (GCC's and Clang's 128-bit integer; -Wpedantic knows it so)

// The number of elements of a row x col matrix on and below its offset-th diagonal: row r holds
// clamp(r + offset + 1, 0, col) of them, so the rows [a, b) hold r + offset + 1 and the rows from
// b on all col (a closed form, since row and col may be far larger than the count).
Wide lower_count(std::int64_t row, std::int64_t col, std::int64_t offset) {
  if (row == 0 || col == 0) return 0;
  const Wide k = static_cast<Wide>(offset) + 1;
  const auto clamp_row = [&](Wide r) { return std::clamp<Wide>(r, 0, row); };
  const Wide a = clamp_row(1 - k), b = clamp_row(col - k);
  return (b - a) * (a + b - 1) / 2 + (b - a) * k + (row - b) * static_cast<Wide>(col);
}

// The (2, N) row and column indices of the lower (or upper) triangle of a row x col matrix, row
// by row, as PyTorch's tril_indices/triu_indices: N from the closed form, then written row by
// row from the first row that has any (each row written holds at least one, so the loop is as
// long as the result).
Tensor triangle_indices(const char* op, bool lower, std::int64_t row, std::int64_t col, std::int64_t offset,
                        std::optional<ScalarType> dtype, std::optional<Device> device) {
  KAEL_CHECK(row >= 0, op << ": row must be non-negative, got " << row);
  KAEL_CHECK(col >= 0, op << ": col must be non-negative, got " << col);
  const ScalarType t = dtype.value_or(ScalarType::Int64);
  KAEL_CHECK_IMPLEMENTED(t == ScalarType::Int64 || t == ScalarType::Int32,
                         op << ": \"" << op << "\" not implemented for '" << dtype_name(t) << "' (int64 or int32)");
  const Wide count = lower ? lower_count(row, col, offset)
                               : static_cast<Wide>(row) * col - lower_count(row, col, offset - 1);
  KAEL_CHECK(count <= std::numeric_limits<std::int64_t>::max() / 2,
             op << ": the " << row << " x " << col << " matrix has too many elements for a result");
  const auto n = static_cast<std::int64_t>(count);
  const std::int64_t size[] = {2, n};
  Tensor out = kael::empty(IntArrayRef(size), ScalarType::Int64);
  std::int64_t* rows = out.data<std::int64_t>();
  std::int64_t* cols = rows + n;
  std::int64_t i = 0;
  for (std::int64_t r = lower ? std::max<std::int64_t>(0, -offset) : 0; i < n; ++r) {
    // the columns [c0, c1) of row r
    const std::int64_t c0 = lower ? 0 : std::max<std::int64_t>(0, r + offset);
    const std::int64_t c1 = lower ? std::min<std::int64_t>(col, r + offset + 1) : col;
    for (std::int64_t c = c0; c < c1; ++c, ++i) {
      rows[i] = r;
      cols[i] = c;
    }
  }
  return kael::to(out, device.value_or(kCPU), t);
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

// Counts of input's elements in `bins` equal bins over [min, max] (the data's range when both
// are equal, widened by 1 each way if that is one value; a range that is not finite, as when the
// data hold NaN or inf, is an error); elements outside the range and NaN are not counted, the
// maximum goes in the last bin. Computed in float64, returned in
// input's dtype.
Tensor histc(const Tensor& self, std::int64_t bins, const Scalar& min, const Scalar& max) {
  constexpr const char* op = "histc";
  KAEL_CHECK_IMPLEMENTED(is_floating(self.dtype()),
                         op << ": \"histogram_cpu\" not implemented for '" << dtype_name(self.dtype()) << "'");
  KAEL_CHECK(bins > 0, op << ": bins must be > 0, but got " << bins << " for dimension 0");
  double lo = min.to<double>(), hi = max.to<double>();
  KAEL_CHECK(lo <= hi, op << ": max must be larger than min (min " << lo << ", max " << hi << ")");
  const std::int64_t flat_shape[] = {-1};
  const Tensor flat = kael::to(kael::reshape(self, IntArrayRef(flat_shape)), ScalarType::Float64);
  if (lo == hi && flat.numel() > 0) {  // the data's range (NaN or inf in it: not finite, below)
    lo = kael::amin(flat).item().to<double>();
    hi = kael::amax(flat).item().to<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  KAEL_CHECK(std::isfinite(lo) && std::isfinite(hi), op << ": range of [" << lo << ", " << hi << "] is not finite");
  const Tensor kept = kael::masked_select(flat, kael::logical_and(kael::ge(flat, Scalar(lo)), kael::le(flat, Scalar(hi))));
  const Tensor bin = kael::to(kael::floor(kael::mul(kael::sub(kept, Scalar(lo)), Scalar(static_cast<double>(bins) / (hi - lo)))),
                              ScalarType::Int64);
  // the maximum itself goes in the last bin
  const Tensor clamped = kael::clamp(bin, std::optional<Scalar>(Scalar(std::int64_t{0})),
                                     std::optional<Scalar>(Scalar(bins - 1)));
  return kael::to(kael::bincount(clamped, std::nullopt, bins), self.dtype());
}

}  // namespace kael::native
