#pragma once
// Fused CPU kernels of the backward passes of scaled_dot_product_attention, layer_norm and gelu,
// called by their derivative helpers (aten/src/autograd/nn_formula_helpers.cpp) when the
// backward pass builds no graph (create_graph=False) and every tensor is on the CPU. With
// create_graph=True the helpers compose registered ops instead, so the gradients are
// differentiable again. Neither is a registry entry: they have no Python binding.

#include <array>
#include <cstdint>
#include <optional>

#include "kael/core/tensor.h"

namespace kael::native {

// The gradients of _scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
// is_causal, scale, seed, offset) for query, key and value, given grad, the gradient of its
// result (of the broadcast batch shape + (L, Ev)), and with mask_grad for a floating attn_mask
// (undefined otherwise). Each is over the broadcast batch (batch..., L, E), (batch..., S, E),
// (batch..., S, Ev) and (batch..., L, S), in float32 for the half types (else in the inputs'
// dtype); the caller sums broadcast dims away (sum_to_size) and rounds. See Note [Attention
// backward] in cpu/attention.cpp.
std::array<Tensor, 4> sdpa_backward_cpu(const Tensor& grad, const Tensor& query, const Tensor& key,
                                        const Tensor& value, const std::optional<Tensor>& attn_mask, bool is_causal,
                                        std::optional<double> scale, double dropout_p, std::int64_t seed,
                                        std::int64_t offset, bool mask_grad = false);

// d/d self of layer_norm(self, normalized_shape, weight, None, eps) (standardize's when weight
// is None) given grad of self's shape: rstd * (g - mean(g) - xhat * mean(g * xhat)) per row,
// g = grad * weight, in self's dtype.
Tensor layer_norm_backward_input_cpu(const Tensor& grad, const Tensor& self, std::int64_t normalized_numel,
                                     const std::optional<Tensor>& weight, double eps);

// d/d weight of layer_norm: the sum over rows of grad * xhat, in grad's dtype, shaped (normalized_numel,).
Tensor layer_norm_backward_weight_cpu(const Tensor& grad, const Tensor& self, std::int64_t normalized_numel,
                                      double eps);

// grad * (the derivative of the exact GELU at self), elementwise, for contiguous float32 or
// float64 tensors of one shape: the product of grad and _gelu_grad(self) in one pass.
Tensor gelu_backward_cpu(const Tensor& grad, const Tensor& self);
// grad * (the derivative of GELU's tanh approximation at self), elementwise, for the same
// tensors: the product of grad and _gelu_tanh_grad(self) in one pass.
Tensor gelu_tanh_backward_cpu(const Tensor& grad, const Tensor& self);

}  // namespace kael::native
