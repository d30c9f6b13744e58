"""kael.amp.GradScaler against torch.amp.GradScaler, step by step: the same training loop in both
libraries (a CPU scaler, which torch enables), compared after every call, through growth,
an overflow that skips a step and backs the scale off, unscale_ before clipping, several
optimizers, state_dict round trips and pickling; and the disabled "cuda" scaler without CUDA."""
import pickle
import warnings

import numpy as np
import pytest
import torch

import kael


def _params(lib, seed=0):
    rng = np.random.default_rng(seed)
    w = lib.nn.Parameter(lib.tensor(rng.standard_normal((3, 4)).astype(np.float32)))
    b = lib.nn.Parameter(lib.tensor(rng.standard_normal(3).astype(np.float32)))
    return w, b


def _data(i):
    rng = np.random.default_rng(100 + i)
    return rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


def _loss(lib, w, b, i):
    x, y = (lib.tensor(a) for a in _data(i))
    out = (x.unsqueeze(1) * w.unsqueeze(0)).sum(dim=2) + b
    return ((out - y) ** 2).mean()


def _np(t):
    return None if t is None else t.detach().numpy().copy()


def _run(lib, steps, init_scale=2.0**16, growth_interval=2, growth_factor=2.0, backoff_factor=0.5,
         poison=(), unscale_first=(), clip=None, grads=True):
    """Trains steps iterations; poison: iterations whose first gradient gets an inf after backward
    (an overflow); unscale_first: iterations that call unscale_ (and clip) before step."""
    w, b = _params(lib)
    opt = lib.optim.SGD([w, b], lr=0.1, momentum=0.9)
    scaler = lib.amp.GradScaler("cpu", init_scale=init_scale, growth_factor=growth_factor,
                                backoff_factor=backoff_factor, growth_interval=growth_interval)
    trace = [("state", scaler.state_dict())]
    for i in range(steps):
        opt.zero_grad()
        loss = _loss(lib, w, b, i)
        scaled = scaler.scale(loss)
        trace.append(("scaled", float(scaled.item())))
        scaled.backward()
        if grads:
            trace.append(("scaled grads", _np(w.grad), _np(b.grad)))
        else:  # only whether they overflowed (which element does depends on the order of the sums)
            trace.append(("finite", bool(w.grad.isfinite().all()) and bool(b.grad.isfinite().all())))
        if i in poison:
            with lib.no_grad():
                w.grad[0, 0] = float("inf")
        if i in unscale_first:
            scaler.unscale_(opt)
            trace.append(("unscaled grads", _np(w.grad), _np(b.grad)))
            if clip is not None:
                # an overflowed step has an infinite norm, which kael's clip_grad_norm_ raises on
                # by default (docs/decisions/nn-optim-data.md); the scaler skips that step anyway
                total = lib.nn.utils.clip_grad_norm_([w, b], clip, error_if_nonfinite=False)
                trace.append(("norm", float(total.item())))
        result = scaler.step(opt)
        trace.append(("step", result, _np(w), _np(b)) + ((_np(w.grad), _np(b.grad)) if grads else ()))
        scaler.update()
        trace.append(("state", scaler.state_dict(), scaler.get_scale(), scaler._get_growth_tracker()))
    return trace


def _compare(ktrace, ttrace):
    assert len(ktrace) == len(ttrace)
    for k, t in zip(ktrace, ttrace):
        assert k[0] == t[0]
        for kv, tv in zip(k[1:], t[1:]):
            if isinstance(tv, np.ndarray):
                # the sums behind a gradient may add in another order: an element's error is
                # relative to the largest of the array, not to its own (cancelled) size
                finite = np.abs(tv[np.isfinite(tv)])
                atol = 1e-6 * finite.max() if finite.size else 0.0
                np.testing.assert_allclose(kv, tv, rtol=1e-6, atol=atol, err_msg=str(k[0]))
            elif isinstance(tv, float):
                assert kv == pytest.approx(tv, rel=1e-6) or (np.isnan(kv) and np.isnan(tv)), k[0]
            else:
                assert kv == tv, k[0]


def test_growth_every_interval_of_good_steps():
    ktrace, ttrace = _run(kael, 6), _run(torch, 6)
    _compare(ktrace, ttrace)
    # the scale grew: 2**16 -> 2**17 after 2 good steps, 2**18 after 4, 2**19 after 6
    assert ttrace[-1][2] == 2.0**19


def test_overflow_skips_the_step_and_backs_off():
    ktrace, ttrace = _run(kael, 6, poison={1, 4}), _run(torch, 6, poison={1, 4})
    _compare(ktrace, ttrace)
    # the skipped step left the parameters as they were
    steps = [e for e in ttrace if e[0] == "step"]
    np.testing.assert_array_equal(steps[1][2], steps[0][2])


