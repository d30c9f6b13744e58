// conv1d, conv2d, conv_transpose1d, conv_transpose2d: PyTorch's functional convolutions over the
// convolution op (its CPU kernels are cpu/convolution.cpp). Composites (CompositeImplicit): they
// check the arguments under the name the user called, add the batch dim of an unbatched input,
// and turn padding='same'/'valid' into numbers.
#include <optional>
#include <string>
#include <string_view>

#include "convolution_params.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/convolution.h"
#include "kael/ops/narrow.h"
#include "kael/ops/squeeze.h"
#include "kael/ops/unsqueeze.h"

namespace kael::native {

namespace {

// Runs the convolution of an input of nd spatial dims, batched or not, after the checks.
// narrow_start: the dims (of the spatial ones) whose first output element is dropped ('same'
// with an even kernel extent, see conv_padding below).
Tensor conv_nd(const char* op, int nd, const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
               IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, bool transposed,
               IntArrayRef output_padding, std::int64_t groups, const bool* narrow_start = nullptr) {
  KAEL_CHECK(input.dim() == nd + 1 || input.dim() == nd + 2,
             op << ": Expected " << nd + 1 << "D (unbatched) or " << nd + 2 << "D (batched) input to " << op
                << ", but got input of size: " << conv::list_str(input.sizes()));
  KAEL_CHECK(weight.dim() == nd + 2, op << ": expected a " << nd + 2 << "-D weight, but got weight of size "
                                        << conv::list_str(weight.sizes()));
  const bool batched = input.dim() == nd + 2;
  const Tensor x = batched ? input : kael::unsqueeze(input, 0);
  conv::check_and_geometry(op, x, weight, bias ? &*bias : nullptr, stride, padding, dilation, transposed,
                           output_padding, groups);
  conv::check_dtype(op, x.dtype(), transposed);
  Tensor out = kael::convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  if (narrow_start != nullptr)
    for (int i = 0; i < nd; ++i)
      if (narrow_start[i]) out = kael::narrow(out, 2 + i, 1, out.sizes()[2 + i] - 1);
  return batched ? out : kael::squeeze(out, 0);
}

// padding='valid' (none) or 'same' (output of the input's size; stride 1). 'same' pads
// dilation * (k - 1) in all, half on each side, the odd one on the right as PyTorch does: the
// convolution then runs with the larger right amount on both sides and drops its first output.
Tensor conv_padding(const char* op, int nd, const Tensor& input, const Tensor& weight,
                    const std::optional<Tensor>& bias, IntArrayRef stride, std::string_view padding,
                    IntArrayRef dilation, std::int64_t groups) {
  const DimVector zeros(static_cast<std::size_t>(nd), 0);
  if (padding == "valid") return conv_nd(op, nd, input, weight, bias, stride, zeros, dilation, false, zeros, groups);
  KAEL_CHECK(padding == "same", op << ": Invalid padding string: '" << padding << "'");
  KAEL_CHECK(weight.dim() == nd + 2, op << ": expected a " << nd + 2 << "-D weight, but got weight of size "
                                        << conv::list_str(weight.sizes()));
  const DimVector s = conv::expand_param(op, "stride", stride, nd);
  const DimVector d = conv::expand_param(op, "dilation", dilation, nd);
  for (int i = 0; i < nd; ++i)
    KAEL_CHECK(s[i] == 1, op << ": padding='same' is not supported for strided convolutions, got stride="
                             << conv::list_str(s));
  DimVector pads(static_cast<std::size_t>(nd), 0);
  bool narrow_start[conv::kMaxSpatial] = {false, false, false};
  for (int i = 0; i < nd; ++i) {
    KAEL_CHECK(d[i] > 0, op << ": non-positive dilation is not supported, got dilation=" << conv::list_str(d));
    const std::int64_t total = d[i] * (weight.sizes()[2 + i] - 1);
    pads[i] = total - total / 2;
    narrow_start[i] = total % 2 != 0;
  }
  return conv_nd(op, nd, input, weight, bias, stride, pads, dilation, false, zeros, groups, narrow_start);
}

}  // namespace

Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, std::int64_t groups) {
  const std::int64_t zero[] = {0};
  return conv_nd("conv1d", 1, input, weight, bias, stride, padding, dilation, false, zero, groups);
}

Tensor conv1d_padding(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation, std::int64_t groups) {
  return conv_padding("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, std::int64_t groups) {
  const std::int64_t zero[] = {0};
  return conv_nd("conv2d", 2, input, weight, bias, stride, padding, dilation, false, zero, groups);
}

Tensor conv2d_padding(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                      IntArrayRef stride, std::string_view padding, IntArrayRef dilation, std::int64_t groups) {
  return conv_padding("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}

Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding, std::int64_t groups,
                        IntArrayRef dilation) {
  return conv_nd("conv_transpose1d", 1, input, weight, bias, stride, padding, dilation, true, output_padding, groups);
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding, std::int64_t groups,
                        IntArrayRef dilation) {
  return conv_nd("conv_transpose2d", 2, input, weight, bias, stride, padding, dilation, true, output_padding, groups);
}

}  // namespace kael::native
