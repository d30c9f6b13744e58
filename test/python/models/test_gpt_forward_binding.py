"""kael._C._gpt_parameters and _gpt_forward (csrc/libs/gpt_forward.cpp, libs/gpt/src/forward.cpp):
the binding's errors, and logits, loss and every gradient against transformers' GPT2LMHeadModel
with the same weights."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kael
from kael import _C

import transformers  # noqa: E402

VOCAB, BLOCK, N_LAYER, N_HEAD, N_EMBD = 97, 16, 2, 4, 32
CONFIG = (VOCAB, BLOCK, N_LAYER, N_HEAD, N_EMBD, 0.0, True, 1e-5)


def to_kael(t):
    return kael.tensor(np.ascontiguousarray(t.detach().cpu().numpy()))


def to_numpy(k):
    return np.array(k.tolist(), dtype=np.float64)


def hf_model(dropout=0.0):
    """A GPT2LMHeadModel of the test's config whose weights are all drawn at a scale that makes
    every part of the network matter (Hugging Face's own init leaves the logits near zero)."""
    torch.manual_seed(1)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=BLOCK, n_embd=N_EMBD, n_layer=N_LAYER,
                                     n_head=N_HEAD, resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                                     layer_norm_epsilon=1e-5, activation_function="gelu_new")
    model = transformers.GPT2LMHeadModel(config).float()
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    return model


def kael_params(model):
    return [kael.nn.Parameter(to_kael(p)) for _, p in model.named_parameters()]


def batch(seed=2, b=3, t=BLOCK):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, VOCAB, (b, t), generator=g)
    targets = torch.randint(0, VOCAB, (b, t), generator=g)
    targets[0, :3] = -100
    targets[2, -1] = -100
    return idx, targets


def test_parameter_table_is_hugging_faces():
    model = hf_model()
    table = _C._gpt_parameters(CONFIG)
    assert [n for n, _ in table] == [n for n, _ in model.named_parameters()]
    assert [s for _, s in table] == [tuple(p.shape) for _, p in model.named_parameters()]
    no_bias = _C._gpt_parameters(CONFIG[:6] + (False, 1e-5))
    assert [n for n, _ in no_bias] == [n for n, _ in table if not n.endswith(".bias")]
    assert all(isinstance(s, tuple) for _, s in no_bias)


@pytest.mark.parametrize("t", [BLOCK, 5, 1])
def test_logits_loss_and_grads_match_transformers(t):
    model = hf_model()
    params = kael_params(model)
    idx, targets = batch(t=t)
    logits, loss = _C._gpt_forward(CONFIG, params, to_kael(idx), to_kael(targets), False)

    hf_logits = model(idx).logits
    hf_loss = F.cross_entropy(hf_logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)
    hf_loss.backward()

    assert tuple(logits.shape) == (3, t, VOCAB)
    np.testing.assert_allclose(to_numpy(logits), hf_logits.detach().double().numpy(), rtol=1e-4, atol=1e-4)
    assert math.isclose(loss.item(), hf_loss.item(), rel_tol=1e-4, abs_tol=1e-5)

    loss.backward()
    for (name, p), k in zip(model.named_parameters(), params):
        assert k.grad is not None, name
        expected = p.grad.double().numpy()
        got = to_numpy(k.grad)
        err = np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-12)
        assert err < 1e-4, f"{name}: relative error {err}"


def test_without_targets_the_loss_is_none():
    model = hf_model()
    idx, _ = batch()
    logits, loss = _C._gpt_forward(CONFIG, kael_params(model), to_kael(idx), None, False)
    assert loss is None
    np.testing.assert_allclose(to_numpy(logits), model(idx).logits.detach().double().numpy(), rtol=1e-4, atol=1e-4)


def test_no_bias_matches_a_model_with_zero_biases():
    model = hf_model()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
    params = [kael.nn.Parameter(to_kael(p)) for n, p in model.named_parameters() if not n.endswith(".bias")]
    idx, targets = batch()
    logits, loss = _C._gpt_forward(CONFIG[:6] + (False, 1e-5), params, to_kael(idx), to_kael(targets), False)
    hf_logits = model(idx).logits
    np.testing.assert_allclose(to_numpy(logits), hf_logits.detach().double().numpy(), rtol=1e-4, atol=1e-4)
    loss.backward()
    assert all(p.grad is not None for p in params)


