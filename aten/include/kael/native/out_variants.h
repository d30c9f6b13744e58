#pragma once
// The out= of registry entries with an `out:` key (codegen/README.md, "out"): the generated
// `<op>_out` kernel calls these around the op itself.

#include <initializer_list>

#include "kael/core/tensor.h"

namespace kael::native {

// PyTorch's refusal of out= under autograd: in grad mode, neither out nor any input (a null
// pointer is an absent optional one) may require grad.
void check_out_without_grad(const char* op, const Tensor& out, std::initializer_list<const Tensor*> inputs,
                            std::initializer_list<TensorList> lists = {});

// Writes a freshly computed result into out: out must have its device and its dtype (exact) or a
// dtype it casts to (TypeError otherwise, as PyTorch's cat); an out of another shape is resized
// as resize_ does (docs/decisions/out-resize.md), with a UserWarning when it had elements; then
// copy_ (which converts). Returns out.
const Tensor& write_out(const char* op, const Tensor& result, const Tensor& out, bool exact);

}  // namespace kael::native
