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


@pytest.mark.parametrize("name,kwargs", [
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1, "initial_accumulator_value": 0.5}),
    ("Adagrad", {"lr": 0.05, "eps": 1e-3, "maximize": True}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 0.1, "maximize": True}),
    ("Adamax", {}),
    ("Adamax", {"lr": 0.01, "betas": (0.8, 0.99), "weight_decay": 0.1, "maximize": True}),
    ("NAdam", {}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True, "momentum_decay": 0.01}),
    ("NAdam", {"lr": 0.01, "maximize": True}),
    ("RAdam", {}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True, "betas": (0.8, 0.9)}),
    ("RAdam", {"lr": 0.01, "maximize": True, "betas": (0.5, 0.6)}),  # rho_inf = 4: never rectified
    ("Rprop", {}),
    ("Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.2), "maximize": True}),
    ("ASGD", {}),
    ("ASGD", {"lr": 0.05, "lambd": 0.01, "alpha": 0.5, "t0": 3, "weight_decay": 0.1}),  # averaging from step 4
    ("ASGD", {"lr": 0.05, "t0": 0, "maximize": True}),
])
def test_more_optimizers_match_torch(name, kwargs):
    # RAdam's first five steps (rho_t <= 5) take the momentum alone, the later ones the rectified step
    topt, kopt, _, _ = run_steps(name, kwargs, steps=10)
    # and the state (ASGD's average ax, which the parameters never read, NAdam's mu_product, ...)
    ts, ks = topt.state_dict()["state"], kopt.state_dict()["state"]
    for index, entry in ks.items():
        assert sorted(entry) == sorted(ts[index])
        for key, value in entry.items():
            if key == "step":
                assert float(value) == float(ts[index][key])
            else:
                check(value, ts[index][key])
    run_steps(name, kwargs, steps=4, dtype=torch.float64)


@pytest.mark.parametrize("name", ["Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD"])
def test_more_optimizers_state_and_groups_are_torchs(name):
    tp, kp = make_params()
    topt, kopt = getattr(torch.optim, name)(tp, lr=0.01), getattr(optim, name)(kp, lr=0.01)
    # Adagrad makes its state (the sums) when it is made, the others at their first step
    assert sorted(kopt.state_dict()["state"]) == sorted(topt.state_dict()["state"])
    for t, k in zip(tp, kp):
        g = torch.randn(t.shape)
        t.grad, k.grad = g, to_kael(g)
    topt.step()
    kopt.step()
    ts, ks = topt.state_dict(), kopt.state_dict()
    for index, entry in ks["state"].items():
        assert sorted(entry) == sorted(ts["state"][index])
        for key, value in entry.items():
            if key == "step":
                assert float(value) == float(ts["state"][index][key])
            else:
                check(value, ts["state"][index][key])
    # a group added later gets its options' defaults and, for Adagrad, its state at its first step
    extra_t, extra_k = torch.nn.Parameter(torch.ones(2)), nn.Parameter(kael.ones(2))
    topt.add_param_group({"params": [extra_t], "lr": 0.1})
    kopt.add_param_group({"params": [extra_k], "lr": 0.1})
    extra_t.grad, extra_k.grad = torch.full((2,), 0.5), kael.full((2,), 0.5)
    topt.step()
    kopt.step()
    check(extra_k, extra_t.detach())


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
                                         ("AdamW", {"lr": 0.01}), ("RMSprop", {"lr": 0.01, "centered": True}),
                                         ("Adagrad", {"lr": 0.1, "lr_decay": 0.01}), ("Adadelta", {"lr": 0.5}),
                                         ("Adamax", {"lr": 0.01}), ("NAdam", {"lr": 0.01}), ("RAdam", {"lr": 0.01}),
                                         ("Rprop", {"lr": 0.01}), ("ASGD", {"lr": 0.01, "t0": 1})])
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
             ("AdamW", {"weight_decay": -1}, "weight_decay"), ("RMSprop", {"alpha": -1}, "alpha"),
             ("Adagrad", {"lr_decay": -1}, "Invalid lr_decay value: -1"),
             ("Adagrad", {"initial_accumulator_value": -0.5}, "Invalid initial_accumulator_value value: -0.5"),
             ("Adagrad", {"eps": -1}, "Invalid epsilon value"), ("Adadelta", {"rho": 1.5}, "Invalid rho value: 1.5"),
             ("Adadelta", {"weight_decay": -1}, "Invalid weight_decay value"),
             ("Adamax", {"betas": (0.9, 1.0)}, "beta parameter at index 1"),
             ("NAdam", {"momentum_decay": -1}, "Invalid momentum_decay value: -1"),
             ("NAdam", {"lr": -0.1}, "Invalid learning rate: -0.1"), ("RAdam", {"eps": -1}, "Invalid epsilon value"),
             ("Rprop", {"etas": (0.5, 0.9)}, "Invalid eta values: 0.5, 0.9"),
             ("ASGD", {"weight_decay": -1}, "Invalid weight_decay value")]
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


