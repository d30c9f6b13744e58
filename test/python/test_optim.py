"""kael.optim against torch.optim: the same gradients fed to both, several steps, parameters and
state close; parameter groups, state_dict round trips, argument checks."""
import pytest
import torch

import kael
import kael.nn as nn
import kael.optim as optim
from helpers import check, to_kael

SHAPES = [(4, 3), (3,), (2, 2, 2)]


def make_params(dtype=torch.float32):
    torch_params = [torch.nn.Parameter(torch.randn(s, dtype=dtype)) for s in SHAPES]
    kael_params = [nn.Parameter(to_kael(p.detach())) for p in torch_params]
    return torch_params, kael_params


def run_steps(name, kwargs, steps=6, dtype=torch.float32, groups=None):
    """Feeds the same random gradients to torch's and kael's optimizer for a few steps and
    compares the parameters after each."""
    tp, kp = make_params(dtype)
    if groups is None:
        topt = getattr(torch.optim, name)(tp, **kwargs)
        kopt = getattr(optim, name)(kp, **kwargs)
    else:
        topt = getattr(torch.optim, name)([{"params": tp[:1], **groups}, {"params": tp[1:]}], **kwargs)
        kopt = getattr(optim, name)([{"params": kp[:1], **groups}, {"params": kp[1:]}], **kwargs)
    for step in range(steps):
        for t, k in zip(tp, kp):
            g = torch.randn(t.shape, dtype=dtype)
            if step == 2:
                g = g * 10  # a larger step somewhere in the sequence
            t.grad = g
            k.grad = to_kael(g)
        topt.step()
        kopt.step()
        for t, k in zip(tp, kp):
            check(k, t.detach())
    return topt, kopt, tp, kp


@pytest.mark.parametrize("kwargs", [
    {"lr": 0.1},
    {"lr": 0.1, "momentum": 0.9},
    {"lr": 0.1, "momentum": 0.9, "dampening": 0.3},
    {"lr": 0.05, "momentum": 0.8, "nesterov": True},
    {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01},
    {"lr": 0.1, "weight_decay": 0.1, "maximize": True},
])
def test_sgd_matches_torch(kwargs):
    run_steps("SGD", kwargs)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("kwargs", [
    {},
    {"lr": 0.01, "betas": (0.8, 0.9), "eps": 1e-6},
    {"lr": 0.01, "weight_decay": 0.1},
    {"lr": 0.01, "amsgrad": True},
    {"lr": 0.01, "maximize": True},
])
def test_adam_and_adamw_match_torch(name, kwargs):
    run_steps(name, kwargs)


def test_adam_float64():
    run_steps("Adam", {"lr": 0.01, "weight_decay": 0.01}, dtype=torch.float64)


@pytest.mark.parametrize("kwargs", [
    {},
    {"lr": 0.01, "alpha": 0.9},
    {"lr": 0.01, "momentum": 0.9},
    {"lr": 0.01, "centered": True},
    {"lr": 0.01, "centered": True, "momentum": 0.5, "weight_decay": 0.1},
])
def test_rmsprop_matches_torch(kwargs):
    run_steps("RMSprop", kwargs)


def test_adamw_decays_without_gradient_change():
    p = nn.Parameter(kael.ones(3))
    p.grad = kael.zeros(3)
    opt = optim.AdamW([p], lr=0.1, weight_decay=0.5)
    opt.step()
    assert p.tolist() == pytest.approx([0.95] * 3)


@pytest.mark.parametrize("name,kwargs", [("SGD", {"lr": 0.1, "momentum": 0.9}), ("Adam", {"lr": 0.01}),
                                         ("RMSprop", {"lr": 0.01, "momentum": 0.5})])
def test_param_groups_with_own_options(name, kwargs):
    topt, kopt, _, _ = run_steps(name, kwargs, groups={"lr": 0.5, "weight_decay": 0.05})
    for kg, tg in zip(kopt.param_groups, topt.param_groups):
        assert set(kg) <= set(tg)  # torch adds foreach, fused, differentiable, capturable
        assert all(kg[key] == tg[key] for key in kg if key != "params")
    assert kopt.param_groups[0]["lr"] == 0.5 and kopt.param_groups[1]["lr"] == kwargs["lr"]


def test_parameters_without_grad_are_skipped():
    a, b = nn.Parameter(kael.ones(2)), nn.Parameter(kael.ones(2))
    a.grad = kael.ones(2)
    opt = optim.SGD([a, b], lr=0.5, momentum=0.9)
    opt.step()
    assert a.tolist() == [0.5, 0.5] and b.tolist() == [1.0, 1.0]
    assert len(opt.state) == 1 and a in opt.state and b not in opt.state
    assert opt.state[a]["momentum_buffer"].tolist() == [1.0, 1.0]


