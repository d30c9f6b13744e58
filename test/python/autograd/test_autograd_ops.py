"""Gradients of every differentiable op of the registry against PyTorch, and gradcheck.

The list of ops comes from native_functions.yaml: every entry with `derivatives:` must have
cases, its `samples:` in the registry (or, where a case needs a helper of this file, in
HAND_CASES; pointwise entries get theirs automatically), so a new differentiable op fails
`test_every_differentiable_op_has_cases` until it is covered. Each case runs in float32 and
float64, with contiguous inputs and with non-contiguous ones (the leaf is a permuted view's
base, so view backward is exercised too); binary pointwise ops also broadcast. Float64 cases
also run kael.autograd.gradcheck.
"""
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

import kael
from helpers import check, to_kael
from registry_samples import Case, f, idx, mask, perm_idx, registry_cases, values  # noqa: F401

_ROOT = Path(__file__).resolve().parents[3]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))
from codegen.model import parse_registry  # noqa: E402

REGISTRY = parse_registry((_ROOT / "native_functions.yaml").read_text())


def _differentiable():
    out = {}
    for f in REGISTRY:
        if f.derivatives and not f.schema.returns_list:
            out[f.schema.full_name] = f
    return out


DIFFERENTIABLE = _differentiable()

# Registry entries that produce floating-point results but have no derivative formula: calling
# them on inputs that require grad raises "the derivative is not implemented". The target is none.
NO_FORMULA = {
    "empty": "factory", "empty_strided": "factory", "arange.start": "factory", "eye": "factory",
    "linspace": "factory", "logspace": "factory", "randperm": "factory",
    "bernoulli.p": "random sample (not differentiable by design)",
    "multinomial": "integer result",
    "_sdpa_dropout_mask": "random mask (not differentiable by design)",
    "scatter.src_reduce": "scatter with reduce=: not differentiable in PyTorch either",
    "scatter.value_reduce": "scatter with reduce=: not differentiable in PyTorch either",
    "scatter_.src_reduce": "scatter_ with reduce=: not differentiable in PyTorch either",
    "scatter_.value_reduce": "scatter_ with reduce=: not differentiable in PyTorch either",
    "heaviside": "not differentiable in PyTorch either (its derivative is not implemented there)",
    "view.dtype": "the same bits read as another dtype: not differentiable in PyTorch either",
    "convolution_backward_input": "convolution's double backward is not implemented yet",
    "convolution_backward_weight": "convolution's double backward is not implemented yet",
    "convolution_backward_bias": "convolution's double backward is not implemented yet",
    "_rnn_layer_backward": "recurrent layers' double backward is not implemented",
    "native_batch_norm_backward_input": "fused kernel used only without a graph; double backward goes through a "
                                        "differentiable composite (test_batch_norm.py)",
    "native_batch_norm_backward_weight": "fused kernel used only without a graph; double backward goes through a "
                                         "differentiable composite (test_batch_norm.py)",
    # Note [Fused backward kernels]: called only without a graph; with create_graph the helpers
    # compose differentiable ops (test_dispatch_paths.py traces both)
    "_layer_norm_backward_input": "fused kernel used only without a graph",
    "_layer_norm_backward_weight": "fused kernel used only without a graph",
    "_gelu_backward": "fused kernel used only without a graph",
    "_gelu_tanh_backward": "fused kernel used only without a graph",
    "_sdpa_backward": "fused kernel used only without a graph",
    "_adam_step_": "an optimizer step, run under no_grad; records no history, as torch's _fused_adam_",
}


def test_no_formula_list_is_current():
    """NO_FORMULA lists exactly the backend (non-composite) entries without derivatives whose
    results can be floating point (comparisons, argmax and the like return integers or bools)."""
    integer_results = {"logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf", "isfinite", "signbit",
                       "eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin", "all", "any", "argsort", "nonzero",
                       "bincount", "searchsorted", "searchsorted.Scalar", "bucketize", "bucketize.Scalar",
                       "one_hot", "_unique2", "_unique_dim", "_unique_consecutive", "detach"}
    missing = set()
    for f in REGISTRY:
        if f.derivatives or f.composite_implicit or f.schema.full_name in integer_results or f.schema.returns_value:
            continue
        missing.add(f.schema.full_name)
    assert missing == set(NO_FORMULA), (missing - set(NO_FORMULA), set(NO_FORMULA) - missing)


