"""kael.GPT against Hugging Face's GPT2LMHeadModel (transformers, pinned in requirements-dev.txt):
parameter names and shapes, logits, loss and every gradient, checkpoints both ways, and a few
optimizer steps, on small randomly initialised models (nothing is downloaded). Generation is
tested with the decoder (test_gpt_generate.py)."""
import json
import math
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kael
from helpers import to_kael, to_torch
from hf_gpt2 import spread_weights

import safetensors.torch as safetensors_torch  # noqa: E402
import transformers  # noqa: E402

SIZES = dict(vocab_size=97, block_size=16, n_layer=2, n_head=4, n_embd=32)
V, BLOCK = SIZES["vocab_size"], SIZES["block_size"]
RTOL = 1e-4  # logits, loss, gradients and loss curves, against torch in float32


def hf_config(**overrides):
    kw = dict(vocab_size=V, n_positions=BLOCK, n_embd=SIZES["n_embd"], n_layer=SIZES["n_layer"],
              n_head=SIZES["n_head"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=V - 1,
              eos_token_id=V - 1)
    kw.update(overrides)
    return transformers.GPT2Config(**kw)


def hf_model(**overrides):
    """A randomly initialised GPT2LMHeadModel in float32, eval mode."""
    torch.manual_seed(1)
    return spread_weights(transformers.GPT2LMHeadModel(hf_config(**overrides)).float().eval())


def kael_copy(hf):
    """A kael.GPT with the HF model's weights (loaded through load_state_dict)."""
    model = kael.GPT(kael.GPTConfig(**SIZES))
    model.load_state_dict({k: to_kael(v) for k, v in hf.state_dict().items()})
    return model.eval()


def tokens(b, t, low=0, high=V, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, (b, t), generator=g)


def assert_close(k, t, rtol=RTOL, atol=RTOL):
    np.testing.assert_allclose(to_torch(k.float()).numpy(), t.detach().float().numpy(), rtol=rtol, atol=atol)


def rel_error(k, t):
    """||k - t|| / ||t|| of two gradients."""
    t = t.detach().double()
    return (to_torch(k).double() - t).norm().item() / max(t.norm().item(), 1e-30)


def hf_loss(logits, targets):
    return TF.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)


# ---------------------------------------------------------------- GPTConfig


def test_config_defaults_are_gpt2_small():
    c = kael.GPTConfig()
    assert (c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd) == (50257, 1024, 12, 12, 768)
    assert (c.dropout, c.bias, c.layer_norm_epsilon) == (0.0, True, 1e-5)
    assert c._tuple() == (50257, 1024, 12, 12, 768, 0.0, True, 1e-5)


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_embd=30, n_head=4), r"n_embd \(30\) must be a multiple of n_head \(4\)"),
    (dict(vocab_size=0), "vocab_size must be at least 1, got 0"),
    (dict(block_size=-3), "block_size must be at least 1, got -3"),
    (dict(n_layer=0), "n_layer must be at least 1, got 0"),
    (dict(n_head=0), "n_head must be at least 1, got 0"),
    (dict(dropout=1.0), r"dropout must be in \[0, 1\), got 1.0"),
    (dict(dropout=-0.1), r"dropout must be in \[0, 1\), got -0.1"),
    (dict(dropout=float("nan")), r"dropout must be in \[0, 1\), got nan"),
    (dict(layer_norm_epsilon=0.0), "layer_norm_epsilon must be positive and finite, got 0.0"),
    (dict(layer_norm_epsilon=float("inf")), "layer_norm_epsilon must be positive and finite, got inf"),
])
def test_config_value_errors(kwargs, message):
    with pytest.raises(ValueError, match="GPTConfig: " + message):
        kael.GPTConfig(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_layer=2.0), r"n_layer must be an int, got 2.0 \(float\)"),
    (dict(n_embd=True), r"n_embd must be an int, got True \(bool\)"),
    (dict(dropout="0.1"), r"dropout must be a real number, got '0.1' \(str\)"),
    (dict(bias=1), r"bias must be a bool, got 1 \(int\)"),
])
def test_config_type_errors(kwargs, message):
    with pytest.raises(TypeError, match="GPTConfig: " + message):
        kael.GPTConfig(**kwargs)