def test_step_updates_in_place_and_bumps_version():
    p = nn.Parameter(kael.ones(2))
    p.grad = kael.ones(2)
    version = p._version
    opt = optim.Adam([p])
    opt.step()
    assert p._version > version
    assert opt.param_groups[0]["params"][0] is p


def test_step_calls_closure_and_returns_its_loss():
    p = nn.Parameter(kael.ones(2))
    p.grad = kael.ones(2)
    calls = []
    opt = optim.SGD([p], lr=0.1)
    assert opt.step(lambda: calls.append(1) or 3.5) == 3.5
    assert calls == [1]


def test_zero_grad():
    p = nn.Parameter(kael.ones(2))
    p.grad = kael.ones(2)
    opt = optim.SGD([p], lr=0.1)
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


def test_state_dict_layout_matches_torch():
    topt, kopt, _, _ = run_steps("Adam", {"lr": 0.01}, steps=2, groups={"lr": 0.1})
    ts, ks = topt.state_dict(), kopt.state_dict()
    assert list(ks) == ["state", "param_groups"]
    assert sorted(ks["state"]) == sorted(ts["state"])
    assert [g["params"] for g in ks["param_groups"]] == [g["params"] for g in ts["param_groups"]]
    for index, entry in ks["state"].items():
        assert sorted(entry) == sorted(ts["state"][index])
        assert float(entry["step"]) == float(ts["state"][index]["step"])
        check(entry["exp_avg"], ts["state"][index]["exp_avg"])
    for kg, tg in zip(ks["param_groups"], ts["param_groups"]):
        for key in ("lr", "betas", "eps", "weight_decay", "amsgrad"):
            assert kg[key] == tg[key]


@pytest.mark.parametrize("name,kwargs", [("SGD", {"lr": 0.1, "momentum": 0.9}), ("Adam", {"lr": 0.01}),
                                         ("AdamW", {"lr": 0.01}), ("RMSprop", {"lr": 0.01, "centered": True})])
def test_state_dict_round_trip_continues_identically(name, kwargs):
    kael.manual_seed(0)
    params_a = [nn.Parameter(kael.randn(s)) for s in SHAPES]
    params_b = [nn.Parameter(p.clone()) for p in params_a]
    opt_a = getattr(optim, name)(params_a, **kwargs)
    grads = [[kael.randn(s) for s in SHAPES] for _ in range(4)]
    for step in range(2):
        for p, g in zip(params_a, grads[step]):
            p.grad = g
        opt_a.step()
    with_state = opt_a.state_dict()
    with kael.no_grad():
        for a, b in zip(params_a, params_b):
            b.copy_(a)
    opt_b = getattr(optim, name)(params_b, lr=123.0)
    opt_b.load_state_dict(with_state)
    assert opt_b.param_groups[0]["lr"] == kwargs["lr"]
    for step in range(2, 4):
        for pa, pb, g in zip(params_a, params_b, grads[step]):
            pa.grad = g
            pb.grad = g.clone()
        opt_a.step()
        opt_b.step()
    for a, b in zip(params_a, params_b):
        assert a.tolist() == b.tolist()


def test_load_state_dict_refuses_mismatched_groups_and_shapes():
    params = [nn.Parameter(kael.randn(s)) for s in SHAPES]
    opt = optim.Adam(params)
    for p in params:
        p.grad = kael.ones_like(p)
    opt.step()
    state = opt.state_dict()
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.Adam([{"params": params[:1]}, {"params": params[1:]}]).load_state_dict(state)
    with pytest.raises(ValueError, match="doesn't match the size"):
        optim.Adam(params[:2]).load_state_dict(state)
    # the same number of parameters in another order: the shapes give it away
    reordered = optim.Adam([params[1], params[0], params[2]])
    with pytest.raises(ValueError, match="of shape"):
        reordered.load_state_dict(state)
    assert reordered.state == {}


def test_argument_checks_match_torch():
    p = [torch.nn.Parameter(torch.zeros(1))]
    k = [nn.Parameter(kael.zeros(1))]
    cases = [("SGD", {"lr": -1.0}, "Invalid learning rate"), ("SGD", {"lr": 0.1, "momentum": -1}, "momentum"),
             ("SGD", {"lr": 0.1, "nesterov": True}, "Nesterov momentum requires"),
             ("Adam", {"betas": (1.0, 0.9)}, "beta parameter at index 0"), ("Adam", {"eps": -1}, "epsilon"),
             ("AdamW", {"weight_decay": -1}, "weight_decay"), ("RMSprop", {"alpha": -1}, "alpha")]
    for name, kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            getattr(torch.optim, name)(p, **kwargs)
        with pytest.raises(ValueError, match=message):
            getattr(optim, name)(k, **kwargs)
    for lib_opt, params in ((torch.optim, []), (optim, [])):
        with pytest.raises(ValueError, match="empty parameter list"):
            lib_opt.SGD(params, lr=0.1)
    with pytest.raises(TypeError):
        optim.SGD(k[0], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": k}, {"params": k}], lr=0.1)