# ---------------------------------------------------------------- inputs

def F(lib):
    return lib.nn.functional


C = Case

# ---------------------------------------------------------------- automatic cases (pointwise)

DOMAIN = {"log": "pos", "log2": "pos", "log10": "pos", "log1p": "pos", "sqrt": "pos", "rsqrt": "pos",
          "asin": "unit", "acos": "unit", "tan": "unit", "reciprocal": "nonzero"}
BINARY_DOMAIN = {"pow": ("pos", "any"), "div": ("any", "nonzero"), "xlogy": ("any", "pos")}


def _pointwise_cases(fn_):
    name = fn_.name
    tensors = fn_.schema.tensor_params
    others = [p for p in fn_.schema.params if p.type.base != "Tensor" and not p.has_default]
    if name.startswith("_") or others or len(tensors) > 2 or name in ("where", "lerp", "silu", "softplus"):
        return None
    if len(tensors) == 1:
        return [C(lambda L, x: getattr(L, name)(x), f(3, 4, domain=DOMAIN.get(name, "any")))]
    da, db = BINARY_DOMAIN.get(name, ("any", "any"))
    return [C(lambda L, x, y: getattr(L, name)(x, y), f(3, 4, domain=da), f(3, 4, domain=db)),
            C(lambda L, x, y: getattr(L, name)(x, y), f(2, 1, 4, domain=da), f(3, 1, domain=db), noncontig=False),
            C(lambda L, x: getattr(L, name)(x, 1.5 if L is kael else torch.tensor(1.5, dtype=x.dtype)),
              f(3, 4, domain=da))]


def _floor_divide(L, x, y):
    # torch has no derivative for floor_divide; kael's is zero (floor is piecewise constant).
    if L is kael:
        return L.floor_divide(x, y)
    return torch.floor_divide(x.detach(), y.detach()) + 0 * x + 0 * y


# ---------------------------------------------------------------- hand-written cases

def _embedding_backward(L, g, i, num_weights, padding_idx):
    if L is kael:
        return L.embedding_backward(g, i, num_weights, padding_idx)
    return torch.ops.aten.embedding_backward(g, i, num_weights, padding_idx, False, False)


def _ce_backward(L, g, x, t, ignore_index, label_smoothing):
    """cross_entropy_losses_backward in kael; in torch, the gradient of cross_entropy(reduction='none')
    taken with create_graph (differentiable in g and x)."""
    if L is kael:
        return L.cross_entropy_losses_backward(g, x, t, ignore_index, label_smoothing)
    losses = F(torch).cross_entropy(x, t, ignore_index=ignore_index, label_smoothing=label_smoothing,
                                    reduction="none")
    return torch.autograd.grad(losses, x, g, create_graph=True)[0]


# Pooling and resampling backward ops: the gradient of the forward op at a fixed input, taken with
# create_graph, as a function of the upstream gradient g (kael's graph records the backward op).
_POOL_FORWARD = {
    "max": ((1, 2, 6, 6), lambda L, x: F(L).max_pool2d(x, 3, 2, 1)),
    "avg": ((1, 2, 7, 7), lambda L, x: F(L).avg_pool2d(x, 3, 2, 1, False, False)),
    "adaptive_avg": ((1, 2, 5, 7), lambda L, x: F(L).adaptive_avg_pool2d(x, (3, 2))),
    "nearest": ((1, 2, 3, 4), lambda L, x: F(L).interpolate(x, scale_factor=1.7)),
    "nearest_exact": ((1, 2, 3, 4), lambda L, x: F(L).interpolate(x, scale_factor=1.7, mode="nearest-exact")),
    "bilinear": ((1, 2, 3, 4), lambda L, x: F(L).interpolate(x, (5, 7), mode="bilinear", align_corners=True)),
}


def _fixed_input(L, shape, like):
    n = int(np.prod(shape))
    t = (torch.randperm(n, generator=torch.Generator().manual_seed(7)).double() / n - 0.5).reshape(shape)
    name = str(like.dtype).rsplit(".", 1)[-1]
    return to_kael(t).to(getattr(kael, name)) if L is kael else t.to(getattr(torch, name))


