#pragma once
// oneDNN-backed softmax and layer normalisation over contiguous float32 data (nn_dnnl.cpp).
#include <cstdint>

namespace kael::native::nn {

// Softmax (or log-softmax) over the middle dim of a contiguous (outer, n, inner) block.
void dnnl_softmax(const float* x, float* y, std::int64_t outer, std::int64_t n, std::int64_t inner, bool log);
// Layer normalisation of `rows` contiguous rows of n elements; w and b may be null.
void dnnl_layer_norm(const float* x, float* y, const float* w, const float* b, std::int64_t rows, std::int64_t n,
                     double eps);

}  // namespace kael::native::nn
