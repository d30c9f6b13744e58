"""nn.RNN, nn.LSTM, nn.GRU and their cells against torch: the same weights (load_state_dict from the
torch module) give the same outputs, final states and gradients (input, every parameter, initial
states), over layers, directions, batch_first, projections, unbatched and packed input; the
parameters' names, shapes and initialisation; the errors; one autograd node per layer-direction."""
import math
import warnings

import numpy as np
import pytest
import torch

import kael
from kael.nn.utils import rnn as krnn


def tk(t, requires_grad=False):
    out = kael.tensor(t.detach().numpy().copy())
    if requires_grad:
        out.requires_grad_(True)
    return out


def npy(t):
    return np.asarray(t.detach().tolist()) if isinstance(t, kael.Tensor) else t.detach().numpy()


def tol(dtype):
    return dict(rtol=1e-9, atol=1e-10) if dtype == torch.float64 else dict(rtol=2e-4, atol=2e-5)


def twin(name, dtype, *args, **kwargs):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(*args, **kwargs).to(dtype)
    km = getattr(kael.nn, name)(*args, **kwargs, dtype=kael.float64 if dtype == torch.float64 else kael.float32)
    km.load_state_dict({k: tk(v) for k, v in tm.state_dict().items()})
    return tm, km


def states(h):
    return list(h) if isinstance(h, tuple) else [h]


def loss_of(lib, out, hidden):
    """A loss that weighs every output element differently (so wrong positions show)."""
    total = 0
    for i, t in enumerate([out] + states(hidden)):
        w = lib.arange(t.numel(), dtype=t.dtype).reshape(t.shape) / max(t.numel(), 1)
        total = total + ((t + 0.5 * i) * (w + 1)).pow(2).sum()
    return total


def compare_module(tm, km, x, hx=None, dtype=torch.float64, packed=None):
    """Runs both with input x (torch tensor; or packed: (padded, lengths, enforce_sorted, batch_first))
    and hx, compares outputs, states and gradients of x, hx and every parameter."""
    xt = x.clone().requires_grad_(True)
    xk = tk(x, True)
    hxt = hxk = None
    if hx is not None:
        hxt = tuple(h.clone().requires_grad_(True) for h in hx) if isinstance(hx, tuple) else \
            hx.clone().requires_grad_(True)
        hxk = tuple(tk(h, True) for h in hx) if isinstance(hx, tuple) else tk(hx, True)
    if packed is not None:
        lengths, enforce_sorted, batch_first = packed
        it = torch.nn.utils.rnn.pack_padded_sequence(xt, lengths, batch_first=batch_first,
                                                     enforce_sorted=enforce_sorted)
        ik = krnn.pack_padded_sequence(xk, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
        ot, ht = tm(it, hxt)
        ok, hk = km(ik, hxk)
        assert isinstance(ok, krnn.PackedSequence)
        np.testing.assert_array_equal(npy(ok.batch_sizes), ot.batch_sizes.numpy())
        ot, _ = torch.nn.utils.rnn.pad_packed_sequence(ot, batch_first=batch_first)
        ok, _ = krnn.pad_packed_sequence(ok, batch_first=batch_first)
    else:
        ot, ht = tm(xt, hxt)
        ok, hk = km(xk, hxk)
    assert tuple(ok.shape) == tuple(ot.shape)
    np.testing.assert_allclose(npy(ok), npy(ot), **tol(dtype))
    assert len(states(hk)) == len(states(ht))
    for a, b in zip(states(hk), states(ht)):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(npy(a), npy(b), **tol(dtype))
    loss_of(torch, ot, ht).backward()
    loss_of(kael, ok, hk).backward()
    np.testing.assert_allclose(npy(xk.grad), npy(xt.grad), **tol(dtype))
    if hx is not None:
        for a, b in zip(states(hxk), states(hxt)):
            np.testing.assert_allclose(npy(a.grad), npy(b.grad), **tol(dtype))
    tparams = dict(tm.named_parameters())
    kparams = dict(km.named_parameters())
    assert list(kparams) == list(tparams)
    for name in tparams:
        np.testing.assert_allclose(npy(kparams[name].grad), npy(tparams[name].grad), **tol(dtype), err_msg=name)


CONFIGS = [
    dict(),
    dict(num_layers=2),
    dict(bidirectional=True),
    dict(num_layers=2, bidirectional=True, batch_first=True),
    dict(bias=False),
    dict(num_layers=3, bias=False, bidirectional=True),
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
@pytest.mark.parametrize("name,extra", [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}),
                                        ("LSTM", {"proj_size": 3}), ("GRU", {})])