# ---- the fused Adam(W) step (the registry's _adam_step_): one pass over every parameter

def _unfused(monkeypatch):
    """Makes Adam and AdamW take their per-parameter ops."""
    monkeypatch.setattr(optim.Adam, "_fused_update", lambda self, group, step, items: False)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("kwargs", [{"lr": 0.01, "weight_decay": 0.1}, {"lr": 0.01, "amsgrad": True},
                                    {"lr": 0.01, "maximize": True, "weight_decay": 0.05}])
def test_fused_adam_matches_torch_on_larger_parameters(name, kwargs):
    # above the parallel grain (one region split among the threads), several tensors of one call
    shapes = [(300, 257), (4097,), (3, 5)]
    tp = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    kp = [nn.Parameter(to_kael(p.detach())) for p in tp]
    topt = getattr(torch.optim, name)(tp, foreach=False, **kwargs)
    kopt = getattr(optim, name)(kp, **kwargs)
    for _ in range(4):
        for t, k in zip(tp, kp):
            g = torch.randn(t.shape)
            t.grad, k.grad = g, to_kael(g)
        topt.step()
        kopt.step()
        for t, k in zip(tp, kp):
            check(k, t.detach())
    for t, k in zip(tp, kp):
        for key in ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if kwargs.get("amsgrad") else ()):
            check(kopt.state[k][key], topt.state[t][key])


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_fused_and_per_parameter_steps_agree(name, monkeypatch):
    kwargs = {"lr": 0.02, "weight_decay": 0.1, "betas": (0.85, 0.95)}
    torch.manual_seed(3)
    grads = [[torch.randn(6, 7), torch.randn(9)] for _ in range(3)]
    results = []
    for fused in (True, False):
        if not fused:
            _unfused(monkeypatch)
        params = [nn.Parameter(kael.ones(6, 7)), nn.Parameter(kael.full((9,), 0.5))]
        opt = getattr(optim, name)(params, **kwargs)
        for step in grads:
            for p, g in zip(params, step):
                p.grad = to_kael(g)
            opt.step()
        results.append([to_torch_list(p) for p in params])
    for a, b in zip(*results):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-7)


def to_torch_list(t):
    return torch.tensor(t.tolist()).flatten().tolist()


