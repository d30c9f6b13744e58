// Composites of the ops that return values and indices: the overloads of max and min that take
// another tensor (maximum and minimum, as in PyTorch: torch.max(a, b) is torch.maximum(a, b)), and
// nonzero as one index tensor per dim.
#include <vector>

#include "kael/native/declarations.h"
#include "kael/ops/maximum.h"
#include "kael/ops/minimum.h"
#include "kael/ops/nonzero.h"
#include "kael/ops/reshape.h"
#include "kael/ops/select.h"

namespace kael::native {

Tensor max_other(const Tensor& self, const Tensor& other) { return kael::maximum(self, other); }

Tensor min_other(const Tensor& self, const Tensor& other) { return kael::minimum(self, other); }

std::vector<Tensor> nonzero_numpy(const Tensor& self) {
  // a 0-d input counts as 1-d, as PyTorch's nonzero(as_tuple=True)
  const std::int64_t one[] = {1};
  const Tensor rows = kael::nonzero(self.dim() == 0 ? kael::reshape(self, IntArrayRef(one)) : self);
  std::vector<Tensor> out;
  for (std::int64_t d = 0; d < rows.sizes()[1]; ++d) out.push_back(kael::select(rows, 1, d));
  return out;
}

}  // namespace kael::native