def test_module_matches_torch(name, extra, config, dtype):
    tm, km = twin(name, dtype, 5, 6, **extra, **config)
    T, B = 4, 3
    shape = (B, T, 5) if config.get("batch_first") else (T, B, 5)
    x = torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(1))
    compare_module(tm, km, x, dtype=dtype)


@pytest.mark.parametrize("name,extra", [("RNN", {}), ("LSTM", {}), ("LSTM", {"proj_size": 2}), ("GRU", {})])
@pytest.mark.parametrize("batch_first", [False, True])
def test_initial_states(name, extra, batch_first):
    tm, km = twin(name, torch.float64, 4, 5, num_layers=2, bidirectional=True, batch_first=batch_first, **extra)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 6, 4, dtype=torch.float64, generator=g)
    out = extra.get("proj_size", 5)
    h0 = torch.randn(4, 3 if batch_first else 6, out, dtype=torch.float64, generator=g)
    hx = (h0, torch.randn(4, h0.shape[1], 5, dtype=torch.float64, generator=g)) if name == "LSTM" else h0
    compare_module(tm, km, x, hx)


@pytest.mark.parametrize("name,extra", [("RNN", {}), ("LSTM", {}), ("LSTM", {"proj_size": 2}), ("GRU", {})])
@pytest.mark.parametrize("with_hx", [False, True])
def test_unbatched_input(name, extra, with_hx):
    tm, km = twin(name, torch.float64, 4, 5, num_layers=2, bidirectional=True, **extra)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(7, 4, dtype=torch.float64, generator=g)
    hx = None
    if with_hx:
        h0 = torch.randn(4, extra.get("proj_size", 5), dtype=torch.float64, generator=g)
        hx = (h0, torch.randn(4, 5, dtype=torch.float64, generator=g)) if name == "LSTM" else h0
    compare_module(tm, km, x, hx)


@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("name,extra", [("RNN", {}), ("LSTM", {}), ("LSTM", {"proj_size": 3}), ("GRU", {})])
def test_packed_sequence(name, extra, enforce_sorted):
    tm, km = twin(name, torch.float64, 4, 5, num_layers=2, bidirectional=True, **extra)
    g = torch.Generator().manual_seed(4)
    lengths = [6, 4, 4, 1] if enforce_sorted else [2, 6, 1, 4]
    x = torch.randn(6, 4, 4, dtype=torch.float64, generator=g)
    out = extra.get("proj_size", 5)
    h0 = torch.randn(4, 4, out, dtype=torch.float64, generator=g)
    hx = (h0, torch.randn(4, 4, 5, dtype=torch.float64, generator=g)) if name == "LSTM" else h0
    compare_module(tm, km, x, None, packed=(lengths, enforce_sorted, False))
    tm.zero_grad()
    km.zero_grad()
    compare_module(tm, km, x, hx, packed=(lengths, enforce_sorted, False))


def test_packed_batch_first_float32():
    tm, km = twin("LSTM", torch.float32, 3, 4, batch_first=True)
    x = torch.randn(3, 5, 3, generator=torch.Generator().manual_seed(5))
    compare_module(tm, km, x, dtype=torch.float32, packed=([5, 2, 3], False, True))


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_long_sequence_float32(name):
    tm, km = twin(name, torch.float32, 16, 32, num_layers=2)
    x = torch.randn(50, 8, 16, generator=torch.Generator().manual_seed(6))
    compare_module(tm, km, x, dtype=torch.float32)