def test_dropout_only_in_training_and_drawn_from_the_default_generator():
    config = CONFIG[:5] + (0.3,) + CONFIG[6:]
    model = hf_model()
    params = kael_params(model)
    idx, targets = batch()
    ki, kt = to_kael(idx), to_kael(targets)
    eval_logits, _ = _C._gpt_forward(config, params, ki, kt, False)
    np.testing.assert_allclose(to_numpy(eval_logits), model(idx).logits.detach().double().numpy(), rtol=1e-4,
                               atol=1e-4)
    kael.manual_seed(5)
    a, loss_a = _C._gpt_forward(config, params, ki, kt, True)
    kael.manual_seed(5)
    b, loss_b = _C._gpt_forward(config, params, ki, kt, True)
    c, _ = _C._gpt_forward(config, params, ki, kt, True)
    assert a.tolist() == b.tolist() and loss_a.item() == loss_b.item()
    assert a.tolist() != c.tolist()
    assert np.abs(to_numpy(a) - to_numpy(eval_logits)).max() > 1e-2
    loss_a.backward()
    assert all(p.grad is not None for p in params)


def test_all_targets_ignored_gives_nan_as_torch():
    model = hf_model()
    idx, _ = batch()
    targets = torch.full_like(idx, -100)
    _, loss = _C._gpt_forward(CONFIG, kael_params(model), to_kael(idx), to_kael(targets), False)
    assert math.isnan(loss.item())
    assert math.isnan(F.cross_entropy(torch.randn(idx.numel(), VOCAB), targets.reshape(-1)).item())


# ---------------------------------------------------------------- errors
def good_call():
    params = [kael.zeros(*shape) for _, shape in _C._gpt_parameters(CONFIG)]
    idx = kael.zeros(2, 4, dtype=kael.int64)
    return params, idx


def test_parameters_validates_the_config():
    with pytest.raises(ValueError, match=r"n_embd \(30\) must be a multiple of n_head \(4\)"):
        _C._gpt_parameters((VOCAB, BLOCK, N_LAYER, 4, 30, 0.0, True, 1e-5))
    with pytest.raises(ValueError, match="vocab_size must be at least 1, got 0"):
        _C._gpt_parameters((0, BLOCK, N_LAYER, N_HEAD, N_EMBD, 0.0, True, 1e-5))
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1"):
        _C._gpt_parameters(CONFIG[:5] + (1.0,) + CONFIG[6:])
    with pytest.raises(ValueError, match="layer_norm_epsilon must be positive, got nan"):
        _C._gpt_parameters(CONFIG[:7] + (float("nan"),))


@pytest.mark.parametrize("config, message", [
    ([97, 16, 2, 4, 32, 0.0, True, 1e-5], "config must be a tuple .* got list"),
    (CONFIG[:7], "config must be a tuple .* got tuple of the wrong length"),
    (CONFIG + (1,), "got tuple of the wrong length"),
    (("97",) + CONFIG[1:], "config.vocab_size must be an int, got str"),
    (CONFIG[:2] + (2.0,) + CONFIG[3:], "config.n_layer must be an int, got float"),
    (CONFIG[:4] + (True,) + CONFIG[5:], "config.n_embd must be an int, got bool"),
    (CONFIG[:5] + ("0.1",) + CONFIG[6:], "config.dropout must be a float, got str"),
    (CONFIG[:6] + (1,) + CONFIG[7:], "config.bias must be a bool, got int"),
    (CONFIG[:7] + (None,), "config.layer_norm_epsilon must be a float, got NoneType"),
])
def test_config_of_the_wrong_form_is_a_type_error(config, message):
    with pytest.raises(TypeError, match=message):
        _C._gpt_parameters(config)
    params, idx = good_call()
    with pytest.raises(TypeError, match=message):
        _C._gpt_forward(config, params, idx, None, False)


def test_argument_types():
    params, idx = good_call()
    with pytest.raises(TypeError, match=r"_gpt_forward\(\) takes 5 arguments"):
        _C._gpt_forward(CONFIG, params, idx, None)
    with pytest.raises(TypeError, match=r"_gpt_parameters\(\) takes 1 argument"):
        _C._gpt_parameters()
    with pytest.raises(TypeError, match=r"params\[3\] must be a Tensor, got float"):
        _C._gpt_forward(CONFIG, params[:3] + [1.5] + params[4:], idx, None, False)
    with pytest.raises(TypeError, match=r"params\[0\] must be a Tensor, got Tensor"):  # torch's is not kael's
        _C._gpt_forward(CONFIG, [torch.zeros(VOCAB, N_EMBD)] + params[1:], idx, None, False)
    with pytest.raises(TypeError, match="params must be a list of tensors, got dict"):
        _C._gpt_forward(CONFIG, {}, idx, None, False)
    with pytest.raises(TypeError, match="idx must be a Tensor, got list"):
        _C._gpt_forward(CONFIG, params, [[1, 2]], None, False)
    with pytest.raises(TypeError, match="targets must be a Tensor or None, got int"):
        _C._gpt_forward(CONFIG, params, idx, 3, False)
    with pytest.raises(TypeError, match="training must be a bool, got int"):
        _C._gpt_forward(CONFIG, params, idx, None, 1)
    # a tuple of parameters is taken as a list
    logits, _ = _C._gpt_forward(CONFIG, tuple(params), idx, None, False)
    assert tuple(logits.shape) == (2, 4, VOCAB)