def test_fused_adam_falls_back_for_other_layouts_and_dtypes():
    # a non-contiguous parameter and gradient, float16 and a mixed-dtype group still match torch
    base = torch.randn(8, 6)
    tp = [torch.nn.Parameter(base.clone()), torch.nn.Parameter(torch.randn(5, dtype=torch.float64))]
    kp = [nn.Parameter(to_kael(base).t().contiguous().t()), nn.Parameter(to_kael(tp[1].detach()))]
    assert not kp[0].is_contiguous()
    topt = torch.optim.AdamW(tp, lr=0.01, foreach=False)
    kopt = optim.AdamW(kp, lr=0.01)
    for _ in range(3):
        g0, g1 = torch.randn(8, 6), torch.randn(5, dtype=torch.float64)
        tp[0].grad, tp[1].grad = g0, g1
        kp[0].grad, kp[1].grad = to_kael(g0.t().contiguous()).t(), to_kael(g1)
        topt.step()
        kopt.step()
        check(kp[0], tp[0].detach())
        check(kp[1], tp[1].detach())
    h = torch.nn.Parameter(torch.randn(7).half())
    kh = nn.Parameter(to_kael(h.detach()))
    topt, kopt = torch.optim.Adam([h], lr=0.01, foreach=False), optim.Adam([kh], lr=0.01)
    for _ in range(3):
        g = torch.randn(7).half()
        h.grad, kh.grad = g, to_kael(g)
        topt.step()
        kopt.step()
    check(kh, h.detach(), atol=2e-3)


STEP = dict(lr=1e-2, beta1=0.9, beta2=0.999, weight_decay=0.1, eps=1e-8, maximize=False)


@pytest.mark.parametrize("decoupled", [False, True])
@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adam_step_matches_torchs_fused_step(decoupled, amsgrad, maximize, dtype):
    # the registry op against torch's own fused kernels (_fused_adamw_ for the decoupled form), the
    # lists written in place and nothing returned, as torch's
    torch.manual_seed(1)
    shapes = [(300, 257), (33,), (3, 5)]
    tdt = getattr(torch, dtype)
    tensors = [[torch.randn(s, dtype=tdt) for s in shapes] for _ in range(5)]
    tensors[3] = [t.abs() for t in tensors[3]]
    tensors[4] = [t.abs() + 0.5 for t in tensors[4]]
    k = [[to_kael(t) for t in ts] for ts in tensors]
    maxes_t, maxes_k = (tensors[4], k[4]) if amsgrad else ([], [])
    kw = dict(STEP, maximize=maximize)
    fused = torch._fused_adamw_ if decoupled else torch._fused_adam_
    for step in (1, 2, 7):
        steps = [torch.tensor(float(step)) for _ in shapes]
        assert fused(tensors[0], tensors[1], tensors[2], tensors[3], maxes_t, steps, amsgrad=amsgrad, **kw) is None
        before = [t._version for t in k[0]]
        assert kael._C._adam_step_(k[0], k[1], k[2], k[3], maxes_k, amsgrad=amsgrad, decoupled=decoupled, step=step,
                                **kw) is None
        assert [t._version for t in k[0]] == [v + 1 for v in before]
        for ts, ks in zip(tensors, k):
            for t, kt in zip(ts, ks):
                check(kt, t)


def test_adam_step_refuses_what_it_cannot_fuse():
    p, g, m, v = (kael.zeros(4) for _ in range(4))
    kw = dict(STEP, amsgrad=False, decoupled=True, step=1)
    assert kael._C._adam_step_supported([p], [g], [m], [v], [], False) is True
    t = kael.zeros(4, 2).t()
    refused = [
        ([t], [kael.zeros(2, 4)], [kael.zeros(2, 4)], [kael.zeros(2, 4)], [], False),  # not contiguous
        ([p], [g], [p], [v], [], False),  # a buffer aliasing its parameter
        ([p], [kael.zeros(1).expand(4)], [m], [v], [], False),  # a gradient of another layout
        ([p], [g.double()], [m], [v], [], False),  # dtypes differ
        ([p.half()], [g.half()], [m.half()], [v.half()], [], False),  # float16
        ([p], [g], [m], [v], [], True),  # amsgrad without max_exp_avg_sqs
        ([p], [g], [m], [v], [kael.zeros(4)], False),  # max_exp_avg_sqs without amsgrad
        ([p], [g], [m], [v, v], [], False),  # list lengths differ
        ([p], [kael.zeros(5)], [m], [v], [], False),  # shapes differ
    ]
    for lists in refused:
        assert kael._C._adam_step_supported(*lists) is False, lists
    before = [x._version for x in (p, g, m, v)]
    snapshot = [x.tolist() for x in (p, g, m, v)]
    for lists in refused:
        with pytest.raises(RuntimeError, match="^_adam_step_: expected lists of") as info:
            kael._C._adam_step_(*lists[:5], **dict(kw, amsgrad=lists[5]))
        assert "got " in str(info.value)
    with pytest.raises(RuntimeError, match="^_adam_step_: expected a step count of at least 1, got 0"):
        kael._C._adam_step_([p], [g], [m], [v], [], **dict(kw, step=0))
    # every check runs before the first write
    assert [x._version for x in (p, g, m, v)] == before and [x.tolist() for x in (p, g, m, v)] == snapshot
    with pytest.raises(TypeError):
        kael._C._adam_step_([p], [1.0], [m], [v], [], **kw)
    with pytest.raises(TypeError):
        kael._C._adam_step_([p], [g], [m], [v], [])  # the keyword arguments are required
    assert kael._C._adam_step_([], [], [], [], [], **kw) is None  # empty lists: nothing to do