def test_dropout_between_layers():
    tm, km = twin("LSTM", torch.float64, 4, 5, num_layers=3, dropout=0.5)
    x = torch.randn(6, 2, 4, dtype=torch.float64)
    # eval: dropout off, outputs as torch's
    tm.eval()
    km.eval()
    compare_module(tm, km, x)
    # training: the last layer's input is dropped, so outputs differ from eval, and runs differ
    km.train()
    xk = tk(x)
    o_eval = npy(km.eval()(xk)[0])
    km.train()
    o1 = npy(km(xk)[0])
    assert not np.allclose(o1, o_eval)
    # one layer: no dropout at all even in training (torch warns at construction)
    with pytest.warns(UserWarning, match="dropout"):
        one = kael.nn.GRU(4, 5, dropout=0.5)
    with pytest.warns(UserWarning, match="dropout"):
        torch.nn.GRU(4, 5, dropout=0.5)
    o_train = npy(one(xk.float())[0])
    o_ev = npy(one.eval()(xk.float())[0])
    np.testing.assert_array_equal(o_train, o_ev)


@pytest.mark.parametrize("name,extra", [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}),
                                        ("LSTM", {"proj_size": 2}), ("GRU", {})])
@pytest.mark.parametrize("config", [dict(), dict(num_layers=2, bidirectional=True, bias=False)])
def test_parameters_names_shapes_and_init(name, extra, config):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(4, 6, **extra, **config)
    km = getattr(kael.nn, name)(4, 6, **extra, **config)
    tshapes = [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    kshapes = [(n, tuple(p.shape)) for n, p in km.named_parameters()]
    assert kshapes == tshapes
    assert km._flat_weights_names == tm._flat_weights_names
    assert [[tuple(w.shape) for w in ws] for ws in km.all_weights] == \
        [[tuple(w.shape) for w in ws] for ws in tm.all_weights]
    bound = 1 / math.sqrt(6)
    for n, p in km.named_parameters():
        v = npy(p)
        assert v.min() >= -bound and v.max() <= bound, n
        assert v.std() > bound / 4, n
    assert repr(km) == repr(tm)
    assert km.extra_repr() == tm.extra_repr()
    km.flatten_parameters()
    # torch's state dict loads into kael and back
    km.load_state_dict({k: tk(v) for k, v in tm.state_dict().items()})
    tm.load_state_dict({k: torch.tensor(npy(v)) for k, v in km.state_dict().items()})


def test_extra_repr_options():
    for args in [dict(proj_size=2, num_layers=2, bias=False, batch_first=True, dropout=0.25, bidirectional=True)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert repr(kael.nn.LSTM(3, 4, **args)) == repr(torch.nn.LSTM(3, 4, **args))
    assert repr(kael.nn.RNN(3, 4, nonlinearity="relu")) == repr(torch.nn.RNN(3, 4, nonlinearity="relu"))
    assert repr(kael.nn.RNN(3, 4, 2, "relu")) == repr(torch.nn.RNN(3, 4, 2, "relu"))
    for cell, kw in [("RNNCell", {"nonlinearity": "relu", "bias": False}), ("LSTMCell", {"bias": False}),
                     ("GRUCell", {})]:
        assert repr(getattr(kael.nn, cell)(3, 4, **kw)) == repr(getattr(torch.nn, cell)(3, 4, **kw))


def test_one_node_per_layer_direction():
    km = kael.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    out, (h, c) = km(kael.randn(30, 2, 3))
    seen, stack, names, keep = set(), [out.grad_fn], [], []
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        keep.append(fn)  # ids stay unique while the wrappers live
        seen.add(id(fn))
        names.append(type(fn).__name__ if not hasattr(fn, "name") else fn.name())
        stack.extend(f for f, _ in fn.next_functions)
    assert sum("RnnLayer" in n for n in names) == 4
    assert len(names) < 30


def test_grad_and_no_double_backward():
    km = kael.nn.GRU(2, 3)
    x = kael.randn(4, 1, 2, requires_grad=True)
    out, h = km(x)
    (g,) = kael.autograd.grad(out.sum(), [km.weight_hh_l0], retain_graph=True)
    assert tuple(g.shape) == (9, 3)
    # the backward op has no derivative: create_graph raises instead of giving a wrong second order
    with pytest.raises(RuntimeError, match="_rnn_layer_backward: the derivative is not implemented"):
        kael.autograd.grad(out.sum(), [x], create_graph=True)


# ---------------------------------------------------------------- cells

@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name,extra", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("LSTMCell", {}),
                                        ("GRUCell", {}), ("LSTMCell", {"bias": False}), ("GRUCell", {"bias": False})])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_hx", [True, False])
