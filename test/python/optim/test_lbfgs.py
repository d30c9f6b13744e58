"""kael.optim.LBFGS against torch.optim.LBFGS: the same objective from the same start, steps
with and without the strong-Wolfe line search, short and long histories; the losses returned,
the parameters after, the counts of evaluations and iterations, and the argument checks."""
import numpy as np
import pytest
import torch

import kael


def _problem(lib, dtype, seed=0):
    """A least-squares term in w and a Rosenbrock-like term in v (curvature that changes along
    the path, so the line search brackets and zooms), parameters as lib tensors."""
    g = np.random.default_rng(seed)
    A, b = g.standard_normal((20, 10)), g.standard_normal(20)
    w0, v0 = g.standard_normal(10) * 0.1, g.standard_normal(3)
    dt = getattr(lib, dtype)
    A_, b_ = lib.tensor(A, dtype=dt), lib.tensor(b, dtype=dt)
    w = lib.tensor(w0, dtype=dt).requires_grad_()
    v = lib.tensor(v0, dtype=dt).requires_grad_()

    def objective():
        return ((A_ @ w - b_) ** 2).sum() + (1 - v[0]) ** 2 + 10 * (v[1] - v[0] ** 2) ** 2 + (v[2] ** 4).sum()
    return [w, v], objective


def _run(lib, dtype="float64", steps=4, **options):
    params, objective = _problem(lib, dtype)
    opt = lib.optim.LBFGS(params, **options)

    def closure():
        opt.zero_grad()
        loss = objective()
        loss.backward()
        return loss
    losses = [float(opt.step(closure).detach()) for _ in range(steps)]
    state = opt.state[params[0]]
    return {"losses": np.array(losses), "params": [np.array(p.detach().tolist()) for p in params],
            "func_evals": state["func_evals"], "n_iter": state["n_iter"]}


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("history_size", [100, 3])
def test_lbfgs_matches_torch_float64(line_search_fn, history_size):
    options = dict(lr=0.8 if line_search_fn is None else 1.0, history_size=history_size,
                   line_search_fn=line_search_fn)
    got, want = _run(kael, **options), _run(torch, **options)
    # the same iterations and evaluations, so the same path; values to rounding
    assert (got["func_evals"], got["n_iter"]) == (want["func_evals"], want["n_iter"])
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-12, atol=0)
    for a, b in zip(got["params"], want["params"]):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_matches_torch_float32_over_a_few_iterations(line_search_fn):
    # float32 rounding moves the stopping tests over long runs; a few iterations keep one path
    options = dict(lr=0.8 if line_search_fn is None else 1.0, max_iter=4, line_search_fn=line_search_fn)
    got, want = _run(kael, "float32", steps=2, **options), _run(torch, "float32", steps=2, **options)
    assert (got["func_evals"], got["n_iter"]) == (want["func_evals"], want["n_iter"])
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-5)
    for a, b in zip(got["params"], want["params"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_lbfgs_max_eval_and_tolerances_stop_as_torchs():
    for options in (dict(max_iter=50, max_eval=7), dict(max_iter=50, tolerance_change=1e-2),
                    dict(max_iter=50, tolerance_grad=10.0), dict(max_iter=50, line_search_fn="strong_wolfe", max_eval=9)):
        got, want = _run(kael, steps=2, **options), _run(torch, steps=2, **options)
        assert (got["func_evals"], got["n_iter"]) == (want["func_evals"], want["n_iter"]), options
        np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-12)


def test_lbfgs_returns_the_first_loss_and_stops_at_a_minimum():
    w = kael.tensor([1.0, -2.0], requires_grad=True)
    opt = kael.optim.LBFGS([w], tolerance_grad=1e-5)
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss
    first = opt.step(closure)
    assert float(first) == 5.0 and len(calls) > 1
    np.testing.assert_allclose(w.detach().tolist(), [0.0, 0.0], atol=1e-6)
    # at the minimum: one evaluation, nothing moves
    before = w.detach().tolist()
    calls.clear()
    opt.step(closure)
    assert len(calls) == 1 and w.detach().tolist() == before


def test_lbfgs_parameters_without_gradient_count_as_zero():
    a = kael.tensor([3.0], requires_grad=True)
    unused = kael.tensor([7.0], requires_grad=True)
    opt = kael.optim.LBFGS([a, unused])

    def closure():
        opt.zero_grad()
        loss = (a - 1) ** 2
        loss.sum().backward()
        return loss.sum()
    opt.step(closure)
    assert unused.detach().tolist() == [7.0]
    np.testing.assert_allclose(a.detach().tolist(), [1.0], atol=1e-5)


def test_lbfgs_argument_checks_match_torch():
    p = kael.tensor([1.0], requires_grad=True)
    tp = torch.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        kael.optim.LBFGS([p], lr=-1)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        torch.optim.LBFGS([tp], lr=-1)
    q = kael.tensor([2.0], requires_grad=True)
    with pytest.raises(ValueError, match="per-parameter options"):
        kael.optim.LBFGS([{"params": [p]}, {"params": [q]}])
    with pytest.raises(ValueError, match="per-parameter options"):
        torch.optim.LBFGS([{"params": [tp]}, {"params": [torch.tensor([2.0], requires_grad=True)]}])
    opt = kael.optim.LBFGS([p], line_search_fn="backtracking")

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)
    assert opt.defaults["max_eval"] == 25 and kael.optim.LBFGS([p], max_iter=8).defaults["max_eval"] == 10