def test_parameter_errors_name_the_parameter():
    params, idx = good_call()
    with pytest.raises(ValueError, match="expected 28 parameters for n_layer=2, got 27"):
        _C._gpt_forward(CONFIG, params[:-1], idx, None, False)
    bad = list(params)
    bad[4] = kael.zeros(N_EMBD, N_EMBD)
    with pytest.raises(ValueError, match=r"transformer.h.0.attn.c_attn.weight has shape \[32, 32\], expected \[32, 96\]"):
        _C._gpt_forward(CONFIG, bad, idx, None, False)
    bad[4] = kael.zeros(N_EMBD, 3 * N_EMBD, dtype=kael.int64)
    with pytest.raises(ValueError, match="c_attn.weight must be floating point"):
        _C._gpt_forward(CONFIG, bad, idx, None, False)
    bad[4] = kael.zeros(N_EMBD, 3 * N_EMBD, dtype=kael.float64)
    with pytest.raises(ValueError, match="c_attn.weight is float64 .* but transformer.wte.weight is float32"):
        _C._gpt_forward(CONFIG, bad, idx, None, False)


@pytest.mark.parametrize("make_idx, make_targets, message", [
    (lambda: kael.zeros(2, 4), None, "GPT.forward: idx must be int64, got float32"),
    (lambda: kael.zeros(2, 4, dtype=kael.int32), None, "GPT.forward: idx must be int64, got int32"),
    (lambda: kael.zeros(4, dtype=kael.int64), None, r"GPT.forward: idx must be 2-d \(batch, time\), got shape \[4\]"),
    (lambda: kael.zeros(2, 0, dtype=kael.int64), None, r"sequence length 0 must be in \[1, block_size=16\]"),
    (lambda: kael.zeros(1, 17, dtype=kael.int64), None, r"sequence length 17 must be in \[1, block_size=16\]"),
    (lambda: kael.tensor([[1, 97]]), None, r"GPT.forward: idx holds token id 97, outside \[0, vocab_size=97\)"),
    (lambda: kael.tensor([[-1, 2]]), None, r"GPT.forward: idx holds token id -1"),
    (lambda: kael.tensor([[1, 2]]), lambda: kael.tensor([[1, 2.0]]), "GPT.forward: targets must be int64, got float32"),
    (lambda: kael.tensor([[1, 2]]), lambda: kael.tensor([[1, 2, 3]]),
     r"GPT.forward: targets has shape \[1, 3\], but idx has shape \[1, 2\]"),
    (lambda: kael.tensor([[1, 2]]), lambda: kael.tensor([[1, 97]]),
     r"GPT.forward: targets holds 97, outside \[0, vocab_size=97\) and not -100"),
    (lambda: kael.tensor([[1, 2]]), lambda: kael.tensor([[-1, 5]]), "GPT.forward: targets holds -1"),
])
def test_input_errors(make_idx, make_targets, message):
    params, _ = good_call()
    targets = make_targets() if make_targets else None
    with pytest.raises(ValueError, match=message):
        _C._gpt_forward(CONFIG, params, make_idx(), targets, False)


def test_non_contiguous_inputs():
    model = hf_model()
    idx, targets = batch(t=8)
    ki = to_kael(idx.t().contiguous()).t()  # (3, 8) with strides (1, 3)
    kt = to_kael(targets.t().contiguous()).t()
    logits, loss = _C._gpt_forward(CONFIG, kael_params(model), ki, kt, False)
    hf_logits = model(idx).logits
    np.testing.assert_allclose(to_numpy(logits), hf_logits.detach().double().numpy(), rtol=1e-4, atol=1e-4)
    hf_loss = F.cross_entropy(hf_logits.reshape(-1, VOCAB), targets.reshape(-1))
    assert math.isclose(loss.item(), hf_loss.item(), rel_tol=1e-4)
