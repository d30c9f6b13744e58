// Assignment through indexing (x[key] = value), composed of registered ops.
#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/native/pointwise.h"
#include "kael/ops/clone.h"
#include "kael/ops/copy_.h"
#include "kael/ops/expand.h"
#include "kael/ops/fill_.h"
#include "kael/ops/view.h"

namespace kael::native {

void assign(const Tensor& dst, const Tensor& src) {
  if (std::ranges::equal(dst.sizes(), src.sizes())) {
    kael::copy_(dst, src);
    return;
  }
  if (src.dim() == 0) {
    // PyTorch fills with the value of a 0-d source, which may be an element of dst: read it first.
    kael::copy_(dst, kael::clone(src));
    return;
  }
  // Leading size-1 dims of the source are dropped, then it is broadcast to dst's shape.
  const IntArrayRef sizes = src.sizes();
  std::size_t lead = 0;
  while (lead < sizes.size() && sizes[lead] == 1) ++lead;
  const IntArrayRef kept = sizes.subspan(lead);
  bool fits = kept.size() <= dst.sizes().size();
  for (std::size_t i = 0; fits && i < kept.size(); ++i) {
    const std::int64_t d = dst.sizes()[dst.sizes().size() - kept.size() + i];
    fits = kept[i] == d || kept[i] == 1;
  }
  KAEL_CHECK(fits, "index: shape mismatch: value tensor of shape " << shape_str(sizes)
                                                                   << " cannot be broadcast to indexing result "
                                                                      "of shape "
                                                                   << shape_str(dst.sizes()));
  kael::copy_(dst, kael::expand(kael::view(src, DimVector(kept)), dst.sizes()));
}

void assign(const Tensor& dst, const Scalar& value) {
  assert_no_internal_overlap("index", dst);
  if (!is_reduced_floating(dst.dtype())) {
    check_convertible("index", value, dst.dtype());
    kael::fill_(dst, value);
    return;
  }
  // PyTorch assigns a number through a 0-d tensor of dst's dtype, whose float16/bfloat16 value
  // is the number rounded without a range check (1e20 -> inf): fill with that value.
  const Scalar rounded = visit_dtype(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Scalar(static_cast<double>(static_cast<float>(value.to<T>())));
  });
  kael::fill_(dst, rounded);
}

}  // namespace kael::native
