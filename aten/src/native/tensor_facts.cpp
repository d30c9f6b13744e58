// Facts about a tensor that PyTorch exposes as ops returning a bool or an int (is_nonzero,
// is_same_size, the dtype predicates, numel, get_device): registry entries, so that a Python key
// and every device see them as they see any op.
#include <algorithm>

#include "kael/core/error.h"
#include "kael/native/declarations.h"

namespace kael::native {

bool is_nonzero(const Tensor& self) {
  const std::int64_t n = self.numel();
  KAEL_CHECK(n != 0, "is_nonzero(): Boolean value of Tensor with no values is ambiguous");
  KAEL_CHECK(n == 1, "is_nonzero(): Boolean value of Tensor with more than one value is ambiguous (" << n << " values)");
  return self.item().to<bool>();  // NaN is nonzero
}

bool is_same_size(const Tensor& self, const Tensor& other) { return std::ranges::equal(self.sizes(), other.sizes()); }

bool is_floating_point(const Tensor& self) { return is_floating(self.dtype()); }

bool is_signed(const Tensor& self) { return kael::is_signed(self.dtype()); }

// kael has no complex dtypes, so no tensor is complex, nor a lazily conjugated or negated view.
bool is_complex(const Tensor&) { return false; }

bool is_conj(const Tensor&) { return false; }

bool is_neg(const Tensor&) { return false; }

// self itself: kael has no lazily conjugated or negated views to materialise (PyTorch returns
// its input too for those that are not).
Tensor resolve_conj(const Tensor& self) { return self; }
Tensor resolve_neg(const Tensor& self) { return self; }

std::int64_t numel(const Tensor& self) { return self.numel(); }

std::int64_t get_device(const Tensor& self) { return self.device().is_cpu() ? -1 : self.device().index; }

}  // namespace kael::native