def _pool_backward(L, kind, g):
    shape, forward = _POOL_FORWARD[kind]
    with L.enable_grad():  # gradcheck evaluates the case under no_grad
        x = _fixed_input(L, shape, g).requires_grad_()
        return L.autograd.grad(forward(L, x), x, g, create_graph=True)[0]


def _unpool_indices(L, x):
    return F(L).max_pool2d(_fixed_input(L, (1, 2, 6, 6), x), 2, return_indices=True)[1]


def _standardize(L, x):
    return L.standardize(x, [4]) if L is kael else F(torch).layer_norm(x, (4,))


def _rnn_layer(L, mode, x, hx, weights, has_biases, reverse=False, batch_sizes=None):
    """One recurrent layer: kael's _rnn_layer over (T, B, I) rows (or packed rows with
    batch_sizes); torch's _VF layer (a reverse direction as the forward one over the flipped
    sequence). Returns the output and the final states."""
    lstm = mode == "LSTM"
    if L is kael:
        if batch_sizes is None:
            steps, batch = x.shape[0], x.shape[1]
            rows, sizes = x.reshape(steps * batch, x.shape[2]), [batch] * steps
        else:
            rows, sizes = x, batch_sizes
        states = [h[0] for h in hx] if lstm else [hx[0]]
        out, h, c, _ = kael._C._rnn_layer([rows] + states + list(weights), sizes, mode, has_biases, reverse)
        if batch_sizes is None:
            out = out.reshape(x.shape[0], x.shape[1], out.shape[1])
        return (out, h.unsqueeze(0), c.unsqueeze(0)) if lstm else (out, h.unsqueeze(0))
    fn = {"LSTM": torch.lstm, "GRU": torch.gru, "RNN_TANH": torch.rnn_tanh, "RNN_RELU": torch.rnn_relu}[mode]
    if batch_sizes is not None:
        return tuple(fn(x, torch.tensor(batch_sizes), hx, list(weights), has_biases, 1, 0.0, True, False))
    res = fn(x.flip(0) if reverse else x, hx, list(weights), has_biases, 1, 0.0, True, False, False)
    return (res[0].flip(0) if reverse else res[0],) + tuple(res[1:])