def test_adam_step_is_a_registry_op_that_autograd_and_a_python_mode_see():
    # no derivative: torch's fused step writes leaves that require grad and records nothing; so
    # does kael's, and the version counters tell a graph that saved one of them
    w = kael.ones(3, requires_grad=True)
    y = (w * w).sum()
    kael._C._adam_step_([w], [kael.ones(3)], [kael.zeros(3)], [kael.zeros(3)], [], **dict(STEP, amsgrad=False,
                     decoupled=False, step=1))
    assert w.requires_grad and w.grad_fn is None
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    lists = [kael.zeros(2)], [kael.ones(2)], [kael.zeros(2)], [kael.zeros(2)], []
    p = lists[0][0]
    kw = dict(STEP, amsgrad=False, decoupled=True, step=1)
    _, ops = kael._C._trace_dispatch(lambda: kael._C._adam_step_(*lists, **kw))
    assert ops == ["_adam_step_"], ops
    q = nn.Parameter(kael.ones(3))
    q.grad = kael.ones(3)
    opt = optim.AdamW([q], lr=0.1)
    ops = kael._C._trace_dispatch(opt.step)[1]
    assert ops[-2:] == ["_adam_step_supported", "_adam_step_"], ops  # the optimizer's step: the op
    assert p.tolist() != [0.0, 0.0]


def test_fused_step_with_parameters_at_different_step_counts():
    # b gets no gradient in the first step, so its step count lags a's: two fused calls
    tp = [torch.nn.Parameter(torch.randn(3, 3)) for _ in range(2)]
    kp = [nn.Parameter(to_kael(p.detach())) for p in tp]
    topt = torch.optim.AdamW(tp, lr=0.05, foreach=False)
    kopt = optim.AdamW(kp, lr=0.05)
    for step in range(4):
        for i, (t, k) in enumerate(zip(tp, kp)):
            if step == 0 and i == 1:
                t.grad = k.grad = None
                continue
            g = torch.randn(3, 3)
            t.grad, k.grad = g, to_kael(g)
        topt.step()
        kopt.step()
        for t, k in zip(tp, kp):
            check(k, t.detach())
    assert kopt.state[kp[0]]["step"] == 4 and kopt.state[kp[1]]["step"] == 3


# ------------------------------------------------------------------ torch's options of how a step runs