def test_config_is_frozen_and_normalised():
    c = kael.GPTConfig(n_layer=np.int64(2), dropout=0)
    assert type(c.n_layer) is int and type(c.dropout) is float
    with pytest.raises(AttributeError):
        c.n_layer = 3
    import dataclasses
    assert dataclasses.replace(c, n_layer=3).n_layer == 3
    with pytest.raises(TypeError, match="GPT: config must be a kael.GPTConfig, got dict"):
        kael.GPT(dict(SIZES))


# ---------------------------------------------------------------- names, shapes, tying, init


def test_parameter_names_and_shapes_are_hugging_faces():
    hf = hf_model()
    model = kael.GPT(kael.GPTConfig(**SIZES))
    ours = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    assert ours == [(name, tuple(p.shape)) for name, p in hf.named_parameters()]
    # state_dict() lists the tied head under both names, as torch's (and HF's) does
    assert [(k, tuple(v.shape)) for k, v in model.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in hf.state_dict().items()]
    assert ours == [(name, tuple(shape)) for name, shape in kael._C._gpt_parameters(model.config._tuple())]
    assert isinstance(model.transformer.wte, kael.nn.Embedding)
    assert isinstance(model.transformer.h[1].ln_2, kael.nn.LayerNorm)
    assert model.transformer.h[0].attn.c_attn.weight.shape == (32, 96)  # Conv1D: (in, out)


def test_bias_false_has_no_biases():
    model = kael.GPT(kael.GPTConfig(**SIZES, bias=False))
    names = [name for name, _ in model.named_parameters()]
    assert not [n for n in names if n.endswith(".bias")]
    assert len(names) == 2 + 6 * SIZES["n_layer"] + 1
    assert model.transformer.ln_f.bias is None


def test_lm_head_is_tied_to_wte():
    model = kael.GPT(kael.GPTConfig(**SIZES))
    assert model.lm_head.weight is model.transformer.wte.weight
    assert sum(1 for _ in model.parameters()) == 2 + 12 * SIZES["n_layer"] + 2
    model.to(kael.float64)
    assert model.lm_head.weight is model.transformer.wte.weight
    assert model.lm_head.weight.dtype == kael.float64


def test_init_as_hugging_face_from_the_default_generator():
    config = kael.GPTConfig(vocab_size=1000, block_size=256, n_layer=4, n_head=4, n_embd=128)
    kael.manual_seed(7)
    model = kael.GPT(config)
    kael.manual_seed(7)
    again = kael.GPT(config)
    for (name, p), q in zip(model.named_parameters(), again.parameters()):
        assert kael.equal(p, q), name
    residual = 0.02 / math.sqrt(2 * config.n_layer)
    for name, p in model.named_parameters():
        x = to_torch(p.detach())
        if name.endswith(("attn.c_proj.weight", "mlp.c_proj.weight")):
            assert abs(x.std().item() / residual - 1) < 0.05, name
        elif name.endswith(("wte.weight", "wpe.weight", "c_attn.weight", "c_fc.weight")):
            assert abs(x.std().item() / 0.02 - 1) < 0.05 and abs(x.mean().item()) < 0.002, name
        elif ".ln_" in name and name.endswith(".weight"):
            assert (x == 1).all(), name
        else:
            assert (x == 0).all(), name
    kael.manual_seed(8)
    assert not kael.equal(kael.GPT(config).transformer.wte.weight, model.transformer.wte.weight)


# ---------------------------------------------------------------- forward against transformers


@pytest.mark.parametrize("b, t", [(1, 1), (2, 7), (3, BLOCK), (5, 11)])
def test_logits_match_transformers(b, t):
    hf = hf_model()
    model = kael_copy(hf)
    idx = tokens(b, t, seed=b * 100 + t)
    logits = model(to_kael(idx))
    assert logits.shape == (b, t, V) and logits.dtype == kael.float32
    with torch.no_grad():
        expected = hf(idx).logits
    assert_close(logits, expected)