# The cases that need helpers of this file (the torch spelling of a kael-only op, a backward op
# reached through its forward, recurrent layers); every other differentiable entry has its cases
# in the registry (the `samples:` key of native_functions.yaml, test/python/registry_samples.py).
HAND_CASES = {
    "_rnn_layer": [
        C(lambda L, x, h, a, b, c, d: _rnn_layer(L, "RNN_TANH", x, h, (a, b, c, d), True),
          f(4, 2, 3), f(1, 2, 5, domain="unit"), f(5, 3, domain="unit"), f(5, 5, domain="unit"), f(5), f(5)),
        C(lambda L, x, h, a, b: _rnn_layer(L, "RNN_RELU", x, h, (a, b), False, reverse=True),
          f(4, 2, 3), f(1, 2, 5, domain="unit"), f(5, 3, domain="unit"), f(5, 5, domain="unit")),
        C(lambda L, x, h, c0, a, b, c, d, r: _rnn_layer(L, "LSTM", x, (h, c0), (a, b, c, d, r), True, reverse=True),
          f(3, 2, 2), f(1, 2, 2, domain="unit"), f(1, 2, 3, domain="unit"), f(12, 2, domain="unit"),
          f(12, 2, domain="unit"), f(12, domain="unit"), f(12, domain="unit"), f(2, 3, domain="unit")),
        C(lambda L, x, h, a, b, c, d: _rnn_layer(L, "GRU", x, h, (a, b, c, d), True),
          f(4, 2, 3), f(1, 2, 3, domain="unit"), f(9, 3, domain="unit"), f(9, 3, domain="unit"), f(9, domain="unit"),
          f(9, domain="unit")),
        C(lambda L, x, h, c0, a, b: _rnn_layer(L, "LSTM", x, (h, c0), (a, b), False, batch_sizes=[3, 2, 2, 1]),
          f(8, 2), f(1, 3, 3, domain="unit"), f(1, 3, 3, domain="unit"), f(12, 2, domain="unit"),
          f(12, 3, domain="unit")),
    ],
    "_threshold_backward": [C(lambda L, g, x: kael._C._threshold_backward(g, x, 0.25) if L is kael else
                              torch.ops.aten.threshold_backward(g, x, 0.25), f(3, 4), f(3, 4))],
    "_gelu_grad": [C(lambda L, x: kael._C._gelu_grad(x) if L is kael else
                     torch.ops.aten.gelu_backward(torch.ones_like(x), x), f(3, 4))],
    "_gelu_tanh_grad": [C(lambda L, x: kael._C._gelu_tanh_grad(x) if L is kael else
                          torch.ops.aten.gelu_backward(torch.ones_like(x), x, approximate="tanh"), f(3, 4))],
    "embedding_backward": [C(lambda L, g, i: _embedding_backward(L, g, i, 6, -1), f(5, 3), idx(5, high=6)),
                           C(lambda L, g, i: _embedding_backward(L, g, i, 4, 2), f(2, 3, 2), idx(2, 3, high=4))],
    "cross_entropy_losses_backward": [
        C(lambda L, g, x, t: _ce_backward(L, g, x, t, -100, 0.0), f(4), f(4, 5), idx(4, high=5)),
        C(lambda L, g, x, t: _ce_backward(L, g, x, t, 2, 0.1), f(6), f(6, 3), idx(6, high=3)),
        C(lambda L, g, x, t: _ce_backward(L, g, x, t, -100, 0.2), f(2, 3), f(2, 4, 3), idx(2, 3, high=4)),
        C(lambda L, g, x, t: _ce_backward(L, g, x, t, -100, 0.0), f(), f(5), idx(high=5))],
    "floor_divide": [C(_floor_divide, f(3, 4), f(3, 4)), C(_floor_divide, f(2, 1, 4), f(3, 1), noncontig=False)],
    "standardize": [C(_standardize, f(3, 4))],
    "native_batch_norm": [C(lambda L, x, w, b: F(L).batch_norm(x, None, None, w, b, training=True), f(4, 3, 5), f(3),
                            f(3)),
                          C(lambda L, x, w, b: F(L).batch_norm(x, L.linspace(-1, 1, 3, dtype=x.dtype),
                                                               L.linspace(0.5, 2, 3, dtype=x.dtype), w, b),
                            f(2, 3, 2, 2), f(3), f(3))],
    "max_pool2d_with_indices_backward": [C(lambda L, g: _pool_backward(L, "max", g), f(1, 2, 3, 3))],
    "avg_pool2d_backward": [C(lambda L, g: _pool_backward(L, "avg", g), f(1, 2, 4, 4))],
    "adaptive_avg_pool2d_backward": [C(lambda L, g: _pool_backward(L, "adaptive_avg", g), f(1, 2, 3, 2))],
    "max_unpool2d": [C(lambda L, x: F(L).max_unpool2d(x, _unpool_indices(L, x), 2), f(1, 2, 3, 3))],
    "_upsample_nearest2d_backward": [C(lambda L, g: _pool_backward(L, "nearest", g), f(1, 2, 5, 6))],
    "_upsample_nearest_exact2d_backward": [C(lambda L, g: _pool_backward(L, "nearest_exact", g), f(1, 2, 5, 6))],
    "_upsample_bilinear2d_backward": [C(lambda L, g: _pool_backward(L, "bilinear", g), f(1, 2, 5, 7))],
    "fill_": [C(lambda L, x: (x * 1).fill_(2.0) * x, f(3, 4))],
}

CASES = {**{name: cases for name, cases in registry_cases().items() if name in DIFFERENTIABLE}, **HAND_CASES}

# Entries with cases that compare no gradient against finite differences (random results).
NO_GRADCHECK = {"uniform_", "normal_", "random_.from", "random_.to", "random_", "bernoulli_.Tensor", "bernoulli_.float",
                "bernoulli"}


def all_cases():
    """(name, case, layout) for every case; a case whose shapes are its point (view geometry,
    broadcasting) runs contiguous only."""
    out = []
    for name, fn_ in sorted(DIFFERENTIABLE.items()):
        cases = CASES.get(name)
        if cases is None and fn_.is_pointwise:
            cases = _pointwise_cases(fn_)
        for i, c in enumerate(cases or []):
            for layout in ("contig", "noncontig") if c.noncontig else ("contig",):
                out.append(pytest.param(name, c, layout, id=f"{name}-{i}-{layout}"))
    return out


def test_hand_cases_are_not_also_registry_samples():
    assert not set(HAND_CASES) & set(registry_cases())
    assert set(HAND_CASES) <= set(DIFFERENTIABLE)


