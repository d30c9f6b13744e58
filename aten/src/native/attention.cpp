// scaled_dot_product_attention: draws the dropout stream, then calls the kernel
// (Note [Attention dropout] in cpu/attention.cpp).
#include <bit>
#include <cstdint>
#include <optional>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/_scaled_dot_product_attention.h"
#include "kael/runtime/generator.h"

namespace kael::native {

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  // As torch: only a positive dropout_p drops (a negative one or NaN computes without dropout),
  // and it must be at most 1; checked here too, so that a bad probability draws no stream.
  PhiloxStream stream;
  if (dropout_p > 0.0) {
    KAEL_CHECK(dropout_p <= 1.0, "scaled_dot_product_attention: dropout probability has to be between 0 and 1, but "
                                 "got " << dropout_p);
    stream = default_generator(query.device()).next_stream();  // Note [A generator per device]
  }
  return kael::_scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                             std::bit_cast<std::int64_t>(stream.seed),
                                             std::bit_cast<std::int64_t>(stream.offset));
}

}  // namespace kael::native
