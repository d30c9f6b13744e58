// Stacking, atleast_1d/2d/3d, meshgrid, cartesian_prod, block_diag, cross products and the
// Vandermonde matrix written in terms of registered ops, so autograd, a Python key and every
// device see those; checks and messages are PyTorch's.
#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/warning.h"
#include "kael/native/declarations.h"
#include "kael/ops/broadcast_tensors.h"
#include "kael/ops/cat.h"
#include "kael/ops/copy_.h"
#include "kael/ops/cumprod.h"
#include "kael/ops/expand.h"
#include "kael/ops/flip.h"
#include "kael/ops/mul.h"
#include "kael/ops/narrow.h"
#include "kael/ops/ones.h"
#include "kael/ops/reshape.h"
#include "kael/ops/select.h"
#include "kael/ops/stack.h"
#include "kael/ops/sub.h"
#include "kael/ops/to.h"
#include "kael/ops/unsqueeze.h"
#include "kael/ops/view.h"
#include "kael/ops/zeros.h"

namespace kael::native {

namespace {
// At least `rank` dims, as atleast_1d/2d/3d: (n,) -> (1, n) and (1, n, 1); (m, n) -> (m, n, 1).
Tensor at_least(const Tensor& t, std::int64_t rank) {
  const std::int64_t nd = t.dim();
  if (nd >= rank) return t;
  if (nd == 0) {
    const DimVector ones(static_cast<std::size_t>(rank), 1);
    return kael::reshape(t, IntArrayRef(ones));
  }
  if (nd == 1) {
    const Tensor row = kael::unsqueeze(t, 0);
    return rank == 2 ? row : kael::unsqueeze(row, -1);
  }
  return kael::unsqueeze(t, -1);  // 2-d, rank 3
}

std::vector<Tensor> all_at_least(const char* op, TensorList tensors, std::int64_t rank) {
  KAEL_CHECK(!tensors.empty(), op << ": " << op << " expects a non-empty TensorList");
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(at_least(t, rank));
  return out;
}
}  // namespace

Tensor hstack(TensorList tensors) {
  const std::vector<Tensor> rep = all_at_least("hstack", tensors, 1);
  return kael::cat(TensorList(rep), rep[0].dim() == 1 ? 0 : 1);
}

Tensor vstack(TensorList tensors) {
  const std::vector<Tensor> rep = all_at_least("vstack", tensors, 2);
  return kael::cat(TensorList(rep), 0);
}

Tensor dstack(TensorList tensors) {
  const std::vector<Tensor> rep = all_at_least("dstack", tensors, 3);
  return kael::cat(TensorList(rep), 2);
}

// Tensors of at most one dim become columns (n, 1); then hstack.
Tensor column_stack(TensorList tensors) {
  KAEL_CHECK(!tensors.empty(), "column_stack: column_stack expects a non-empty TensorList");
  std::vector<Tensor> columns;
  columns.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    const std::int64_t column[] = {t.numel(), 1};
    columns.push_back(t.dim() <= 1 ? kael::reshape(t, IntArrayRef(column)) : t);
  }
  return hstack(TensorList(columns));
}

// As PyTorch's: the columns x^0 .. x^(N-1) are ones followed by the running product of x (so
// the values are those of cumprod, not of pow), flipped unless increasing; integer and bool
// inputs give int64.
Tensor vander(const Tensor& x, std::optional<std::int64_t> N, bool increasing) {
  KAEL_CHECK(x.dim() == 1, "vander: x must be a one-dimensional tensor.");
  const std::int64_t rows = x.sizes()[0];
  const std::int64_t n = N.value_or(rows);
  KAEL_CHECK(n >= 0, "vander: N must be non-negative.");
  const ScalarType dtype = promote_types(x.dtype(), ScalarType::Int64);
  const std::int64_t first_shape[] = {rows, n > 0 ? 1 : 0};
  const Tensor first = kael::ones(IntArrayRef(first_shape), dtype, x.device());
  if (n <= 1) return first;
  const std::int64_t shape[] = {rows, n - 1};
  const Tensor powers = kael::cumprod(kael::expand(kael::unsqueeze(kael::to(x, dtype, false, false), 1), IntArrayRef(shape)),
                                      1, std::nullopt);
  const Tensor parts[] = {first, powers};
  const Tensor result = kael::cat(TensorList(parts), 1);
  if (increasing) return result;
  const std::int64_t dims[] = {1};
  return kael::flip(result, IntArrayRef(dims));
}