def test_natural_overflow_of_a_huge_scale_backs_off_until_finite():
    # 3e38 * grads overflows float32: steps are skipped and the scale halves until they fit
    ktrace, ttrace = _run(kael, 8, init_scale=3e38, grads=False), _run(torch, 8, init_scale=3e38, grads=False)
    _compare(ktrace, ttrace)
    assert [e[1] for e in ttrace if e[0] == "finite"][:2] == [False, True]  # one backoff was enough
    assert ttrace[-1][2] < 3e38


def test_growth_stops_short_of_float32_overflow():
    ktrace = _run(kael, 4, init_scale=2.0**126, growth_interval=1, growth_factor=4.0)
    ttrace = _run(torch, 4, init_scale=2.0**126, growth_interval=1, growth_factor=4.0)
    _compare(ktrace, ttrace)


def test_unscale_then_clip_before_step():
    kw = dict(unscale_first={0, 2, 3}, clip=0.5, poison={3})
    _compare(_run(kael, 5, **kw), _run(torch, 5, **kw))


def test_odd_factors_round_as_torch():
    kw = dict(init_scale=1.1, growth_interval=1, growth_factor=1.1, backoff_factor=0.3, poison={2})
    _compare(_run(kael, 5, **kw), _run(torch, 5, **kw))


def test_two_optimizers_one_overflowing():
    traces = []
    for lib in (torch, kael):
        w, b = _params(lib)
        opt_w, opt_b = lib.optim.SGD([w], lr=0.1), lib.optim.Adam([b], lr=0.01)
        scaler = lib.amp.GradScaler("cpu", init_scale=256.0, growth_interval=1)
        trace = []
        for i in range(3):
            opt_w.zero_grad()
            opt_b.zero_grad()
            scaler.scale(_loss(lib, w, b, i)).backward()
            if i == 1:
                with lib.no_grad():
                    b.grad[0] = float("nan")
            trace.append(("steps", scaler.step(opt_w), scaler.step(opt_b)))
            scaler.update()
            trace.append(("after", _np(w), _np(b), scaler.get_scale()))
        traces.append(trace)
    _compare(traces[1], traces[0])


@pytest.mark.parametrize("dtype", ["bfloat16", "float64"])
def test_gradients_of_other_dtypes_unscale_in_their_dtype(dtype):
    traces = []
    for lib in (torch, kael):
        w = lib.nn.Parameter(lib.tensor([[0.3, -1.7, 2.9]], dtype=getattr(lib, dtype)))
        opt = lib.optim.SGD([w], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=3.0)
        scaler.scale((w.float() * lib.tensor([1.1, 2.3, -0.7])).sum()).backward()
        trace = [("scaled", w.grad.double().numpy())]
        scaler.unscale_(opt)
        trace.append(("unscaled", w.grad.double().numpy(), str(w.grad.dtype).split(".")[1]))
        scaler.step(opt)
        scaler.update()
        trace.append(("stepped", w.detach().double().numpy(), scaler.get_scale()))
        traces.append(trace)
    _compare(traces[1], traces[0])


def test_scale_of_nested_outputs():
    for lib in (torch, kael):
        scaler = lib.amp.GradScaler("cpu", init_scale=4.0)
        a, b = lib.tensor([1.0, 2.0]), lib.tensor(3.0)
        out = scaler.scale([a, (b, [a])])
        assert isinstance(out, list) and isinstance(out[1], tuple) and isinstance(out[1][1], list)
        assert out[0].tolist() == [4.0, 8.0] and out[1][0].item() == 12.0
        mapped = scaler.scale(iter([a]))
        assert not isinstance(mapped, (list, tuple)) and next(mapped).tolist() == [4.0, 8.0]
        with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
            scaler.scale([1.0])
        half = scaler.scale(lib.tensor([1.5], dtype=lib.float16))
        assert half.dtype == lib.float16 and half.item() == 6.0