def test_loss_and_every_gradient_match_transformers():
    hf = hf_model()
    model = kael_copy(hf).train()  # dropout is 0: train mode computes the same
    idx = tokens(4, BLOCK, seed=1)
    targets = tokens(4, BLOCK, seed=2)
    targets[0, :5] = -100
    targets[2, 3] = -100
    targets[3, :] = -100
    logits, loss = model(to_kael(idx), targets=to_kael(targets))
    expected_logits = hf(idx).logits
    expected = hf_loss(expected_logits, targets)
    assert_close(logits, expected_logits)
    assert loss.shape == () and abs(loss.item() / expected.item() - 1) < RTOL
    loss.backward()
    expected.backward()
    hf_grads = dict(hf.named_parameters())
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert rel_error(p.grad, hf_grads[name].grad) < RTOL, name


def test_loss_without_ignored_targets_and_logits_alone():
    hf = hf_model()
    model = kael_copy(hf)
    idx, targets = tokens(2, 9, seed=3), tokens(2, 9, seed=4)
    out = model(to_kael(idx))
    assert isinstance(out, kael.Tensor)
    logits, loss = model(to_kael(idx), to_kael(targets))
    with torch.no_grad():
        expected = hf_loss(hf(idx).logits, targets)
    assert abs(loss.item() / expected.item() - 1) < RTOL
    assert kael.equal(out, logits)


def test_parameters_are_read_on_every_call():
    hf = hf_model()
    model = kael.GPT(kael.GPTConfig(**SIZES)).eval()
    idx = tokens(2, 8, seed=5)
    before = model(to_kael(idx))
    model.load_state_dict({k: to_kael(v) for k, v in hf.state_dict().items()})
    with torch.no_grad():
        expected = hf(idx).logits
    assert_close(model(to_kael(idx)), expected)
    assert not kael.allclose(before, model(to_kael(idx)))
    # a reassigned Parameter is seen too
    model.transformer.ln_f.bias = kael.nn.Parameter(to_kael(hf.transformer.ln_f.bias.detach() + 1))
    with torch.no_grad():
        hf.transformer.ln_f.bias.add_(1)
        expected = hf(idx).logits
    assert_close(model(to_kael(idx)), expected)


# ---------------------------------------------------------------- checkpoints


def test_save_pretrained_loads_in_transformers(tmp_path):
    hf = hf_model()
    model = kael_copy(hf)
    model.save_pretrained(tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"]
    assert config["activation_function"] == "gelu_new" and config["tie_word_embeddings"] is True
    assert (config["n_positions"], config["n_embd"], config["n_layer"], config["n_head"]) == (BLOCK, 32, 2, 4)
    assert config["bos_token_id"] is None and config["eos_token_id"] is None  # 50256 is not in this vocabulary
    assert kael.read_safetensors_metadata(tmp_path / "ckpt" / "model.safetensors") == {"format": "pt"}
    keys = set(safetensors_torch.load_file(tmp_path / "ckpt" / "model.safetensors"))
    assert keys == {name for name, _ in hf.named_parameters()}  # transformer.*, no lm_head
    loaded = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "ckpt").eval()
    assert loaded.lm_head.weight is loaded.transformer.wte.weight
    idx = tokens(3, BLOCK, seed=6)
    with torch.no_grad():
        expected = loaded(idx).logits
        assert torch.equal(expected, hf(idx).logits)
    assert_close(model(to_kael(idx)), expected)


def test_transformers_save_pretrained_loads_in_kael(tmp_path):
    hf = hf_model(resid_pdrop=0.25, layer_norm_epsilon=0.05)  # an epsilon that shows in the logits
    hf.save_pretrained(tmp_path, safe_serialization=True)
    model = kael.GPT.from_pretrained(tmp_path)
    assert not model.training  # as transformers' from_pretrained
    assert model.config == kael.GPTConfig(**SIZES, dropout=0.25, layer_norm_epsilon=0.05)
    assert model.lm_head.weight is model.transformer.wte.weight
    idx = tokens(2, 13, seed=7)
    with torch.no_grad():
        expected = hf.eval()(idx).logits
    assert_close(model(idx=to_kael(idx)), expected)
    # and round trips through kael's own writer
    model.save_pretrained(tmp_path / "again")
    again = kael.GPT.from_pretrained(str(tmp_path / "again"))
    for (name, p), q in zip(model.named_parameters(), again.parameters()):
        assert kael.equal(p, q), name
    assert again.config == model.config