OPTIMIZERS = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop",
              "ASGD"]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_constructor_and_step_signatures_are_torchs(name):
    import inspect

    def shape(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert shape(getattr(optim, name).__init__) == shape(getattr(torch.optim, name).__init__)
    assert shape(getattr(optim, name).step) == shape(getattr(torch.optim, name).step)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_param_group_options_and_repr_are_torchs(name):
    tp, kp = make_params()
    topt, kopt = getattr(torch.optim, name)(tp, lr=0.01), getattr(optim, name)(kp, lr=0.01)
    assert sorted(kopt.param_groups[0]) == sorted(topt.param_groups[0])
    assert {k: v for k, v in kopt.param_groups[0].items() if k != "params"} == \
        {k: v for k, v in topt.param_groups[0].items() if k != "params"}
    assert repr(kopt) == repr(topt)


@pytest.mark.parametrize("options", [{"foreach": True}, {"foreach": False}, {"fused": True}, {"fused": False}])
@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_foreach_and_fused_give_torchs_steps(name, options):
    kwargs = {"lr": 0.01, "momentum": 0.9} if name == "SGD" else {"lr": 0.01, "weight_decay": 0.1}
    topt, kopt, _, _ = run_steps(name, {**kwargs, **options})
    for key, value in options.items():
        assert kopt.param_groups[0][key] == topt.param_groups[0][key] == value


def test_rmsprop_foreach_gives_torchs_steps_and_capturable_changes_nothing():
    run_steps("RMSprop", {"lr": 0.01, "momentum": 0.5, "foreach": True})
    # torch's capturable steps need CUDA tensors (an AssertionError on CPU ones); kael has no CUDA
    # graphs to capture and takes the same step (docs/decisions/nn-optim-data.md)
    for name, kwargs in (("RMSprop", {"lr": 0.01, "momentum": 0.5}), ("Adam", {"lr": 0.01}), ("AdamW", {"lr": 0.01})):
        results = []
        for capturable in (False, True):
            kael.manual_seed(1)
            params = [nn.Parameter(kael.randn(s)) for s in SHAPES]
            opt = getattr(optim, name)(params, **kwargs, capturable=capturable)
            for _ in range(4):
                for p in params:
                    p.grad = kael.randn(p.shape)
                opt.step()
            results.append([p.tolist() for p in params])
        assert results[0] == results[1]


@pytest.mark.parametrize("kwargs", [{"lr": 0.01, "weight_decay": 0.1}, {"lr": 0.01, "weight_decay": 0.05, "amsgrad": True}])
def test_adam_with_decoupled_weight_decay_is_adamw(kwargs):
    torch.manual_seed(0)
    topt, kopt, tp, kp = run_steps("Adam", {**kwargs, "decoupled_weight_decay": True})
    torch.manual_seed(0)
    _, _, _, kp_w = run_steps("AdamW", kwargs)
    for a, b in zip(kp, kp_w):
        assert a.tolist() == b.tolist()  # the same update, fused or not, to the bit
    assert kopt.param_groups[0]["decoupled_weight_decay"] is True


def test_fused_with_foreach_raises_as_torch_and_differentiable_is_refused():
    for lib in (torch.optim, optim):
        params = make_params()[0 if lib is torch.optim else 1]
        for name in ("SGD", "Adam", "AdamW"):
            with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
                getattr(lib, name)(params, lr=0.1, fused=True, foreach=True)
    # torch records a differentiable step in autograd; kael's steps run outside it and say so
    _, kp = make_params()
    for name in OPTIMIZERS:
        with pytest.raises(ValueError, match=f"{name}: differentiable=True"):
            getattr(optim, name)(kp, lr=0.1, differentiable=True)


def test_state_dict_without_the_newer_options_loads_with_their_defaults():
    _, kopt, _, kp = run_steps("Adam", {"lr": 0.01, "weight_decay": 0.1}, steps=2)
    state = kopt.state_dict()
    for group in state["param_groups"]:
        for key in ("foreach", "fused", "capturable", "differentiable", "decoupled_weight_decay"):
            del group[key]
    other = optim.Adam([nn.Parameter(p.detach().clone()) for p in kp], lr=0.5)
    other.load_state_dict(state)
    assert other.param_groups[0]["decoupled_weight_decay"] is False and other.param_groups[0]["lr"] == 0.01
    for p in other.param_groups[0]["params"]:
        p.grad = kael.ones_like(p)
    other.step()  # reads every option
