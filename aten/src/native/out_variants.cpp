// The out= form of registry entries with an `out:` key (codegen/README.md, "out"): the generated
// `<op>_out` computes the op into a fresh tensor, then writes it into out with PyTorch's rules for
// the out= of its matrix products and reductions. Every check runs before the first write, and
// the result was computed before out is touched, so out may be (or overlap) one of the inputs.
#include <algorithm>
#include <string>

#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/core/warning.h"
#include "kael/native/out_variants.h"
#include "kael/native/pointwise.h"
#include "kael/ops/copy_.h"

namespace kael::native {

void check_out_without_grad(const char* op, const Tensor& out, std::initializer_list<const Tensor*> inputs,
                            std::initializer_list<TensorList> lists) {
  if (!autograd::GradMode::is_enabled()) return;
  bool any = autograd::requires_grad(out);
  for (const Tensor* t : inputs) any = any || (t != nullptr && autograd::requires_grad(*t));
  for (const TensorList list : lists)
    for (const Tensor& t : list) any = any || autograd::requires_grad(t);
  KAEL_CHECK(!any, op << "(): functions with out=... arguments don't support automatic differentiation, but one "
                              "of the arguments requires grad.");
}

const Tensor& write_out(const char* op, const Tensor& result, const Tensor& out, bool exact) {
  KAEL_CHECK(!exact || out.dtype() == result.dtype(), op << ": Expected out tensor to have dtype "
                                                         << dtype_name(result.dtype()) << ", but got "
                                                         << dtype_name(out.dtype()) << " instead");
  KAEL_CHECK_TYPE(can_cast(result.dtype(), out.dtype()), op << ": input types can't be cast to the desired output type "
                                                            << dtype_name(out.dtype()));
  KAEL_CHECK(out.device() == result.device(), op << ": Expected out tensor to be on " << result.device()
                                                 << ", but got " << out.device() << " instead");
  if (!std::ranges::equal(out.sizes(), result.sizes())) {
    if (out.numel() > 0)
      warn(WarningKind::User, std::string(op) + ": an output with one or more elements was resized since it had shape " +
                                  shape_str(out.sizes()) + ", which does not match the required output shape " +
                                  shape_str(result.sizes()));
    resize_tensor(out, result.sizes());
  }
  kael::copy_(out, result);
  return out;
}

}  // namespace kael::native
