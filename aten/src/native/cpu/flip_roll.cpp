// CPU kernels of flip and roll.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/index_ops.h"
#include "kael/native/pointwise.h"
#include "index_kernels.h"

namespace kael::native {

using index_kernels::clone_cpu;
using index_kernels::narrow_view;

Tensor flip_cpu(const Tensor& self, IntArrayRef dims) {
  constexpr const char* op = "flip";
  const std::int64_t nd = self.dim();
  std::vector<bool> flipped(static_cast<std::size_t>(std::max<std::int64_t>(nd, 1)), false);
  for (const std::int64_t dim : dims) {
    const std::int64_t d = wrap_dim(op, dim, std::max<std::int64_t>(nd, 1));
    KAEL_CHECK(!flipped[d], op << ": dim " << d << " appears multiple times in the list of dims");
    flipped[d] = true;
  }
  Tensor out = alloc_like_cpu(self);
  if (out.numel() == 0) return out;
  // The input read backwards along the flipped dims: from its last element there, with negated
  // strides (only inside this loop; tensors keep non-negative strides).
  DimVector strides(self.strides());
  char* data = static_cast<char*>(self.data_ptr());
  for (std::int64_t d = 0; d < nd; ++d) {
    if (!flipped[d]) continue;
    data += (self.sizes()[d] - 1) * strides[d] * self.element_size();
    strides[d] = -strides[d];
  }
  const OperandView src{data, self.sizes(), strides, static_cast<int>(self.element_size())};
  const LoopGeometry<2> g = make_geometry<2>(self.sizes(), {view_of(out), src});
  auto copy = [&](auto tag) {  // elements moved as unsigned integers of their size
    using U = typename decltype(tag)::type;
    run_loop<2>(g, [](char* const* ptrs, const std::int64_t* s, std::int64_t n) {
      if (s[0] == sizeof(U) && s[1] == -static_cast<std::int64_t>(sizeof(U))) {
        U* __restrict o = reinterpret_cast<U*>(ptrs[0]);
        const U* __restrict x = reinterpret_cast<const U*>(ptrs[1]);
        for (std::int64_t i = 0; i < n; ++i) o[i] = x[-i];
        return;
      }
      if (s[0] == sizeof(U) && s[1] == sizeof(U)) {  // a row that is not flipped
        std::memcpy(ptrs[0], ptrs[1], static_cast<std::size_t>(n) * sizeof(U));
        return;
      }
      for (std::int64_t i = 0; i < n; ++i)
        *reinterpret_cast<U*>(ptrs[0] + i * s[0]) = *reinterpret_cast<const U*>(ptrs[1] + i * s[1]);
    });
  };
  switch (self.element_size()) {
    case 1:
      copy(TypeTag<std::uint8_t>{});
      break;
    case 2:
      copy(TypeTag<std::uint16_t>{});
      break;
    case 4:
      copy(TypeTag<std::uint32_t>{});
      break;
    default:
      copy(TypeTag<std::uint64_t>{});
      break;
  }
  return out;
}

namespace {

// out <- self rolled by shift along dim (both of one shape; out new).
void roll_into(const Tensor& out, const Tensor& self, std::int64_t dim, std::int64_t shift) {
  const std::int64_t n = self.sizes()[dim];
  if (n == 0) return;
  std::int64_t s = shift % n;
  if (s < 0) s += n;
  copy_cpu(narrow_view(out, dim, s, n - s), narrow_view(self, dim, 0, n - s));
  if (s > 0) copy_cpu(narrow_view(out, dim, 0, s), narrow_view(self, dim, n - s, s));
}

}  // namespace

Tensor roll_cpu(const Tensor& self, IntArrayRef shifts, IntArrayRef dims) {
  constexpr const char* op = "roll";
  KAEL_CHECK(!shifts.empty(), op << ": `shifts` required");
  if (dims.empty()) {
    KAEL_CHECK(shifts.size() == 1, op << ": shifts and dimensions must align. shifts: " << shifts.size()
                                      << ", dims:" << dims.size());
    // Rolled as the flattened tensor (a contiguous copy), then given back its shape.
    const std::int64_t n[] = {self.numel()};
    Tensor src = alloc_cpu(self.sizes(), self.dtype());
    copy_cpu(src, self);
    Tensor flat = alloc_cpu(n, self.dtype());
    roll_into(flat, Tensor(TensorImpl::make(src.impl()->storage_ptr(), self.dtype(), DimVector(n), DimVector{1}, 0)),
              0, shifts[0]);
    return Tensor(TensorImpl::make(flat.impl()->storage_ptr(), self.dtype(), DimVector(self.sizes()),
                                   contiguous_strides(self.sizes()), 0));
  }
  KAEL_CHECK(shifts.size() == dims.size(), op << ": shifts and dimensions must align. shifts: " << shifts.size()
                                              << ", dims:" << dims.size());
  if (self.numel() == 0) return clone_cpu(self);  // PyTorch checks no dim of an empty tensor
  KAEL_CHECK_INDEX(self.dim() > 0, op << ": Dimension specified as " << dims[0] << " but tensor has no dimensions");
  DimVector wrapped;
  for (const std::int64_t d : dims) wrapped.push_back(wrap_dim(op, d, self.dim()));
  Tensor cur = self;
  for (std::size_t i = 0; i < wrapped.size(); ++i) {
    Tensor out = alloc_like_cpu(self);
    roll_into(out, cur, wrapped[i], shifts[i]);
    cur = out;
  }
  return cur;
}

}  // namespace kael::native