// The cross product of 3-vectors along dim, the others broadcast; without dim the first dim of
// size 3 of input, with PyTorch's deprecation warning (once per process, as PyTorch's).
Tensor cross(const Tensor& self, const Tensor& other, std::optional<std::int64_t> dim) {
  KAEL_CHECK(self.dim() == other.dim(), "linalg.cross: inputs must have the same number of dimensions.");
  // no type promotion, as PyTorch's kernel
  KAEL_CHECK(self.dtype() == other.dtype(), "cross: expected scalar type " << self.dtype()
                                                           << " but found " << other.dtype());
  const std::int64_t nd = self.dim();
  std::int64_t d = 0;
  if (!dim) {
    // once per process, as PyTorch's TORCH_WARN_ONCE
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      warn(WarningKind::User,
           "Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim explicitly or "
           "simply use torch.linalg.cross.\nThe default value of dim will change to agree with that of linalg.cross "
           "in a future release.");
    d = -1;  // the first dim of size 3 of input itself (not of the broadcast shape), as PyTorch's
    for (std::int64_t i = 0; i < self.dim() && d < 0; ++i)
      if (self.sizes()[static_cast<std::size_t>(i)] == 3) d = i;
    KAEL_CHECK(d >= 0, "cross: no dimension of size 3 in input");
  } else {
    d = wrap_dim("cross", *dim, nd);
  }
  // both inputs, before broadcasting, as PyTorch's linalg.cross
  const auto size_at = [&](const Tensor& t) { return nd > 0 ? t.sizes()[static_cast<std::size_t>(d)] : 1; };
  KAEL_CHECK(size_at(self) == 3 && size_at(other) == 3,
             "linalg.cross: inputs dimension " << d << " must have length 3. Got " << size_at(self) << " and "
                                               << size_at(other));
  // the shapes first, then the dtype, as torch's kernel
  KAEL_CHECK_IMPLEMENTED(self.dtype() != ScalarType::Bool, "cross: \"cross\" not implemented for 'Bool'");
  const Tensor pair[] = {self, other};
  const std::vector<Tensor> both = kael::broadcast_tensors(TensorList(pair));
  const Tensor& a = both[0];
  const Tensor& b = both[1];
  const auto at = [&](const Tensor& t, std::int64_t i) { return kael::select(t, d, i); };
  const Tensor parts[] = {kael::sub(kael::mul(at(a, 1), at(b, 2)), kael::mul(at(a, 2), at(b, 1))),
                          kael::sub(kael::mul(at(a, 2), at(b, 0)), kael::mul(at(a, 0), at(b, 2))),
                          kael::sub(kael::mul(at(a, 0), at(b, 1)), kael::mul(at(a, 1), at(b, 0)))};
  return kael::stack(TensorList(parts), d);
}

// ---------------------------------------------------------------- atleast_1d/2d/3d

Tensor atleast_1d(const Tensor& self) { return at_least(self, 1); }
Tensor atleast_2d(const Tensor& self) { return at_least(self, 2); }
Tensor atleast_3d(const Tensor& self) { return at_least(self, 3); }

namespace {
std::vector<Tensor> each_at_least(TensorList tensors, std::int64_t rank) {
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(at_least(t, rank));
  return out;
}
}  // namespace

std::vector<Tensor> atleast_1d_sequence(TensorList tensors) { return each_at_least(tensors, 1); }
std::vector<Tensor> atleast_2d_sequence(TensorList tensors) { return each_at_least(tensors, 2); }
std::vector<Tensor> atleast_3d_sequence(TensorList tensors) { return each_at_least(tensors, 3); }

// ---------------------------------------------------------------- meshgrid, cartesian_prod, block_diag

