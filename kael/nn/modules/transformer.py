"""MultiheadAttention and TransformerEncoderLayer, PyTorch's layouts and initialisation."""
import kael
from kael.nn import functional as F
from kael.nn import init
from kael.nn.modules.layers import Dropout, LayerNorm, Linear, _empty
from kael.nn.modules.module import Module
from kael.nn.parameter import Parameter


class NonDynamicallyQuantizableLinear(Linear):
    """The output projection of MultiheadAttention (named as PyTorch names it, so reprs match)."""


class MultiheadAttention(Module):
    """Multi-head attention with PyTorch's parameters: in_proj_weight (3E, E) and in_proj_bias
    (xavier_uniform_ and zeros), out_proj a Linear(E, E) with a zero bias. Inputs are (L, N, E),
    or (N, L, E) with batch_first, or unbatched (L, E). Without attention weights and without
    dropout the heads go through the fused kael.scaled_dot_product_attention kernel."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        if add_bias_kv or add_zero_attn or (kdim is not None and kdim != embed_dim) or \
                (vdim is not None and vdim != embed_dim):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and kdim/vdim different "
                                      "from embed_dim are not supported")
        self.embed_dim = embed_dim
        self.kdim = embed_dim
        self.vdim = embed_dim
        self._qkv_same_embed_dim = True
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        self.in_proj_weight = Parameter(_empty((3 * embed_dim, embed_dim), dtype, device))
        self.register_parameter("q_proj_weight", None)
        self.register_parameter("k_proj_weight", None)
        self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(_empty((3 * embed_dim,), dtype, device))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self):
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """Returns (attn_output, attn_weights): the weights averaged over heads (or per head
        without average_attn_weights) when need_weights, else None."""
        batched = query.dim() == 3
        if query.dim() not in (2, 3):
            raise ValueError(f"MultiheadAttention: query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.dim()}-D query tensor")
        if key.dim() != query.dim() or value.dim() != query.dim():
            raise ValueError("MultiheadAttention: query, key and value must have the same number of dims, got "
                             f"{query.dim()}, {key.dim()} and {value.dim()}")
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                               "method `generate_square_subsequent_mask` to create this mask.")

        def to_nle(x):
            if not batched:
                return x.unsqueeze(0)
            return x if self.batch_first else x.transpose(0, 1)

        q_in, k_in, v_in = to_nle(query), to_nle(key), to_nle(value)
        n, length, embed = tuple(q_in.shape)
        if embed != self.embed_dim:
            raise ValueError(f"MultiheadAttention: was expecting embedding dimension of {self.embed_dim}, "
                             f"but got {embed}")
        source = k_in.size(1)
        heads, head_dim = self.num_heads, self.head_dim
        # Three products with the thirds of in_proj_weight, also for self-attention: their results
        # are contiguous, and backward sums three gradients of the (small) weight's slices rather
        # than of thirds of one (N, L, 3E) product.
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q = b_k = b_v = None
        if self.in_proj_bias is not None:
            b_q, b_k, b_v = self.in_proj_bias.chunk(3)
        q, k, v = F.linear(q_in, w_q, b_q), F.linear(k_in, w_k, b_k), F.linear(v_in, w_v, b_v)
        q = q.reshape(n, length, heads, head_dim).transpose(1, 2)
        k = k.reshape(n, source, heads, head_dim).transpose(1, 2)
        v = v.reshape(n, source, heads, head_dim).transpose(1, 2)

        dropout_p = self.dropout if self.training else 0.0
        use_causal = is_causal and key_padding_mask is None and not need_weights
        mask = None
        if not use_causal:
            mask = F._attention_mask_to_float(attn_mask, q.dtype, "attn_mask")
            if mask is not None:
                if mask.dim() == 2:
                    if tuple(mask.shape) != (length, source):
                        raise RuntimeError(f"The shape of the 2D attn_mask is {list(mask.shape)}, but should be "
                                           f"{[length, source]}.")
                elif mask.dim() == 3:
                    if tuple(mask.shape) != (n * heads, length, source):
                        raise RuntimeError(f"The shape of the 3D attn_mask is {list(mask.shape)}, but should be "
                                           f"{[n * heads, length, source]}.")
                    mask = mask.reshape(n, heads, length, source)
                else:
                    raise RuntimeError(f"attn_mask's dimension {mask.dim()} is not supported")
            padding = F._attention_mask_to_float(key_padding_mask, q.dtype, "key_padding_mask")
            if padding is not None:
                if tuple(padding.shape) != ((n, source) if batched else (source,)):
                    raise RuntimeError(f"expected key_padding_mask of shape {[n, source]}, got "
                                       f"{list(padding.shape)}")
                padding = padding.reshape(n, 1, 1, source)
                mask = padding if mask is None else mask + padding

        weights = None
        if need_weights or dropout_p > 0.0:
            scores = kael.matmul(q * (1.0 / head_dim ** 0.5), k.transpose(-2, -1))
            if mask is not None:
                scores = scores + mask
            elif use_causal:
                causal = kael.ones(length, source, dtype=kael.bool).tril().logical_not()
                scores = scores.masked_fill(causal, float("-inf"))
            weights = F.softmax(scores, dim=-1)
            attended = F.dropout(weights, dropout_p, True) if dropout_p > 0.0 else weights
            out = kael.matmul(attended, v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=use_causal)
        out = out.transpose(1, 2).reshape(n, length, embed)
        out = self.out_proj(out)
        if not batched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            weights = weights.squeeze(0)
        return out, weights


def _activation(name):
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {name}")


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual connection and LayerNorm
    (after each block, or before it with norm_first), as torch.nn.TransformerEncoderLayer."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            device=device, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, device=device, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation) if isinstance(activation, str) else activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)