def _errors(lib):
    """The exception class and message of each misuse, in order."""
    out = []

    def attempt(fn):
        try:
            fn()
            out.append(None)
        except Exception as e:  # noqa: BLE001
            out.append((type(e).__name__, str(e).replace("torch.", "kael.")))

    w, b = _params(lib)
    opt = lib.optim.SGD([w, b], lr=0.1)
    scaler = lib.amp.GradScaler("cpu")
    attempt(lambda: scaler.unscale_(opt))  # before scale()
    attempt(lambda: scaler.step(opt))
    attempt(lambda: scaler.update())
    scaler.scale(_loss(lib, w, b, 0)).backward()
    attempt(lambda: scaler.step(opt, closure=lambda: None))
    attempt(lambda: scaler.unscale_(opt))
    attempt(lambda: scaler.unscale_(opt))  # twice
    attempt(lambda: scaler.step(opt))
    attempt(lambda: scaler.step(opt))  # twice
    attempt(lambda: scaler.unscale_(opt))  # after step
    attempt(lambda: pickle.dumps(scaler))  # mid-iteration
    attempt(lambda: scaler.update())
    attempt(lambda: scaler.update(new_scale=lib.tensor([1.0, 2.0])))
    attempt(lambda: scaler.update(new_scale=lib.tensor(8.0)))
    out.append(scaler.get_scale())
    attempt(lambda: scaler.update(new_scale=32.0))
    out.append(scaler.get_scale())
    attempt(lambda: lib.amp.GradScaler("cpu", growth_factor=1.0))
    attempt(lambda: lib.amp.GradScaler("cpu", backoff_factor=1.0))
    attempt(lambda: lib.amp.GradScaler("cpu").load_state_dict({}))
    # float16 gradients cannot be unscaled
    h = lib.nn.Parameter(lib.ones(2, dtype=lib.float16))
    opt16 = lib.optim.SGD([h], lr=0.1)
    s16 = lib.amp.GradScaler("cpu")
    s16.scale(h.float().sum()).backward()
    attempt(lambda: s16.unscale_(opt16))
    # an optimizer without gradients
    s0 = lib.amp.GradScaler("cpu")
    s0.scale(lib.ones(1))
    attempt(lambda: s0.step(lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=0.1)))
    return out


def test_misuse_raises_as_torch():
    assert _errors(kael) == _errors(torch)


def test_state_dict_round_trip_and_pickle():
    for lib in (torch, kael):
        w, b = _params(lib)
        opt = lib.optim.SGD([w, b], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=8.0, growth_interval=3)
        assert scaler.get_scale() == 8.0 and scaler._get_growth_tracker() == 0  # before the first scale()
        scaler.scale(_loss(lib, w, b, 0)).backward()
        scaler.step(opt)
        scaler.update()
        state = scaler.state_dict()
        assert state == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3,
                         "_growth_tracker": 1}
        fresh = lib.amp.GradScaler("cpu")
        fresh.load_state_dict(state)
        assert fresh.state_dict() == state
        live = lib.amp.GradScaler("cpu")
        live.scale(lib.ones(1))
        live.load_state_dict(state)
        assert live.state_dict() == state and live.get_scale() == 8.0
        clone = pickle.loads(pickle.dumps(scaler))
        assert clone.state_dict() == state
        assert clone.scale(lib.ones(1)).item() == 8.0
        for name, value in [("growth_factor", 3.0), ("backoff_factor", 0.25), ("growth_interval", 7)]:
            getattr(scaler, f"set_{name}")(value)
            assert getattr(scaler, f"get_{name}")() == value


def _disabled_scaler_behaviour(lib, make):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scaler = make(lib)
    w, b = _params(lib)
    opt = lib.optim.SGD([w, b], lr=0.1)
    loss = _loss(lib, w, b, 0)
    same = scaler.scale(loss) is loss
    outputs = [loss, loss]
    same_list = scaler.scale(outputs) is outputs
    loss.backward()
    before = _np(w)
    result = scaler.step(opt)
    stepped = not np.array_equal(before, _np(w))
    scaler.unscale_(opt)
    scaler.update()
    scaler.load_state_dict({"scale": 3.0})
    return ([(w.category.__name__, str(w.message).replace("torch.", "kael.")) for w in caught], scaler.is_enabled(),
            same, same_list, result, stepped, scaler.get_scale(), scaler.state_dict(), scaler._get_growth_tracker(),
            pickle.loads(pickle.dumps(scaler)).is_enabled())


@pytest.mark.parametrize("name,make", [
    ("amp default device", lambda lib: lib.amp.GradScaler()),
    ("amp cuda", lambda lib: lib.amp.GradScaler("cuda", init_scale=4.0)),
    ("cuda.amp", lambda lib: lib.cuda.amp.GradScaler()),
    ("amp cpu disabled", lambda lib: lib.amp.GradScaler("cpu", enabled=False)),
    ("amp cuda disabled", lambda lib: lib.amp.GradScaler("cuda", enabled=False, growth_factor=0.5)),
])
def test_disabled_scaler_is_a_plain_step(name, make):
    kres, tres = _disabled_scaler_behaviour(kael, make), _disabled_scaler_behaviour(torch, make)
    assert kres == tres
    assert kres[1] is False and kres[2] and kres[5]


def test_deprecated_cpu_and_cuda_spellings_warn():
    for module in ("cpu", "cuda"):
        found = []
        for lib in (torch, kael):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                scaler = getattr(lib, module).amp.GradScaler(init_scale=2.0)
            found.append(([(w.category, str(w.message).replace("torch.", "kael."), w.filename) for w in caught],
                          scaler.is_enabled(), scaler._device, isinstance(scaler, lib.amp.GradScaler)))
        # the FutureWarning points at the caller, as torch's
        assert found[0][0][0][2] == found[1][0][0][2] == __file__
        assert [(c, m) for c, m, _ in found[0][0]] == [(c, m) for c, m, _ in found[1][0]]
        assert found[0][1:] == found[1][1:]