def write_checkpoint(directory, tensors, config=None):
    os.makedirs(directory, exist_ok=True)
    config = dict(hf_config().to_dict(), **(config or {}))
    (directory / "config.json").write_text(json.dumps(config))
    safetensors_torch.save_file({k: v.contiguous() for k, v in tensors.items()}, directory / "model.safetensors",
                                metadata={"format": "pt"})


def hf_tensors(hf):
    return {name: p.detach().clone() for name, p in hf.named_parameters()}


def test_checkpoint_without_the_transformer_prefix(tmp_path):
    # openai's gpt2 checkpoint: no prefix, the causal-mask buffers attn.bias and attn.masked_bias
    hf = hf_model()
    tensors = {name.removeprefix("transformer."): t for name, t in hf_tensors(hf).items()}
    for i in range(SIZES["n_layer"]):
        tensors[f"h.{i}.attn.bias"] = torch.tril(torch.ones(1, 1, BLOCK, BLOCK))
        tensors[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    tensors["lm_head.weight"] = hf.lm_head.weight.detach().clone()  # tied: equal to wte
    write_checkpoint(tmp_path, tensors, {"n_ctx": BLOCK})
    model = kael.GPT.from_pretrained(tmp_path)
    idx = tokens(2, 10, seed=8)
    with torch.no_grad():
        expected = hf(idx).logits
    assert_close(model(to_kael(idx)), expected)


@pytest.mark.parametrize("case, message", [
    ("missing", r"missing tensors 'transformer.h.1.mlp.c_fc.bias' \[128\]"),
    ("extra", r"unexpected tensors 'transformer.h.0.attn.q_norm.weight' \[8\]"),
    ("misshaped", r"'transformer.h.0.attn.c_attn.weight' is \[96, 32\], expected \[32, 96\]"),
    ("several_layers", r"unexpected tensors 'transformer.h.2.ln_1.weight' \[32\]"),
    ("duplicate", r"'wpe.weight' appears both with and without the 'transformer.' prefix"),
    ("untied", r"'lm_head.weight' \(\[97, 32\], kael.float32\) differs from 'transformer.wte.weight'"),
    ("dtypes", r"'transformer.ln_f.bias' is kael.float16, but transformer.wte.weight is kael.float32"),
])
def test_bad_checkpoints_name_the_tensor(tmp_path, case, message, monkeypatch):
    hf = hf_model()
    tensors = hf_tensors(hf)
    if case == "missing":
        del tensors["transformer.h.1.mlp.c_fc.bias"]
    elif case == "extra":
        tensors["transformer.h.0.attn.q_norm.weight"] = torch.ones(8)
    elif case == "misshaped":
        tensors["transformer.h.0.attn.c_attn.weight"] = tensors["transformer.h.0.attn.c_attn.weight"].t()
    elif case == "several_layers":
        tensors["transformer.h.2.ln_1.weight"] = torch.ones(32)
    elif case == "duplicate":
        tensors["wpe.weight"] = tensors["transformer.wpe.weight"].clone()
    elif case == "untied":
        tensors["lm_head.weight"] = torch.randn(V, 32)
    elif case == "dtypes":
        tensors["transformer.ln_f.bias"] = tensors["transformer.ln_f.bias"].half()
    write_checkpoint(tmp_path, tensors)
    built = []
    monkeypatch.setattr(kael.GPT, "_build", lambda *args: built.append(args))
    with pytest.raises(ValueError, match="GPT.from_pretrained: .*" + message):
        kael.GPT.from_pretrained(tmp_path)
    assert not built  # the checks come before any model is built


@pytest.mark.parametrize("config, message", [
    (dict(activation_function="gelu"), "activation_function must be one of gelu_new, gelu_pytorch_tanh .*'gelu'"),
    (dict(activation_function="relu"), "'relu'"),
    (dict(model_type="llama"), "model_type must be 'gpt2', got 'llama'"),
    (dict(n_inner=64), "does not compute n_inner 64"),
    (dict(scale_attn_weights=False), "does not compute scale_attn_weights false"),
    (dict(scale_attn_by_inverse_layer_idx=True), "does not compute scale_attn_by_inverse_layer_idx"),
    (dict(n_head=5), r"n_embd \(32\) must be a multiple of n_head \(5\)"),
])
def test_bad_configs(tmp_path, config, message):
    write_checkpoint(tmp_path, hf_tensors(hf_model()), config)
    with pytest.raises(ValueError, match="GPT.from_pretrained: '.*config.json': .*" + message):
        kael.GPT.from_pretrained(tmp_path)


def test_gelu_pytorch_tanh_and_absent_dtype_load(tmp_path):
    hf = hf_model(activation_function="gelu_pytorch_tanh")
    config = hf.config.to_dict()
    config.pop("dtype", None)
    config.pop("torch_dtype", None)
    write_checkpoint(tmp_path, hf_tensors(hf), config)
    model = kael.GPT.from_pretrained(tmp_path)
    idx = tokens(1, 5, seed=9)
    with torch.no_grad():
        expected = hf(idx).logits
    assert_close(model(to_kael(idx)), expected)


def test_untied_config_without_a_head(tmp_path):
    write_checkpoint(tmp_path, hf_tensors(hf_model()), {"tie_word_embeddings": False})
    with pytest.raises(ValueError, match="GPT.from_pretrained: config.json sets tie_word_embeddings false, but the "
                                         "checkpoint has no lm_head.weight"):
        kael.GPT.from_pretrained(tmp_path)
    # with a head equal to the embedding it loads
    tensors = hf_tensors(hf_model())
    tensors["lm_head.weight"] = tensors["transformer.wte.weight"].clone()
    write_checkpoint(tmp_path, tensors, {"tie_word_embeddings": False})
    assert kael.GPT.from_pretrained(tmp_path).lm_head.weight.shape == (V, 32)


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="GPT.from_pretrained: '.*gpt2' is not a directory"):
        kael.GPT.from_pretrained(tmp_path / "gpt2")  # a hub name: kael downloads nothing
    with pytest.raises(FileNotFoundError):
        kael.GPT.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(hf_config().to_dict()))
    with pytest.raises(FileNotFoundError, match="no model.safetensors in"):
        kael.GPT.from_pretrained(tmp_path)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_checkpoints_load_in_their_dtype(tmp_path, dtype):
    hf = hf_model().to(dtype)
    hf.save_pretrained(tmp_path, safe_serialization=True)
    model = kael.GPT.from_pretrained(tmp_path)
    kd = kael.float16 if dtype == torch.float16 else kael.bfloat16
    for name, p in model.named_parameters():
        assert p.dtype == kd, name
        assert torch.equal(to_torch(p.detach().float()), dict(hf.named_parameters())[name].detach().float()), name
    idx = tokens(2, 8, seed=10)
    logits = model(to_kael(idx))
    assert logits.dtype == kd
    # the same rounded weights in float32, computed by transformers in float32; half rounding
    # of the activations (kael computes each op in float32 and rounds its result)
    with torch.no_grad():
        expected = hf.float()(idx).logits
    tol = 2e-2 if dtype == torch.float16 else 1e-1
    assert_close(logits, expected, rtol=tol, atol=tol)
    model.save_pretrained(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "config.json").read_text())["dtype"] == str(dtype).removeprefix("torch.")
    assert kael.load_safetensors(tmp_path / "again" / "model.safetensors")["transformer.wte.weight"].dtype == kd