def test_cells_match_torch(name, extra, batched, with_hx, dtype):
    tm, km = twin(name, dtype, 4, 5, **extra)
    g = torch.Generator().manual_seed(7)
    shape = (3,) if batched else ()
    x = torch.randn(*shape, 4, dtype=dtype, generator=g)
    hx = None
    if with_hx:
        hx = torch.randn(*shape, 5, dtype=dtype, generator=g)
        if name == "LSTMCell":
            hx = (hx, torch.randn(*shape, 5, dtype=dtype, generator=g))
    xt = x.clone().requires_grad_(True)
    xk = tk(x, True)
    hxt = hxk = None
    if hx is not None:
        hxt = tuple(h.clone().requires_grad_(True) for h in hx) if isinstance(hx, tuple) else \
            hx.clone().requires_grad_(True)
        hxk = tuple(tk(h, True) for h in hx) if isinstance(hx, tuple) else tk(hx, True)
    rt = tm(xt, hxt)
    rk = km(xk, hxk)
    for a, b in zip(states(rk), states(rt)):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(npy(a), npy(b), **tol(dtype))
    loss_of(torch, states(rt)[0], tuple(states(rt)[1:])).backward()
    loss_of(kael, states(rk)[0], tuple(states(rk)[1:])).backward()
    np.testing.assert_allclose(npy(xk.grad), npy(xt.grad), **tol(dtype))
    if hx is not None:
        for a, b in zip(states(hxk), states(hxt)):
            np.testing.assert_allclose(npy(a.grad), npy(b.grad), **tol(dtype))
    for (n, p), (n2, q) in zip(tm.named_parameters(), km.named_parameters()):
        assert n == n2
        np.testing.assert_allclose(npy(q.grad), npy(p.grad), **tol(dtype), err_msg=n)


# ---------------------------------------------------------------- errors