def test_every_differentiable_op_has_cases():
    uncovered = [n for n, fn_ in DIFFERENTIABLE.items()
                 if n not in CASES and not (fn_.is_pointwise and _pointwise_cases(fn_))]
    assert uncovered == []
    stale = set(CASES) - set(DIFFERENTIABLE)
    assert not stale, f"cases for entries that are not differentiable: {stale}"


# ---------------------------------------------------------------- running a case

def make_inputs(case, dtype, layout, rng):
    """(torch leaves, torch inputs, kael leaves, kael inputs); float leaves require grad."""
    tl, ti, kl, ki = [], [], [], []
    for s in case.specs:
        v = values(s, rng)
        if s.kind != "float":
            ti.append(v)
            ki.append(to_kael(v))
            continue
        v = v.to(getattr(torch, dtype))
        if layout == "noncontig" and v.dim() >= 2:
            base_t = v.permute(*reversed(range(v.dim()))).contiguous()
            base_k = to_kael(base_t)
            base_t.requires_grad_()
            base_k.requires_grad_()
            order = tuple(reversed(range(v.dim())))
            tl.append(base_t)
            kl.append(base_k)
            ti.append(base_t.permute(*order))
            ki.append(base_k.permute(*order))
        else:
            t = v.clone().requires_grad_()
            k = to_kael(v).requires_grad_()
            tl.append(t)
            kl.append(k)
            ti.append(t)
            ki.append(k)
    return tl, ti, kl, ki


def stable_seed(*parts):
    """A seed from the test's parameters that is the same in every process: Python's hash of a
    str changes from one interpreter to the next (PYTHONHASHSEED), and with it the inputs, so a
    case near a discontinuity (remainder) failed one run in many."""
    return zlib.crc32(repr(parts).encode())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,case,layout", all_cases())
def test_gradient_matches_torch(name, case, dtype, layout):
    rng = np.random.default_rng(stable_seed(name, dtype))
    tl, ti, kl, ki = make_inputs(case, dtype, layout, rng)
    tres = case.fn(torch, *ti)
    kres = case.fn(kael, *ki)
    if isinstance(tres, tuple):  # values and indices (integer results have no gradient)
        assert isinstance(kres, tuple) and len(kres) == len(tres)
        for k, t in zip(kres, tres):
            check(k.detach(), t.detach(), atol=case.atol, rtol=case.rtol)
            assert k.requires_grad == t.requires_grad
    elif name not in NO_GRADCHECK:  # the values too (random results aside)
        check(kres.detach(), tres.detach(), atol=case.atol, rtol=case.rtol)
    touts = [t for t in (tres if isinstance(tres, tuple) else (tres,)) if t.requires_grad]
    kouts = [k for k in (kres if isinstance(kres, tuple) else (kres,)) if k.requires_grad]
    assert touts and len(kouts) == len(touts)
    gs = []
    for k, t in zip(kouts, touts):
        assert k.shape == tuple(t.shape)
        assert k.grad_fn is not None
        gs.append(torch.tensor(rng.uniform(-1, 1, size=tuple(t.shape)), dtype=t.dtype))
    torch.autograd.backward(touts, gs)
    kael.autograd.backward(kouts, [to_kael(g) for g in gs])
    for t, k in zip(tl, kl):
        if t.grad is None:
            assert k.grad is None or not bool((k.grad != 0).any())
        else:
            assert k.grad is not None, f"{name}: no gradient reached an input"
            check(k.grad, t.grad, atol=case.atol, rtol=case.rtol)


@pytest.mark.parametrize("name,case", [pytest.param(*p.values[:2], id=p.id.rsplit("-", 1)[0]) for p in all_cases()
                                       if p.values[0] not in NO_GRADCHECK and p.values[2] == "contig"])
def test_gradcheck(name, case):
    rng = np.random.default_rng(stable_seed(name))
    _, _, kl, ki = make_inputs(case, "float64", "contig", rng)
    floats = [i for i, s in enumerate(case.specs) if s.kind == "float"]

    def fn(*xs):
        args = list(ki)
        for i, x in zip(floats, xs):
            args[i] = x
        return case.fn(kael, *args)

    assert kael.autograd.gradcheck(fn, tuple(kl), eps=1e-6, atol=1e-5, rtol=1e-3)
