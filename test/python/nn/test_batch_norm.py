"""native_batch_norm (the one kernel behind F.batch_norm and nn.BatchNorm*d) against torch: values,
gradients (first and second order), running statistics, layouts (contiguous, channels-last,
strided), dtypes, empty batches, and the errors of bad arguments, raised before any write."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kael
import kael.nn.functional as KF

RNG = np.random.default_rng(5)

TOL = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-10, atol=1e-12)}


def layout(t, kind, lib):
    if kind == "channels_last":
        return t.contiguous(memory_format=lib.channels_last) if t.dim() == 4 else t
    if kind == "transposed":  # a strided input neither layout covers: (N, C, W, H) viewed as (N, C, H, W)
        return t.transpose(-1, -2)
    return t


def data(shape, kind, dtype, lib, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 2 + 0.5
    if kind == "transposed":
        a = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    return layout(lib.tensor(a.astype(dtype)), kind, lib)


# (channels-last rows are summed in lanes of 64 elements, m = 64 / C rows at a time, over fixed
# blocks of rows: C dividing 64 or not, several blocks, a last group of fewer than m rows)
SHAPES = [(8, 3), (6, 4, 5), (4, 3, 5, 6), (2, 3, 2, 3, 4), (5, 8, 1, 1), (3, 16, 4, 4), (3, 8, 15, 15),
          (2, 96, 3, 5), (20, 64, 9, 9)]


# (a 2-d input has no spatial dims to transpose)
CASES = [(s, k) for s in SHAPES for k in ("contiguous", "channels_last", "transposed") if len(s) > 2 or k != "transposed"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,kind", CASES, ids=str)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_values_gradients_and_running_stats(shape, kind, dtype, training, affine):
    # float32 is held to the float64 result of the same (float32) inputs: torch's own float32
    # kernel sums in float32 and is farther from it than kael (the weight's gradient of a
    # (20, 64, 9, 9) batch: 4.5e-6 relative against kael's 1e-6); its dtypes and layouts are
    # still compared with torch's float32 run.
    c = shape[1]
    rng = np.random.default_rng(3)
    w0, g0 = rng.standard_normal(c).astype(dtype), rng.standard_normal(shape).astype(dtype)
    out = {}
    for lib, run_dtype in ((torch, dtype), (torch, "float64"), (kael, dtype)):
        x = data(shape, kind, dtype, lib, 1).to(getattr(lib, run_dtype)).requires_grad_()
        w = lib.tensor(w0.astype(run_dtype), requires_grad=True) if affine else None
        b = lib.tensor(np.linspace(-1, 1, c).astype(dtype).astype(run_dtype), requires_grad=True) if affine else None
        rm = lib.tensor(np.linspace(-0.5, 0.5, c).astype(dtype).astype(run_dtype))
        rv = lib.tensor(np.linspace(0.5, 2.0, c).astype(dtype).astype(run_dtype))
        y = (TF if lib is torch else KF).batch_norm(x, rm, rv, w, b, training=training, momentum=0.3, eps=1e-3)
        y.backward(lib.tensor(g0.astype(run_dtype)))
        out[(lib.__name__, run_dtype)] = dict(y=y, x=x.grad, w=w.grad if affine else None,
                                              b=b.grad if affine else None, rm=rm, rv=rv, y_strides=y.stride())
    t, k, ref = out[("torch", dtype)], out[("kael", dtype)], out[("torch", "float64")]
    for name in ("y", "x", "w", "b", "rm", "rv"):
        if t[name] is None:
            continue
        assert str(k[name].dtype).split(".")[1] == str(t[name].dtype).split(".")[1]
        np.testing.assert_allclose(k[name].detach().numpy(), ref[name].detach().numpy(), **TOL[dtype], err_msg=name)
    assert k["y_strides"] == t["y_strides"]  # channels-last in, channels-last out


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("param_dtype", ["same", "float32"])
def test_reduced_precision(dtype, param_dtype):
    shape = (4, 3, 5, 5)
    res = {}
    for lib in (torch, kael):
        d = getattr(lib, dtype)
        pd = d if param_dtype == "same" else lib.float32
        x = lib.tensor(np.random.default_rng(3).standard_normal(shape).astype(np.float32)).to(d).requires_grad_()
        w = lib.tensor(np.linspace(0.5, 1.5, 3).astype(np.float32)).to(pd).requires_grad_()
        b = lib.tensor(np.linspace(-1, 1, 3).astype(np.float32)).to(pd).requires_grad_()
        rm, rv = lib.zeros(3, dtype=pd), lib.ones(3, dtype=pd)
        y = (TF if lib is torch else KF).batch_norm(x, rm, rv, w, b, training=True)
        g = lib.tensor(np.random.default_rng(6).standard_normal(shape).astype(np.float32))
        (y.float() * g).sum().backward()  # (not all ones: the weight's gradient would be a sum of ~0)
        res[lib.__name__] = [y, x.grad, w.grad, b.grad, rm, rv]
    for kt, tt in zip(res["kael"], res["torch"]):
        assert str(kt.dtype).split(".")[1] == str(tt.dtype).split(".")[1]
        np.testing.assert_allclose(kt.float().detach().numpy(), tt.float().detach().numpy(), rtol=2e-2, atol=2e-2)


def test_native_batch_norm_results():
    x = np.random.default_rng(4).standard_normal((4, 3, 5, 5)).astype(np.float32)
    res = {}
    for lib in (torch, kael):
        rm, rv = lib.zeros(3), lib.ones(3)
        v0 = rm._version
        out = lib.native_batch_norm(lib.tensor(x), lib.ones(3), lib.zeros(3), rm, rv, True, 0.1, 1e-5)
        res[lib.__name__] = out
        if lib is kael:  # an in-place write bumps the version (torch's CPU kernel leaves it)
            assert rm._version > v0 and rv._version > v0
    for kt, tt in zip(res["kael"], res["torch"]):
        assert tuple(kt.shape) == tuple(tt.shape)
        np.testing.assert_allclose(kt.numpy(), tt.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("kind", ["contiguous", "channels_last"])
def test_double_backward(training, kind):
    shape = (3, 2, 3, 4)
    grads = {}
    for lib in (torch, kael):
        x = data(shape, kind, "float64", lib, 7).requires_grad_()
        w = lib.tensor(np.array([0.7, -1.3]), requires_grad=True)
        b = lib.tensor(np.array([0.1, 0.2]), requires_grad=True)
        rm, rv = lib.tensor(np.array([0.2, -0.1])), lib.tensor(np.array([1.5, 0.7]))
        y = (TF if lib is torch else KF).batch_norm(x, rm, rv, w, b, training=training)
        g = lib.tensor(np.random.default_rng(8).standard_normal(shape))
        gx, gw = lib.autograd.grad((y * g).sum(), (x, w), create_graph=True)
        (gx.pow(2).sum() + (gw * gw).sum()).backward()
        grads[lib.__name__] = [x.grad, w.grad] + ([] if b.grad is None else [b.grad])
    assert len(grads["kael"]) == len(grads["torch"])
    for kt, tt in zip(grads["kael"], grads["torch"]):
        np.testing.assert_allclose(kt.numpy(), tt.numpy(), rtol=1e-8, atol=1e-10)


def test_module_channels_last_training_steps():
    # BatchNorm2d in a channels-last conv net for a few optimizer steps: same losses as torch.
    losses = {}
    for lib in (torch, kael):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Conv2d(3, 8, 3, padding=1, bias=False), lib.nn.BatchNorm2d(8), lib.nn.ReLU())
        if lib is kael:
            net.load_state_dict({k: kael.tensor(v.numpy()) for k, v in losses["state"].items()})
        else:
            losses["state"] = {k: v.detach().clone() for k, v in net.state_dict().items()}
        net = net.to(memory_format=lib.channels_last)
        opt = lib.optim.SGD(net.parameters(), lr=0.1)
        x = lib.tensor(np.random.default_rng(9).standard_normal((4, 3, 6, 6)).astype(np.float32))
        x = x.contiguous(memory_format=lib.channels_last)
        out = []
        for _ in range(4):
            loss = net(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        losses[lib.__name__] = out + list(net[1].running_var.detach().numpy())
    np.testing.assert_allclose(losses["kael"], losses["torch"], rtol=1e-5)


def test_empty_batch_leaves_running_stats():
    for lib in (torch, kael):
        rm, rv = lib.zeros(3), lib.ones(3)
        y = (TF if lib is torch else KF).batch_norm(lib.zeros(0, 3, 2), rm, rv, lib.ones(3), lib.zeros(3),
                                                    training=True)
        assert tuple(y.shape) == (0, 3, 2)
        assert rm.tolist() == [0.0, 0.0, 0.0] and rv.tolist() == [1.0, 1.0, 1.0]


def bad_calls(lib):
    x = lib.ones(4, 3, 2)
    F = TF if lib is torch else KF
    w3 = lib.ones(3)
    return {
        "weight size": lambda: F.batch_norm(x, lib.zeros(3), lib.ones(3), lib.ones(2), w3, training=True),
        "running size": lambda: F.batch_norm(x, lib.zeros(4), lib.ones(3), w3, w3, training=True),
        "mixed dtype": lambda: F.batch_norm(x.double(), lib.zeros(3), lib.ones(3), w3, w3, training=True),
        "param dtype": lambda: F.batch_norm(x, lib.zeros(3).double(), lib.ones(3), w3, w3, training=True),
        "integer input": lambda: F.batch_norm(x.long(), None, None, training=True),
        "one value": lambda: F.batch_norm(lib.ones(1, 3), None, None, training=True),
        "eval without stats": lambda: F.batch_norm(x, None, None, training=False),
    }


@pytest.mark.parametrize("case", list(bad_calls(torch)))
def test_errors_as_torch(case):
    with pytest.raises(Exception) as te:
        bad_calls(torch)[case]()
    with pytest.raises(Exception) as ke:
        bad_calls(kael)[case]()
    assert isinstance(ke.value, type(te.value)) or issubclass(type(te.value), type(ke.value)), (ke.value, te.value)


def test_checks_run_before_writes():
    x = kael.randn(4, 3, 2)
    rm, rv = kael.zeros(3), kael.ones(3)
    with pytest.raises(RuntimeError, match="native_batch_norm: bias should contain 3 elements not 2"):
        kael.native_batch_norm(x, kael.ones(3), kael.ones(2), rm, rv, True, 0.1, 1e-5)
    assert rm.tolist() == [0.0, 0.0, 0.0] and rv.tolist() == [1.0, 1.0, 1.0]
    # one tensor for both running statistics: the second write would overwrite the first
    both = kael.zeros(3)
    with pytest.raises(RuntimeError, match="native_batch_norm: unsupported operation"):
        kael.native_batch_norm(x, None, None, both, both, True, 0.1, 1e-5)
    assert both.tolist() == [0.0, 0.0, 0.0]
    expanded = kael.zeros(1).expand(3)
    with pytest.raises(RuntimeError, match="native_batch_norm: unsupported operation"):
        kael.native_batch_norm(x, None, None, expanded, rv, True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="native_batch_norm: running_mean must be defined in evaluation mode"):
        kael.native_batch_norm(x, None, None, None, None, False, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="native_batch_norm: expected an input of 2 dims or more"):
        kael.native_batch_norm(kael.ones(3), None, None, None, None, True, 0.1, 1e-5)
