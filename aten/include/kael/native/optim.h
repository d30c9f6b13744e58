#pragma once
// The fused CPU update of kael.optim.Adam and AdamW: one pass over every element of a list of
// parameters, their gradients and their moment buffers (kael._C._adam_update).

#include <cstdint>

#include "kael/core/tensor.h"

namespace kael::native {

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;  // AdamW: p *= 1 - lr * weight_decay; Adam: grad += weight_decay * p
  bool amsgrad = false, maximize = false;
  std::int64_t step = 1;   // the step count of every parameter in the lists (for the bias corrections)
};

// Whether adam_update_cpu takes these lists: all on the CPU, float32 or float64, contiguous, each
// parameter's gradient and buffers of its dtype and shape, none of the written tensors sharing
// memory with another. Checks only; writes nothing.
bool adam_update_supported(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                           TensorList max_exp_avg_sqs, bool amsgrad);

// One Adam(W) step of every parameter, computing what kael.optim.Adam's per-parameter ops
// compute, element by element in the parameter's dtype:
//   g = grad (negated with maximize); p *= 1 - lr wd (AdamW) or g += wd p (Adam);
//   m = m beta1 + (1 - beta1) g;  v = v beta2 + (1 - beta2) g^2;  (amsgrad: vmax = max(vmax, v))
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
// Raises (writing nothing) unless adam_update_supported; bumps the version of every tensor it writes.
void adam_update_cpu(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                     TensorList max_exp_avg_sqs, const AdamOptions& options);

}  // namespace kael::native
