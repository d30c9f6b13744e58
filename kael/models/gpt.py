"""kael.GPT: GPT-2 as Hugging Face's GPT2LMHeadModel names it, computed in C++ (Note [GPT] in
libs/gpt/include/kael/gpt/gpt.h; docs/decisions/gpt.md).

The parameters are ordinary kael.nn.Parameters in Python modules named as in
GPT2LMHeadModel (transformer.wte, transformer.h.<i>.attn.c_attn, ..., lm_head tied to
transformer.wte); forward() and generate() hand them to C++ in the order of
kael._C._gpt_parameters, read afresh on every call.

>>> import kael
>>> config = kael.GPTConfig(vocab_size=97, block_size=16, n_layer=2, n_head=4, n_embd=32)
>>> model = kael.GPT(config)
>>> idx = kael.randint(0, 97, (2, 8))
>>> logits, loss = model(idx, targets=idx)
>>> logits.shape, loss.shape
(kael.Size([2, 8, 97]), kael.Size([]))
"""
from __future__ import annotations

import dataclasses
import json
import math
import numbers
import operator
import os
import re

import kael
from kael import _C
from kael.nn import init
from kael.nn.modules.container import ModuleList
from kael.nn.modules.layers import Embedding, LayerNorm, Linear
from kael.nn.modules.module import Module
from kael.nn.parameter import Parameter

__all__ = ["GPT", "GPTConfig"]

_SIZES = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """The sizes of a GPT-2 (nanoGPT's names; from_pretrained reads Hugging Face's config.json).

    Validated when built: TypeError for a size that is not an int, a dropout or epsilon that is
    not a real number, a bias that is not a bool; ValueError for a size below 1, n_embd not a
    multiple of n_head, dropout outside [0, 1), an epsilon that is not positive and finite.
    Frozen, so a model's config stays valid: change one with dataclasses.replace(config, ...).

    >>> GPTConfig(n_layer=2, n_head=4, n_embd=32).n_embd // 4
    8
    """

    vocab_size: int = 50257
    block_size: int = 1024
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True
    layer_norm_epsilon: float = 1e-5

    def __post_init__(self):
        for name in _SIZES:
            value = getattr(self, name)
            if isinstance(value, bool) or not hasattr(type(value), "__index__"):
                raise TypeError(f"GPTConfig: {name} must be an int, got {value!r} ({type(value).__name__})")
            value = operator.index(value)
            if value < 1:
                raise ValueError(f"GPTConfig: {name} must be at least 1, got {value}")
            object.__setattr__(self, name, value)
        if self.n_embd % self.n_head != 0:
            raise ValueError(f"GPTConfig: n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        for name in ("dropout", "layer_norm_epsilon"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"GPTConfig: {name} must be a real number, got {value!r} ({type(value).__name__})")
            object.__setattr__(self, name, float(value))
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig: dropout must be in [0, 1), got {self.dropout}")
        if not (math.isfinite(self.layer_norm_epsilon) and self.layer_norm_epsilon > 0.0):
            raise ValueError("GPTConfig: layer_norm_epsilon must be positive and finite, "
                             f"got {self.layer_norm_epsilon}")
        if not isinstance(self.bias, bool):
            raise TypeError(f"GPTConfig: bias must be a bool, got {self.bias!r} ({type(self.bias).__name__})")

    def _tuple(self):
        """The config as the C++ bindings take it (kael::gpt::Config's fields in order)."""
        return (self.vocab_size, self.block_size, self.n_layer, self.n_head, self.n_embd, self.dropout, self.bias,
                self.layer_norm_epsilon)


# ---------------------------------------------------------------- the modules (parameters only)


class Conv1D(Module):
    """Hugging Face's Conv1D: a linear layer whose weight is stored (in, out), y = x @ weight + bias.

    Conv1D(nf, nx) as transformers spells it: nf output features, nx input features. The GPT
    initialises it (normal(0, 0.02), bias zeros); built alone it is uninitialised.
    """

    def __init__(self, nf, nx, bias=True):
        super().__init__()
        self.nf = nf
        self.nx = nx
        self.weight = Parameter(kael.empty(nx, nf))
        self.register_parameter("bias", Parameter(kael.zeros(nf)) if bias else None)

    def forward(self, x):
        out = x.reshape(-1, self.nx)
        out = kael.addmm(self.bias, out, self.weight) if self.bias is not None else out @ self.weight
        return out.reshape(*x.shape[:-1], self.nf)

    def extra_repr(self):
        return f"nf={self.nf}, nx={self.nx}, bias={self.bias is not None}"


class _Part(Module):
    """A part of the GPT that holds parameters; the GPT computes all parts at once in C++."""

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}: the GPT's blocks are computed in C++ by GPT.forward; "
                                  "call the GPT model")


