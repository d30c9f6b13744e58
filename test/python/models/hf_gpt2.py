"""Shared by the GPT tests: Hugging Face's GPT2LMHeadModel as the oracle."""
import torch


def spread_weights(model):
    """Sets the model's weights far from the initialisation, so that each part of the computation
    shows in the logits: at std 0.02 the MLP's pre-activations are so small that GELU's erf and
    tanh forms agree to 1e-6, the attention is nearly uniform, LayerNorm is ones and zeros, and
    greedy decoding meets ties."""
    stds = {"wte": 0.5, "wpe": 0.5, "c_attn": 0.3, "c_fc": 0.4, "c_proj": 0.15, "ln_": 0.2}
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = next(v for k, v in stds.items() if k in name)
            if ".ln_" in name:
                p.add_(torch.randn_like(p) * std)
            else:
                p.normal_(0.0, std)
    return model