def test_bias_false_computes_as_zero_biases():
    # transformers' GPT-2 always has biases: the oracle is the same model with every bias zero
    hf = hf_model()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
    model = kael.GPT(kael.GPTConfig(**SIZES, bias=False))
    model.load_state_dict({k: to_kael(v) for k, v in hf.state_dict().items() if not k.endswith(".bias")})
    idx, targets = tokens(3, BLOCK, seed=19), tokens(3, BLOCK, seed=20)
    logits, loss = model(to_kael(idx), to_kael(targets))
    expected_logits = hf(idx).logits
    expected = hf_loss(expected_logits, targets)
    assert_close(logits, expected_logits)
    assert abs(loss.item() / expected.item() - 1) < RTOL
    loss.backward()
    expected.backward()
    hf_grads = dict(hf.named_parameters())
    for name, p in model.named_parameters():
        assert rel_error(p.grad, hf_grads[name].grad) < RTOL, name


def test_bias_false_round_trips_in_kael(tmp_path):
    model = kael.GPT(kael.GPTConfig(**SIZES, bias=False)).eval()
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["bias"] is False
    loaded = kael.GPT.from_pretrained(tmp_path)
    assert loaded.config == model.config
    idx = to_kael(tokens(2, 8, seed=11))
    assert kael.equal(loaded(idx), model(idx))


