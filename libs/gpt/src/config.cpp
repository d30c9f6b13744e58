// The GPT's configuration, parameter table and sampling settings (Note [GPT] in kael/gpt/gpt.h).
#include <cmath>
#include <sstream>

#include "kael/core/error.h"
#include "kael/gpt/gpt.h"

namespace kael::gpt {

void Config::validate() const {
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"vocab_size", vocab_size}, {"block_size", block_size}, {"n_layer", n_layer},
      {"n_head", n_head},         {"n_embd", n_embd}};
  for (const auto& [name, value] : sizes) {
    KAEL_CHECK_VALUE(value >= 1, "GPTConfig: " << name << " must be at least 1, got " << value);
  }
  KAEL_CHECK_VALUE(n_embd % n_head == 0,
                   "GPTConfig: n_embd (" << n_embd << ") must be a multiple of n_head (" << n_head << ")");
  KAEL_CHECK_VALUE(dropout >= 0.0 && dropout < 1.0, "GPTConfig: dropout must be in [0, 1), got " << dropout);
  KAEL_CHECK_VALUE(std::isfinite(layer_norm_epsilon) && layer_norm_epsilon > 0.0,
                   "GPTConfig: layer_norm_epsilon must be positive, got " << layer_norm_epsilon);
}

std::vector<std::string> parameter_names(const Config& config) {
  std::vector<std::string> names = {"transformer.wte.weight", "transformer.wpe.weight"};
  const char* block_params[] = {"ln_1.weight",     "ln_1.bias",     "attn.c_attn.weight", "attn.c_attn.bias",
                                "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",    "ln_2.bias",
                                "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
  for (std::int64_t i = 0; i < config.n_layer; ++i) {
    for (const char* p : block_params) {
      const std::string name(p);
      if (!config.bias && name.ends_with(".bias")) continue;
      names.push_back("transformer.h." + std::to_string(i) + "." + name);
    }
  }
  names.push_back("transformer.ln_f.weight");
  if (config.bias) names.push_back("transformer.ln_f.bias");
  return names;
}

std::vector<std::vector<std::int64_t>> parameter_shapes(const Config& config) {
  const std::int64_t c = config.n_embd;
  std::vector<std::vector<std::int64_t>> shapes = {{config.vocab_size, c}, {config.block_size, c}};
  const std::vector<std::vector<std::int64_t>> block = {{c},        {c},    {c, 3 * c}, {3 * c}, {c, c}, {c},
                                                        {c},        {c},    {c, 4 * c}, {4 * c}, {4 * c, c}, {c}};
  // every second entry of a block is a bias
  for (std::int64_t i = 0; i < config.n_layer; ++i) {
    for (std::size_t j = 0; j < block.size(); ++j) {
      if (!config.bias && j % 2 == 1) continue;
      shapes.push_back(block[j]);
    }
  }
  shapes.push_back({c});
  if (config.bias) shapes.push_back({c});
  return shapes;
}

Weights Weights::from_list(const Config& config, const std::vector<Tensor>& params) {
  config.validate();
  const auto names = parameter_names(config);
  const auto shapes = parameter_shapes(config);
  KAEL_CHECK_VALUE(params.size() == names.size(), "GPT: expected " << names.size() << " parameters for n_layer="
                                                                    << config.n_layer << ", got " << params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    KAEL_CHECK_VALUE(p.defined(), "GPT: parameter " << names[i] << " is missing");
    KAEL_CHECK_VALUE(is_floating(p.dtype()),
                     "GPT: parameter " << names[i] << " must be floating point, got " << p.dtype());
    KAEL_CHECK_VALUE(p.sizes().size() == shapes[i].size() &&
                         std::equal(shapes[i].begin(), shapes[i].end(), p.sizes().begin()),
                     "GPT: parameter " << names[i] << " has shape " << shape_str(p.sizes()) << ", expected "
                                       << shape_str(IntArrayRef(shapes[i])));
    KAEL_CHECK_VALUE(p.dtype() == params[0].dtype() && p.device() == params[0].device(),
                     "GPT: parameter " << names[i] << " is " << p.dtype() << " on " << p.device()
                                       << ", but transformer.wte.weight is " << params[0].dtype() << " on "
                                       << params[0].device());
  }
  Weights w;
  std::size_t k = 0;
  auto next = [&]() -> Tensor { return params[k++]; };
  auto next_bias = [&]() -> Tensor { return config.bias ? params[k++] : Tensor(); };
  w.wte = next();
  w.wpe = next();
  w.h.resize(static_cast<std::size_t>(config.n_layer));
  for (Block& b : w.h) {
    b.ln_1_weight = next();
    b.ln_1_bias = next_bias();
    b.attn_c_attn_weight = next();
    b.attn_c_attn_bias = next_bias();
    b.attn_c_proj_weight = next();
    b.attn_c_proj_bias = next_bias();
    b.ln_2_weight = next();
    b.ln_2_bias = next_bias();
    b.mlp_c_fc_weight = next();
    b.mlp_c_fc_bias = next_bias();
    b.mlp_c_proj_weight = next();
    b.mlp_c_proj_bias = next_bias();
  }
  w.ln_f_weight = next();
  w.ln_f_bias = next_bias();
  KAEL_INTERNAL_ASSERT(k == params.size());
  return w;
}

void Sampling::validate() const {
  KAEL_CHECK_VALUE(!std::isnan(temperature) && temperature >= 0.0,
                   "generate: temperature must be a non-negative number, got " << temperature);
  KAEL_CHECK_VALUE(!top_k || *top_k >= 1, "generate: top_k must be at least 1, got " << *top_k);
  KAEL_CHECK_VALUE(!top_p || (*top_p > 0.0 && *top_p <= 1.0), "generate: top_p must be in (0, 1], got " << *top_p);
}

}  // namespace kael::gpt