class GPT2Attention(_Part):
    def __init__(self, config):
        super().__init__()
        self.c_attn = Conv1D(3 * config.n_embd, config.n_embd, bias=config.bias)
        self.c_proj = Conv1D(config.n_embd, config.n_embd, bias=config.bias)


class GPT2MLP(_Part):
    def __init__(self, config):
        super().__init__()
        self.c_fc = Conv1D(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.c_proj = Conv1D(config.n_embd, 4 * config.n_embd, bias=config.bias)


class GPT2Block(_Part):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon, bias=config.bias)
        self.attn = GPT2Attention(config)
        self.ln_2 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon, bias=config.bias)
        self.mlp = GPT2MLP(config)


class GPT2Model(_Part):
    def __init__(self, config):
        super().__init__()
        # _weight: no N(0, 1) draw that the GPT's initialisation would overwrite
        self.wte = Embedding(config.vocab_size, config.n_embd, _weight=kael.empty(config.vocab_size, config.n_embd))
        self.wpe = Embedding(config.block_size, config.n_embd, _weight=kael.empty(config.block_size, config.n_embd))
        self.h = ModuleList(GPT2Block(config) for _ in range(config.n_layer))
        self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon, bias=config.bias)


class _TiedLMHead(Linear):
    """GPT2LMHeadModel's lm_head, Linear(n_embd, vocab_size, bias=False), whose weight is the token
    embedding's Parameter itself."""

    def __init__(self, weight):
        Module.__init__(self)
        self.in_features = weight.shape[1]
        self.out_features = weight.shape[0]
        self.weight = weight
        self.register_parameter("bias", None)


# ---------------------------------------------------------------- the model