// Coordinate grids of 0-d or 1-d tensors, each an expanded view of its tensor: 'ij' indexing
// (the default, with PyTorch's warning, once per process, when it is not given) gives grid i the shape of every
// numel in order; 'xy' swaps the first two dims of every grid.
std::vector<Tensor> meshgrid(TensorList tensors, std::optional<std::string_view> indexing) {
  if (!indexing) {
    // once per process, as PyTorch's TORCH_WARN_ONCE
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      warn(WarningKind::User,
           "torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.");
  }
  const std::string_view mode = indexing.value_or("ij");
  KAEL_CHECK(mode == "ij" || mode == "xy", "meshgrid: torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                                           "received: " << mode);
  KAEL_CHECK(!tensors.empty(), "meshgrid: meshgrid expects a non-empty TensorList");
  for (const Tensor& t : tensors) {
    KAEL_CHECK(t.dim() <= 1, "meshgrid: torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: "
                                 << t.dim() << "D");
    KAEL_CHECK(t.dtype() == tensors[0].dtype(), "meshgrid: meshgrid expects all tensors to have the same dtype");
    KAEL_CHECK(t.device() == tensors[0].device(), "meshgrid: meshgrid expects all tensors to have the same device");
  }
  const std::size_t n = tensors.size();
  const bool swap = mode == "xy" && n >= 2;
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  if (swap) std::swap(order[0], order[1]);
  DimVector shape(n);
  for (std::size_t i = 0; i < n; ++i) shape[i] = tensors[order[i]].numel();
  std::vector<Tensor> grids(n);
  for (std::size_t i = 0; i < n; ++i) {
    DimVector view(n, 1);
    view[i] = -1;
    const std::int64_t flat[] = {-1};
    grids[order[i]] = kael::expand(kael::view(kael::reshape(tensors[order[i]], IntArrayRef(flat)), IntArrayRef(view)),
                                   IntArrayRef(shape));
  }
  return grids;
}

// The rows of the cartesian product of 1-d tensors (the tensor itself for one).
Tensor cartesian_prod(TensorList tensors) {
  for (const Tensor& t : tensors)
    KAEL_CHECK(t.dim() == 1, "cartesian_prod: Expect a 1D vector, but got shape " << shape_str(t.sizes()));
  if (tensors.size() == 1) return tensors[0];
  const std::vector<Tensor> grids = meshgrid(tensors, std::string_view("ij"));
  std::vector<Tensor> columns;
  columns.reserve(grids.size());
  const std::int64_t flat[] = {-1};
  for (const Tensor& g : grids) columns.push_back(kael::reshape(g, IntArrayRef(flat)));
  return kael::stack(TensorList(columns), 1);
}

// The tensors (0-d as 1x1, 1-d as a row, 2-d) on the diagonal of a zero matrix of their promoted
// dtype; (1, 0) for none.
Tensor block_diag(TensorList tensors) {
  std::vector<Tensor> blocks;
  blocks.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KAEL_CHECK(t.dim() <= 2, "block_diag: torch.block_diag: Input tensors must have 2 or fewer dimensions. Input "
                                 << i << " has " << t.dim() << " dimensions");
    const std::int64_t row[] = {1, -1};
    blocks.push_back(t.dim() == 2 ? t : kael::reshape(t, IntArrayRef(row)));
  }
  ScalarType dtype = blocks.empty() ? default_dtype() : blocks[0].dtype();
  std::int64_t rows = 0, cols = 0;
  for (const Tensor& b : blocks) {
    dtype = promote_types(dtype, b.dtype());
    rows += b.sizes()[0];
    cols += b.sizes()[1];
  }
  const std::int64_t shape[] = {blocks.empty() ? 1 : rows, cols};
  const Tensor out = kael::zeros(IntArrayRef(shape), dtype,
                                 blocks.empty() ? std::nullopt : std::optional<Device>(blocks[0].device()));
  std::int64_t r = 0, c = 0;
  for (const Tensor& b : blocks) {
    const std::int64_t h = b.sizes()[0], w = b.sizes()[1];
    kael::copy_(kael::narrow(kael::narrow(out, 0, r, h), 1, c, w), b);
    r += h;
    c += w;
  }
  return out;
}

}  // namespace kael::native