def same_error(fn_torch, fn_kael, prefix):
    with pytest.raises(Exception) as et:
        fn_torch()
    with pytest.raises(Exception) as ek:
        fn_kael()
    assert type(ek.value) is type(et.value), (ek.value, et.value)
    msg = str(ek.value)
    assert msg.startswith(prefix), msg
    assert str(et.value).replace("torch.", "kael.") in msg, (msg, str(et.value))


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_constructor_errors(name):
    T, K = getattr(torch.nn, name), getattr(kael.nn, name)
    for args, kwargs in [((3, 4), {"batch_first": "yes"}), ((3, 4), {"bias": 1}), ((3.0, 4), {}),
                         ((3, 4.0), {}), ((0, 4), {}), ((3, 0), {}), ((3, 4, 0), {}), ((3, 4), {"dropout": 1.5}),
                         ((3, 4), {"dropout": True})]:
        same_error(lambda: T(*args, **kwargs), lambda: K(*args, **kwargs), name)
    if name == "LSTM":
        same_error(lambda: T(3, 4, proj_size=4), lambda: K(3, 4, proj_size=4), name)
        same_error(lambda: T(3, 4, proj_size=-1), lambda: K(3, 4, proj_size=-1), name)
    else:
        same_error(lambda: T(3, 4, proj_size=2), lambda: K(3, 4, proj_size=2), name)
    if name == "RNN":
        same_error(lambda: T(3, 4, nonlinearity="sigmoid"), lambda: K(3, 4, nonlinearity="sigmoid"), name)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_forward_errors(name):
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(3, 4, num_layers=2)
    km = getattr(kael.nn, name)(3, 4, num_layers=2)
    lstm = name == "LSTM"

    def hid(lib, *shape, c_shape=None):
        h = lib.zeros(*shape)
        return (h, lib.zeros(*(c_shape or shape))) if lstm else h

    cases = [
        (lambda lib: (lib.zeros(5, 2, 7),), {}),                       # wrong input size
        (lambda lib: (lib.zeros(5, 2, 3, 1),), {}),                    # 4-d input
        (lambda lib: (lib.zeros(3),), {}),                             # 1-d input
        (lambda lib: (lib.zeros(5, 2, 3), hid(lib, 1, 2, 4)), {}),     # wrong number of layers in h0
        (lambda lib: (lib.zeros(5, 2, 3), hid(lib, 2, 3, 4)), {}),     # wrong batch in h0
        (lambda lib: (lib.zeros(5, 2, 3), hid(lib, 2, 2, 5)), {}),     # wrong hidden in h0
        (lambda lib: (lib.zeros(5, 2, 3), hid(lib, 2, 4)), {}),        # 2-d h0 with batched input
        (lambda lib: (lib.zeros(5, 3), hid(lib, 2, 1, 4)), {}),        # 3-d h0 with unbatched input
        (lambda lib: (lib.zeros(5, 2, 3, dtype=lib.float64),), {}),   # dtype mismatch
    ]
    if lstm:
        cases.append((lambda lib: (lib.zeros(5, 2, 3), hid(lib, 2, 2, 4, c_shape=(2, 2, 5))), {}))
    for make, _ in cases:
        same_error(lambda: tm(*make(torch)), lambda: km(*make(kael)), name)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_errors(name):
    tm = getattr(torch.nn, name)(3, 4)
    km = getattr(kael.nn, name)(3, 4)
    lstm = name == "LSTMCell"

    def hid(lib, *shape):
        return (lib.zeros(*shape), lib.zeros(*shape)) if lstm else lib.zeros(*shape)

    for make in [lambda lib: (lib.zeros(2, 3, 3),), lambda lib: (lib.zeros(2, 3), hid(lib, 3, 4)),
                 lambda lib: (lib.zeros(2, 3), hid(lib, 2, 5)), lambda lib: (lib.zeros(2, 5),)]:
        with pytest.raises(Exception) as et:
            tm(*make(torch))
        with pytest.raises(Exception) as ek:
            km(*make(kael))
        assert type(ek.value) is type(et.value), (ek.value, et.value)
        assert str(ek.value).startswith(name), str(ek.value)


def test_layer_op_errors():
    x = kael.zeros(6, 3)
    w_ih, w_hh = kael.zeros(4, 3), kael.zeros(4, 4)
    with pytest.raises(ValueError, match="^_rnn_layer: unknown mode 'LSTMX'"):
        kael._C._rnn_layer([x, kael.zeros(2, 4), w_ih, w_hh], [2, 2, 2], "LSTMX", False, False)
    with pytest.raises(ValueError, match="^_rnn_layer: batch_sizes sum to 5"):
        kael._C._rnn_layer([x, kael.zeros(2, 4), w_ih, w_hh], [2, 2, 1], "RNN_TANH", False, False)
    with pytest.raises(ValueError, match="^_rnn_layer: batch_sizes must be positive and non-increasing"):
        kael._C._rnn_layer([x, kael.zeros(2, 4), w_ih, w_hh], [1, 2, 3], "RNN_TANH", False, False)
    with pytest.raises(ValueError, match=r"^_rnn_layer: expected hx of shape \[2, 4\], got \[3, 4\]"):
        kael._C._rnn_layer([x, kael.zeros(3, 4), w_ih, w_hh], [2, 2, 2], "RNN_TANH", False, False)
    with pytest.raises(RuntimeError, match="^_rnn_layer: expected every tensor to have the input's dtype"):
        kael._C._rnn_layer([x, kael.zeros(2, 4, dtype=kael.float64), w_ih, w_hh], [2, 2, 2], "RNN_TANH", False,
                           False)
    with pytest.raises(RuntimeError, match="^_rnn_layer: expected a float32 or float64 input"):
        kael._C._rnn_layer([x.int(), kael.zeros(2, 4).int(), w_ih.int(), w_hh.int()], [2, 2, 2], "RNN_TANH", False,
                           False)