class GPT(Module):
    """GPT-2 (Hugging Face's GPT2LMHeadModel) with its compute in C++.

    Parameters are named as in GPT2LMHeadModel: transformer.wte and transformer.wpe (Embedding),
    transformer.h.<i>.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj} (LayerNorm
    and Conv1D, whose weight is (in, out)), transformer.ln_f, and lm_head, whose weight *is*
    transformer.wte.weight (named_parameters() lists it once, state_dict() under both names as
    torch does). Initialised as Hugging Face does, from kael's default generator (so
    kael.manual_seed makes it reproducible): normal(0, 0.02) for the embeddings and the Conv1D
    weights, drawn in the order of named_parameters(), with std 0.02 / sqrt(2 * n_layer) for
    the c_proj weights of attention and MLP; biases zeros, LayerNorm weights ones.

    forward(idx, targets=None): idx (B, T) int64 with 1 <= T <= block_size and ids in
    [0, vocab_size) (ValueError otherwise) -> logits (B, T, vocab_size) in the parameters' dtype;
    with targets (B, T) int64 -> (logits, loss), the mean cross-entropy over the targets that
    are not -100 (targets are the next tokens, already shifted, as nanoGPT's). Dropout (the
    config's, after the embeddings, on the attention weights and on each residual branch) is
    on in train() mode, which a freshly built GPT is in; off in eval().

    >>> import kael
    >>> model = kael.GPT(kael.GPTConfig(vocab_size=97, block_size=16, n_layer=2, n_head=4, n_embd=32))
    >>> [name for name, _ in model.named_parameters()][:3]
    ['transformer.wte.weight', 'transformer.wpe.weight', 'transformer.h.0.ln_1.weight']
    >>> model.lm_head.weight is model.transformer.wte.weight
    True
    """

    def __init__(self, config):
        super().__init__()
        self._build(config)
        with kael.no_grad():
            self._init_weights()

    def _build(self, config):
        """The modules and Parameters (uninitialised Conv1D weights and embeddings), and the list
        of (module, name) slots from which each call reads the parameters in C++'s order."""
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT: config must be a kael.GPTConfig, got {type(config).__name__}")
        self.config = config
        self._config_tuple = config._tuple()
        self.transformer = GPT2Model(config)
        self.lm_head = _TiedLMHead(self.transformer.wte.weight)
        table = _C._gpt_parameters(self._config_tuple)
        ours = [(name, tuple(p.shape)) for name, p in self.named_parameters()]
        theirs = [(name, tuple(shape)) for name, shape in table]
        if ours != theirs:  # the Python modules and kael::gpt::parameter_names disagree: a bug in kael
            raise RuntimeError(f"GPT: internal error: the modules' parameters {ours} differ from C++'s {theirs}")
        slots = []
        for name, _ in table:
            path, _, attr = name.rpartition(".")
            slots.append((self.get_submodule(path), attr))
        self._slots = tuple(slots)
        self._names = tuple(name for name, _ in table)

    def _init_weights(self):
        std = 0.02
        residual_std = std / math.sqrt(2 * self.config.n_layer)
        for name, p in self.named_parameters():
            if name.endswith(("attn.c_proj.weight", "mlp.c_proj.weight")):
                init.normal_(p, 0.0, residual_std)
            elif name.endswith(("wte.weight", "wpe.weight", "c_attn.weight", "c_fc.weight")):
                init.normal_(p, 0.0, std)
            elif name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                init.ones_(p)
            else:  # biases
                init.zeros_(p)

    def _parameters_in_order(self):
        """The parameters as C++ takes them, read now: after to(), load_state_dict() or a
        reassigned Parameter, the call sees the current ones."""
        return [module._parameters[attr] for module, attr in self._slots]

    def forward(self, idx, targets=None):
        """logits (B, T, vocab_size) for idx (B, T) int64; (logits, loss) with targets (B, T)
        int64, loss the mean cross-entropy over the targets that are not -100. See GPT."""
        # the binding checks these too, under its own name
        if not isinstance(idx, kael.Tensor):
            raise TypeError(f"GPT.forward: idx must be a kael.Tensor, got {type(idx).__name__}")
        if targets is not None and not isinstance(targets, kael.Tensor):
            raise TypeError(f"GPT.forward: targets must be a kael.Tensor or None, got {type(targets).__name__}")
        logits, loss = _C._gpt_forward(self._config_tuple, self._parameters_in_order(), idx, targets, self.training)
        return logits if targets is None else (logits, loss)

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, seed=None, on_token=None,
                 stop_tokens=None):
        """Samples up to max_new_tokens tokens after each prompt with the C++ KV-cache decoder
        (Note [Decoder] in kael/gpt/gpt.h), under kael.no_grad(), without dropout whatever the
        mode, computing in float32 whatever the parameters' dtype.

        idx: a (B, T) int64 tensor of prompts, which returns the (B, T + n) tensor of prompts and
        new tokens, n the number of steps run; or a list of B lists of ids (of any lengths),
        which returns a list of B lists of the new tokens alone.

        Each step samples from softmax(logits / temperature) of the last position, keeping only
        the top_k most likely tokens when top_k is given, then only the smallest set whose
        probability reaches top_p when top_p is given (transformers' warpers, in that order).
        temperature=0 is greedy: the argmax, the lowest id on ties. seed: each row draws from its
        own random stream, a function of the seed and the row alone, so a seed gives the same
        tokens on every run, whatever kael's global generator holds (it is neither read nor
        advanced) and however many threads run; seed=None draws a seed from the global
        generator (kael.manual_seed makes that reproducible). on_token(tokens), if given, is
        called after each step with the (B,) int64 tensor of the tokens just sampled (-1 for a
        row that has already ended): returning None goes on, False stops all rows there, and an
        exception it raises propagates. A row ends after max_new_tokens tokens or after sampling
        one of stop_tokens (a list of ids; the stop token is kept); in the tensor form, an ended
        row is filled to the common length with its stop token. As nanoGPT's generate, a
        context longer than block_size is cropped to its last block_size tokens. Invalid
        arguments are ValueErrors or TypeErrors ("generate: ...") raised before any work.

        >>> import kael
        >>> model = kael.GPT(kael.GPTConfig(vocab_size=97, block_size=16, n_layer=2, n_head=4, n_embd=32))
        >>> model.generate(kael.zeros(1, 3, dtype=kael.int64), 5, temperature=0).shape
        kael.Size([1, 8])
        >>> [len(row) for row in model.generate([[1, 2], [3]], 4, seed=0)]
        [4, 4]
        """
        with kael.no_grad():
            return _C._gpt_generate(self._config_tuple, self._parameters_in_order(), idx, max_new_tokens, temperature,
                                    top_k, top_p, seed, on_token, stop_tokens)

    # ------------------------------------------------------------ checkpoints

    @classmethod
    def from_pretrained(cls, path):
        """Loads a Hugging Face GPT-2 directory: config.json and model.safetensors (or sharded
        model-*.safetensors with model.safetensors.index.json).

        config.json gives vocab_size, n_positions (block_size), n_layer, n_head, n_embd,
        layer_norm_epsilon and resid_pdrop (the dropout; Hugging Face's defaults where a key is
        absent); an activation other than gelu_new or gelu_pytorch_tanh, or a GPT-2 variant kael
        does not compute (n_inner other than 4 * n_embd, scale_attn_weights false,
        scale_attn_by_inverse_layer_idx, cross-attention) is a ValueError. The tensors' names may
        carry the "transformer." prefix or not (openai's gpt2 checkpoint has none); Hugging
        Face's attn.bias and attn.masked_bias buffers are ignored, and lm_head.weight, if
        present, must equal transformer.wte.weight (kael's head is tied). A missing, extra or
        misshaped tensor is a ValueError naming it, raised before any model is built. The
        model takes the tensors' dtype (float16 and bfloat16 checkpoints load as such; the
        config's dtype/torch_dtype is not needed), and is returned in eval() mode, as
        transformers' from_pretrained returns it.

        >>> model = GPT.from_pretrained("path/to/gpt2")  # doctest: +SKIP
        """
        directory = os.fsdecode(os.fspath(path))
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"GPT.from_pretrained: '{directory}' is not a directory (kael downloads nothing: "
                                    "pass the directory of a Hugging Face GPT-2 checkpoint)")
        config_path = os.path.join(directory, "config.json")
        with open(config_path, encoding="utf-8") as f:
            try:
                hf = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"GPT.from_pretrained: '{config_path}' is not valid JSON: {e}") from None
        config = _config_from_hf(hf, config_path)
        weights = _checkpoint_weights(config, _read_tensors(directory), hf.get("tie_word_embeddings", True))
        model = cls.__new__(cls)
        Module.__init__(model)
        model._build(config)
        for (module, attr), name in zip(model._slots, model._names):
            setattr(module, attr, Parameter(weights[name]))
        # the head follows the embedding's new Parameter
        model.lm_head.weight = model.transformer.wte.weight
        return model.eval()

    def save_pretrained(self, path):
        """Writes a Hugging Face GPT-2 directory (created if needed) that transformers'
        GPT2LMHeadModel.from_pretrained loads: config.json (model_type "gpt2", the
        GPT2LMHeadModel architecture, Hugging Face's field names, gelu_new, tied embeddings, the
        dtype; bos_token_id and eos_token_id 50256, GPT-2's <|endoftext|>, for a vocabulary
        that holds it, else null) and model.safetensors with the transformer.* tensors in the
        model's dtype (no lm_head.weight: it is tied) and the metadata {"format": "pt"}.

        A bias=False model is saved too (config.json records "bias": false, which
        GPT.from_pretrained reads), but transformers cannot load it: its GPT-2 always has biases.

        >>> model.save_pretrained("out/gpt2-finetuned")  # doctest: +SKIP
        """
        directory = os.fsdecode(os.fspath(path))
        os.makedirs(directory, exist_ok=True)
        c = self.config
        dtype = self.transformer.wte.weight.dtype
        hf = {
            "model_type": "gpt2",
            "architectures": ["GPT2LMHeadModel"],
            "vocab_size": c.vocab_size,
            "n_positions": c.block_size,
            "n_ctx": c.block_size,
            "n_layer": c.n_layer,
            "n_head": c.n_head,
            "n_embd": c.n_embd,
            "n_inner": None,
            "activation_function": "gelu_new",
            "resid_pdrop": c.dropout,
            "embd_pdrop": c.dropout,
            "attn_pdrop": c.dropout,
            "layer_norm_epsilon": c.layer_norm_epsilon,
            "initializer_range": 0.02,
            "scale_attn_weights": True,
            "tie_word_embeddings": True,
            "dtype": str(dtype).removeprefix("kael."),
        }
        # GPT-2's <|endoftext|>, 50256, where the vocabulary holds it; for another vocabulary kael
        # does not know the id (transformers' default, 50256, would be out of range or wrong)
        hf["bos_token_id"] = hf["eos_token_id"] = 50256 if c.vocab_size > 50256 else None
        if not c.bias:
            hf["bias"] = False
        tensors = {name: p.detach() for name, p in zip(self._names, self._parameters_in_order())}
        kael.save_safetensors(tensors, os.path.join(directory, "model.safetensors"), {"format": "pt"})
        with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
            json.dump(hf, f, indent=2, sort_keys=True)
            f.write("\n")