# ---------------------------------------------------------------- modes, dtypes, composition, training


def test_dropout_follows_train_and_eval():
    model = kael.GPT(kael.GPTConfig(**SIZES, dropout=0.2))
    idx = to_kael(tokens(2, 12, seed=12))
    assert model.training
    a, b = model(idx), model(idx)
    assert not kael.allclose(a, b)
    model.eval()
    c, d = model(idx), model(idx)
    assert kael.equal(c, d)
    assert not kael.allclose(a, c)
    model.train()
    assert not kael.allclose(model(idx), c)
    # without dropout, train and eval agree
    plain = kael.GPT(kael.GPTConfig(**SIZES))
    assert kael.equal(plain.train()(idx), plain.eval()(idx))


def test_to_bfloat16_converts_and_runs():
    hf = hf_model()
    model = kael_copy(hf)
    model.to(kael.bfloat16)
    for name, p in model.named_parameters():
        assert p.dtype == kael.bfloat16, name
    idx = tokens(2, 8, seed=13)
    targets = tokens(2, 8, seed=14)
    logits, loss = model(to_kael(idx), to_kael(targets))
    assert logits.dtype == kael.bfloat16
    loss.backward()
    assert model.transformer.wte.weight.grad.dtype == kael.bfloat16
    with torch.no_grad():
        expected = hf(idx).logits
    assert_close(logits, expected, rtol=1e-1, atol=1e-1)


def test_as_a_submodule():
    class WithHead(kael.nn.Module):
        def __init__(self):
            super().__init__()
            self.gpt = kael.GPT(kael.GPTConfig(**SIZES))
            self.scale = kael.nn.Parameter(kael.ones(()))

        def forward(self, idx):
            return self.gpt(idx) * self.scale

    outer = WithHead()
    names = [name for name, _ in outer.named_parameters()]
    assert names[0] == "scale"  # the module's own parameters first, as torch's
    assert names[1:] == ["gpt." + name for name, _ in outer.gpt.named_parameters()]
    assert len(names) == 1 + len(list(outer.gpt.parameters()))
    assert "gpt.lm_head.weight" in outer.state_dict()
    out = outer(to_kael(tokens(1, 4)))
    out.sum().backward()
    assert outer.scale.grad is not None and outer.gpt.transformer.h[1].mlp.c_fc.weight.grad is not None
    outer.eval()
    assert not outer.gpt.training