def test_lbfgs_group_options_and_repr_are_torchs():
    k = kael.optim.LBFGS([kael.tensor([1.0], requires_grad=True)], lr=0.5, history_size=7)
    t = torch.optim.LBFGS([torch.tensor([1.0], requires_grad=True)], lr=0.5, history_size=7)
    assert {key: v for key, v in k.param_groups[0].items() if key != "params"} == \
        {key: v for key, v in t.param_groups[0].items() if key != "params"}
    assert repr(k) == repr(t)


def _rosenbrock_run(lib, lr, seed, steps=3):
    g = np.random.default_rng(seed)
    x = lib.tensor(g.standard_normal(6) * 2, dtype=lib.float64).requires_grad_()
    opt = lib.optim.LBFGS([x], lr=lr, line_search_fn="strong_wolfe", max_iter=30)

    def closure():
        opt.zero_grad()
        loss = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum() + (x ** 2).sum().sqrt()
        loss.backward()
        return loss
    losses = [float(opt.step(closure).detach()) for _ in range(steps)]
    return np.array(losses), opt.state[x]["func_evals"], np.array(x.detach().tolist())


# (lr, seed) whose line searches step past a minimum along the direction (bracketing on a rising
# slope) and zoom with steps moved off the bracket's ends, as well as the plain cases
@pytest.mark.parametrize("lr,seed", [(1, 0), (1, 1), (3, 2), (30, 1)])
def test_lbfgs_strong_wolfe_on_a_rosenbrock_valley_matches_torch(lr, seed):
    got, want = _rosenbrock_run(kael, lr, seed), _rosenbrock_run(torch, lr, seed)
    assert got[1] == want[1]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-9)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6, atol=1e-8)


_LINES = {
    "quartic": lambda x: x ** 4 - 3 * x ** 2 + x,
    "exp": lambda x: x.exp() - 5 * x,
    "hyperbola": lambda x: (1 + x ** 2).sqrt(),
    "wavy": lambda x: x ** 2 + 10 * x.sin(),
    "power 1.5": lambda x: (x.abs() + 1e-3) ** 1.5,
    "log": lambda x: -(x + 5).log() + 0.1 * x ** 2,  # NaN past -5: the search must back off
}


@pytest.mark.parametrize("name", list(_LINES))
def test_strong_wolfe_line_search_matches_torchs(name):
    # the line search alone, on 1-d functions from several starts and first steps (steps far
    # past the minimum, so that bracketing, zooming and the moves off the bracket's ends all run),
    # against torch's own line search: the step, the loss there and the evaluations
    from torch.optim.lbfgs import _strong_wolfe as torch_strong_wolfe

    from kael.optim.lbfgs import _strong_wolfe
    fn = _LINES[name]

    def at(lib):
        def evaluate(xv):
            x = lib.tensor([xv], dtype=lib.float64, requires_grad=True)
            y = fn(x).sum()
            y.backward()
            return float(y.detach()), x.grad.detach().clone()
        return evaluate
    for x0 in (-3.0, -1.0, 0.5, 2.0):
        for t0 in (0.01, 1.0, 10.0, 100.0):
            f_t, f_k = at(torch), at(kael)
            f0, g0 = f_t(x0)
            gtd = float(g0.dot(-g0))
            if not gtd < 0:
                continue
            want = torch_strong_wolfe(lambda x, t, d: f_t(x0 + t * float(d[0])), torch.tensor([x0], dtype=torch.float64),
                                      t0, -g0, f0, g0, torch.tensor(gtd, dtype=torch.float64))
            k0, kg0 = f_k(x0)
            got = _strong_wolfe(lambda t, d: f_k(x0 + t * float(d[0])), t0, -kg0, k0, kg0, gtd)
            where = (name, x0, t0)
            assert got[3] == want[3], where
            np.testing.assert_allclose(got[2], float(want[2]), rtol=1e-12, err_msg=str(where))
            np.testing.assert_allclose(got[0], float(want[0]), rtol=1e-12, err_msg=str(where))
            np.testing.assert_allclose(got[1].tolist(), want[1].tolist(), rtol=1e-12, err_msg=str(where))
