// Stacking composites written from registered ops (atleast_1d, atleast_2d, hstack, vstack,
// meshgrid), so autograd, a Python key and every device see the ops they call. kael/functional.py
// spreads their variadic Python spellings (atleast_1d(a, b), meshgrid(x, y)) into the lists these take.
#include <string_view>
#include <utility>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/warning.h"
#include "kael/native/declarations.h"
#include "kael/ops/atleast_1d.h"
#include "kael/ops/atleast_2d.h"
#include "kael/ops/cat.h"
#include "kael/ops/expand.h"
#include "kael/ops/reshape.h"
#include "kael/ops/unsqueeze.h"
#include "kael/ops/view.h"

namespace kael::native {

Tensor atleast_1d(const Tensor& self) {
  if (self.dim() != 0) return self;
  const std::int64_t one[] = {1};
  return kael::reshape(self, one);
}

std::vector<Tensor> atleast_1d_sequence(TensorList tensors) {
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(kael::atleast_1d(t));
  return out;
}

Tensor atleast_2d(const Tensor& self) {
  if (self.dim() == 0) {
    const std::int64_t one_by_one[] = {1, 1};
    return kael::reshape(self, one_by_one);
  }
  return self.dim() == 1 ? kael::unsqueeze(self, 0) : self;
}

std::vector<Tensor> atleast_2d_sequence(TensorList tensors) {
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(kael::atleast_2d(t));
  return out;
}

Tensor hstack(TensorList tensors) {
  KAEL_CHECK(!tensors.empty(), "hstack expects a non-empty TensorList");
  const std::vector<Tensor> ts = kael::atleast_1d(tensors);
  return kael::cat(ts, ts[0].dim() == 1 ? 0 : 1);
}

Tensor vstack(TensorList tensors) {
  KAEL_CHECK(!tensors.empty(), "vstack expects a non-empty TensorList");
  return kael::cat(kael::atleast_2d(tensors), 0);
}

// Coordinate grids of 0-d or 1-d tensors (expanded views); 'xy' gives the grids of (y, x, ...)
// in 'ij' order with the first two handed back swapped.
std::vector<Tensor> meshgrid(TensorList tensors, std::optional<std::string_view> indexing) {
  if (!indexing)
    warn(WarningKind::User, "torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.");
  const std::string_view mode = indexing.value_or("ij");
  KAEL_CHECK(mode == "ij" || mode == "xy",
             "torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: " << mode);
  KAEL_CHECK(!tensors.empty(), "meshgrid expects a non-empty TensorList");
  for (const Tensor& t : tensors) {
    KAEL_CHECK(t.dim() <= 1, "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: " << t.dim() << "D");
    KAEL_CHECK(t.dtype() == tensors[0].dtype(), "meshgrid expects all tensors to have the same dtype");
  }
  const std::int64_t flat[] = {-1};
  std::vector<Tensor> ts;
  for (const Tensor& t : tensors) ts.push_back(kael::reshape(t, flat));
  const bool swap = mode == "xy" && ts.size() >= 2;
  if (swap) std::swap(ts[0], ts[1]);
  DimVector shape;
  for (const Tensor& t : ts) shape.push_back(t.numel());
  std::vector<Tensor> grids;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    DimVector view(ts.size(), 1);
    view[i] = -1;
    grids.push_back(kael::expand(kael::view(ts[i], view.view()), shape.view()));
  }
  if (swap) std::swap(grids[0], grids[1]);
  return grids;
}

}  // namespace kael::native