def test_adamw_with_clipping_follows_torch():
    hf = hf_model()
    model = kael_copy(hf).train()
    hf.train()
    idx, targets = tokens(4, BLOCK, seed=15), tokens(4, BLOCK, seed=16)
    targets[1, :3] = -100
    hyper = dict(lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    opt = kael.optim.AdamW(model.parameters(), **hyper)
    topt = torch.optim.AdamW(hf.parameters(), **hyper)
    ours, theirs, norms, tnorms = [], [], [], []
    for _ in range(6):
        opt.zero_grad()
        _, loss = model(to_kael(idx), to_kael(targets))
        loss.backward()
        norms.append(float(kael.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
        opt.step()
        ours.append(loss.item())

        topt.zero_grad()
        tloss = hf_loss(hf(idx).logits, targets)
        tloss.backward()
        tnorms.append(float(torch.nn.utils.clip_grad_norm_(hf.parameters(), 1.0)))
        topt.step()
        theirs.append(tloss.item())
    assert ours[-1] < ours[0] - 0.1
    np.testing.assert_allclose(ours, theirs, rtol=RTOL)
    np.testing.assert_allclose(norms, tnorms, rtol=RTOL)
    assert max(norms) > 1.0  # the clipping acted


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("make, message", [
    (lambda: kael.zeros(2, 4, dtype=kael.int32), "idx must be int64, got"),
    (lambda: kael.zeros(2, 4), "idx must be int64, got"),
    (lambda: kael.zeros(4, dtype=kael.int64), r"idx must be 2-d \(batch, time\), got shape \[4\]"),
    (lambda: kael.zeros(1, 2, 4, dtype=kael.int64), r"idx must be 2-d \(batch, time\), got shape \[1, 2, 4\]"),
    (lambda: kael.full((2, 4), V, dtype=kael.int64), r"idx holds token id 97, outside \[0, vocab_size=97\)"),
    (lambda: kael.full((2, 4), -1, dtype=kael.int64), r"idx holds token id -1, outside \[0, vocab_size=97\)"),
    (lambda: kael.zeros(2, BLOCK + 1, dtype=kael.int64), r"sequence length 17 must be in \[1, block_size=16\]"),
    (lambda: kael.zeros(2, 0, dtype=kael.int64), r"sequence length 0 must be in \[1, block_size=16\]"),
])
def test_bad_idx(make, message):
    model = kael.GPT(kael.GPTConfig(**SIZES))
    with pytest.raises(ValueError, match="GPT.forward: " + message):
        model(make())


def test_bad_idx_for_transformers_too():
    # where the comparison means something: transformers fails on an id outside the vocabulary
    # and on a sequence longer than n_positions as well (with IndexError); kael's is ValueError
    hf = hf_model()
    with pytest.raises(IndexError):
        hf(torch.full((1, 4), V))
    with pytest.raises((IndexError, RuntimeError)):
        hf(torch.zeros(1, BLOCK + 1, dtype=torch.long))


def test_bad_targets_and_arguments():
    model = kael.GPT(kael.GPTConfig(**SIZES))
    idx = kael.zeros(2, 4, dtype=kael.int64)
    with pytest.raises(ValueError, match=r"GPT.forward: targets has shape \[2, 3\], but idx has shape \[2, 4\]"):
        model(idx, kael.zeros(2, 3, dtype=kael.int64))
    with pytest.raises(ValueError, match=r"GPT.forward: targets holds 97, outside \[0, vocab_size=97\)"):
        model(idx, kael.full((2, 4), V, dtype=kael.int64))
    with pytest.raises(TypeError, match="GPT.forward: idx must be a kael.Tensor, got list"):
        model([[1, 2]])
    with pytest.raises(TypeError, match="GPT.forward: targets must be a kael.Tensor or None, got list"):
        model(idx, [[1, 2]])


# ---------------------------------------------------------------- more module behaviour


def test_conv1d_matches_transformers():
    from transformers.pytorch_utils import Conv1D as HFConv1D
    from kael.models.gpt import Conv1D
    torch.manual_seed(2)
    theirs = HFConv1D(24, 10)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours = Conv1D(24, 10)
    assert ours.weight.shape == (10, 24) and ours.bias.shape == (24,)
    ours.load_state_dict({k: to_kael(v) for k, v in theirs.state_dict().items()})
    x = torch.randn(3, 5, 10)
    assert_close(ours(to_kael(x)), theirs(x))
    assert Conv1D(24, 10, bias=False).bias is None


def test_sharded_checkpoint(tmp_path):
    hf = hf_model()
    hf.save_pretrained(tmp_path, safe_serialization=True, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").exists() and not (tmp_path / "model.safetensors").exists()
    model = kael.GPT.from_pretrained(tmp_path)
    idx = tokens(2, 6, seed=17)
    with torch.no_grad():
        expected = hf(idx).logits
    assert_close(model(to_kael(idx)), expected)


def test_deepcopy_pickle_and_module_save_keep_the_model(tmp_path):
    import copy
    model = kael.GPT(kael.GPTConfig(**SIZES)).eval()
    idx = to_kael(tokens(2, 5, seed=18))
    expected = model(idx)
    twin = copy.deepcopy(model)
    assert twin.lm_head.weight is twin.transformer.wte.weight
    assert twin.transformer.wte.weight is not model.transformer.wte.weight
    assert kael.equal(twin(idx), expected)
    with kael.no_grad():
        twin.transformer.wpe.weight.add_(1)  # the copy computes with its own parameters
    assert not kael.allclose(twin(idx), expected) and kael.equal(model(idx), expected)
    kael.save(model, tmp_path / "model.pt")
    assert kael.equal(kael.load(tmp_path / "model.pt", weights_only=False)(idx), expected)
    model.save(tmp_path / "state.safetensors")  # Module.save: state_dict() with the tied head twice
    other = kael.GPT(kael.GPTConfig(**SIZES)).eval()
    other.load(tmp_path / "state.safetensors")
    assert other.lm_head.weight is other.transformer.wte.weight
    assert kael.equal(other(idx), expected)