# ---------------------------------------------------------------- Hugging Face checkpoints

# Hugging Face's defaults (transformers' GPT2Config) for the keys a config.json may leave out.
_HF_DEFAULTS = {"vocab_size": 50257, "n_positions": 1024, "n_layer": 12, "n_head": 12, "n_embd": 768,
                "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.1, "activation_function": "gelu_new"}
_ACTIVATIONS = ("gelu_new", "gelu_pytorch_tanh")
# The attention's causal-mask buffers that openai's gpt2 checkpoint and older transformers
# versions store; not parameters.
_HF_BUFFER = re.compile(r"(transformer\.)?h\.\d+\.attn\.(bias|masked_bias)")


def _config_from_hf(hf, config_path):
    where = f"GPT.from_pretrained: '{config_path}'"
    if not isinstance(hf, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(hf).__name__}")
    model_type = hf.get("model_type", "gpt2")
    if model_type != "gpt2":
        raise ValueError(f"{where}: model_type must be 'gpt2', got {model_type!r}")
    get = lambda key: hf[key] if hf.get(key) is not None else _HF_DEFAULTS[key]  # noqa: E731
    activation = get("activation_function")
    if activation not in _ACTIVATIONS:
        raise ValueError(f"{where}: activation_function must be one of {', '.join(_ACTIVATIONS)} (the tanh GELU), "
                         f"got {activation!r}")
    n_embd = get("n_embd")
    unsupported = [(hf.get("n_inner") not in (None, 4 * n_embd), f"n_inner {hf.get('n_inner')!r} (only 4 * n_embd)"),
                   (hf.get("scale_attn_weights", True) is not True, "scale_attn_weights false"),
                   (hf.get("scale_attn_by_inverse_layer_idx", False) is not False, "scale_attn_by_inverse_layer_idx"),
                   (hf.get("add_cross_attention", False) is not False, "add_cross_attention")]
    for bad, what in unsupported:
        if bad:
            raise ValueError(f"{where}: kael's GPT does not compute {what}")
    try:
        return GPTConfig(vocab_size=get("vocab_size"), block_size=get("n_positions"), n_layer=get("n_layer"),
                         n_head=get("n_head"), n_embd=n_embd, dropout=get("resid_pdrop"), bias=hf.get("bias", True),
                         layer_norm_epsilon=get("layer_norm_epsilon"))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


def _read_tensors(directory):
    single = os.path.join(directory, "model.safetensors")
    index = single + ".index.json"
    if os.path.exists(single) or not os.path.exists(index):
        if not os.path.exists(single):
            raise FileNotFoundError(f"GPT.from_pretrained: no model.safetensors in '{directory}' (kael reads "
                                    "safetensors checkpoints only, not pytorch_model.bin)")
        return kael.load_safetensors(single)
    with open(index, encoding="utf-8") as f:
        weight_map = json.load(f).get("weight_map", {})
    tensors = {}
    for shard in dict.fromkeys(weight_map.values()):
        tensors.update(kael.load_safetensors(os.path.join(directory, shard)))
    return tensors


def _shape(t):
    return list(t.shape)


def _checkpoint_weights(config, tensors, tied):
    """The checkpoint's tensors under kael's names, every check done: ValueError naming each
    missing, extra or misshaped tensor, one of another dtype, or an untied lm_head.weight (or
    none where config.json says tie_word_embeddings false)."""
    expected = {name: list(shape) for name, shape in _C._gpt_parameters(config._tuple())}
    weights, head, extra, problems = {}, None, [], []
    for key, tensor in tensors.items():
        if _HF_BUFFER.fullmatch(key):
            continue
        if key == "lm_head.weight":
            head = tensor
            continue
        name = key if key.startswith("transformer.") else "transformer." + key
        if name in weights:
            problems.append(f"'{key}' appears both with and without the 'transformer.' prefix")
        elif name not in expected:
            extra.append(f"'{key}' {_shape(tensor)}")
        else:
            weights[name] = tensor
    missing = [f"'{name}' {shape}" for name, shape in expected.items() if name not in weights]
    misshaped = [f"'{name}' is {_shape(t)}, expected {expected[name]}" for name, t in weights.items()
                 if _shape(t) != expected[name]]
    if missing:
        problems.append("missing tensors " + ", ".join(missing))
    if extra:
        problems.append("unexpected tensors " + ", ".join(extra))
    if misshaped:
        problems.append("tensors of the wrong shape: " + "; ".join(misshaped))
    if problems:
        raise ValueError(f"GPT.from_pretrained: the checkpoint does not fit the config ({_describe(config)}): "
                         + "; ".join(problems))
    wte = weights["transformer.wte.weight"]
    if not wte.is_floating_point():
        raise ValueError(f"GPT.from_pretrained: 'transformer.wte.weight' must be floating point, got {wte.dtype}")
    for name, t in weights.items():
        if t.dtype != wte.dtype:
            raise ValueError(f"GPT.from_pretrained: '{name}' is {t.dtype}, but transformer.wte.weight is {wte.dtype} "
                             "(a checkpoint of one dtype is expected)")
    if head is None and tied is False:
        raise ValueError("GPT.from_pretrained: config.json sets tie_word_embeddings false, but the checkpoint has no "
                         "lm_head.weight (kael's GPT ties the LM head to the token embedding)")
    if head is not None and not (_shape(head) == _shape(wte) and head.dtype == wte.dtype and kael.equal(head, wte)):
        raise ValueError(f"GPT.from_pretrained: 'lm_head.weight' ({_shape(head)}, {head.dtype}) differs from "
                         "'transformer.wte.weight': kael's GPT ties the LM head to the token embedding")
    return weights


def _describe(config):
    return ", ".join(f"{f.name}={getattr(config, f.name)}" for f in dataclasses.fields(config)
                     if f.name not in ("dropout", "layer_norm_epsilon"))
