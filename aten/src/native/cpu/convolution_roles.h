// The convolution roles (Forward, BackwardData, BackwardWeights; see convolution.cpp) that run
// without oneDNN: direct loops for any dtype but bool, and float64 through im2col and matmul
// (convolution_loops.cpp). a, b: the role's inputs; c: its output; all contiguous, of g's shapes.
#pragma once

#include "../convolution_params.h"
#include "kael/core/tensor.h"

namespace kael::native::conv {

enum class Role { Forward, BackwardData, BackwardWeights };

void run_loops(Role role, const Geometry& g, const Tensor& a, const Tensor& b, const Tensor& c);
void run_gemm(Role role, const Geometry& g, const Tensor& a, const Tensor& b, const Tensor& c);

// Zeroes t (written whole by nothing else).
void zero(const Tensor& t);

}  // namespace kael::native::conv
