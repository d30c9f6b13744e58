"""MultiheadAttention and the Transformer family (encoder and decoder layers and stacks,
nn.Transformer), PyTorch's layouts, state-dict keys and initialisation."""
import copy

import kael
from kael.nn import functional as F
from kael.nn import init
from kael.nn.modules.container import ModuleList
from kael.nn.modules.layers import GELU, Dropout, LayerNorm, Linear, ReLU, _empty
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
        # torch stashes which of its two fused activations the layer uses (1 relu, 2 gelu, 0 other).
        if self.activation is F.relu or isinstance(self.activation, ReLU):
            self.activation_relu_or_gelu = 1
        elif self.activation is F.gelu or isinstance(self.activation, GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0

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


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's output (memory) and a feed-forward block, each
    with a residual connection and LayerNorm (after each block, or before it with norm_first), as
    torch.nn.TransformerDecoderLayer."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            device=device, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                                 device=device, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, device=device, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation) if isinstance(activation, str) else activation

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """(sz, sz) float mask: -inf above the diagonal, 0 on and below it."""
    return kael.full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(1)


def _seq_len(src, batch_first):
    if src.dim() == 2:
        return src.size(0)
    return src.size(1 if batch_first else 0)


def _detect_is_causal_mask(mask, is_causal, size):
    """is_causal as given; when it is None, whether mask equals the causal float mask of the
    sequence's length (a mask of another shape, or a bool mask, is not recognised), as torch."""
    if is_causal is not None:
        return bool(is_causal)
    if mask is None:
        return False
    sz = size if size is not None else mask.size(-2)
    causal = _generate_square_subsequent_mask(sz, dtype=mask.dtype if mask.is_floating_point() else None)
    if tuple(mask.shape) != (sz, sz):
        return False
    return bool((mask == causal).all())


def _clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoder(Module):
    """num_layers deep copies of an encoder layer, then an optional norm, as
    torch.nn.TransformerEncoder. enable_nested_tensor and mask_check are kept as attributes;
    kael has no nested tensors, so padded positions go through the layers as on torch's slow path
    (torch's eval-mode fast path writes 0 at them instead)."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        if src_key_padding_mask is not None and src_key_padding_mask.dtype != kael.bool and \
                not src_key_padding_mask.is_floating_point():
            raise AssertionError("only bool and floating types of src_key_padding_mask are supported")
        if mask is not None and mask.dtype != kael.bool and not mask.is_floating_point():
            raise AssertionError("only bool and floating types of mask are supported")
        # torch compares the mask with the causal one after turning a bool mask into a float one.
        mask = F._attention_mask_to_float(mask, src.dtype, "mask")
        is_causal = _detect_is_causal_mask(mask, is_causal, _seq_len(src, self.layers[0].self_attn.batch_first))
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerDecoder(Module):
    """num_layers deep copies of a decoder layer, then an optional norm, as torch.nn.TransformerDecoder."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal,
                                               _seq_len(tgt, self.layers[0].self_attn.batch_first))
        output = tgt
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """Encoder-decoder Transformer as torch.nn.Transformer: the same submodules, state-dict keys
    and initialisation (xavier_uniform_ on every parameter with more than one dimension)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, device=device, dtype=dtype)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, device=device, dtype=dtype)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        is_batched = src.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if is_batched and src.size(batch_dim) != tgt.size(batch_dim):
            raise RuntimeError(f"the batch number of src and tgt must be equal, got {src.size(batch_dim)} and "
                               f"{tgt.size(batch_dim)}")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError(f"the feature number of src and tgt must be equal to d_model ({self.d_model}), got "
                               f"{src.size(-1)} and {tgt.size(-1)}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The (sz, sz) causal mask: -inf above the diagonal, 0.0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
