"""kael.optim.lr_scheduler against torch.optim.lr_scheduler: the same learning rates, to the bit."""
import math

import pytest
import torch

import kael
import kael.nn as nn
import kael.optim as optim
from kael.optim import lr_scheduler


def pair(lrs=(0.1, 0.02)):
    tp = [torch.nn.Parameter(torch.zeros(1)) for _ in lrs]
    kp = [nn.Parameter(kael.zeros(1)) for _ in lrs]
    topt = torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(tp, lrs)], lr=lrs[0])
    kopt = optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(kp, lrs)], lr=lrs[0])
    return topt, kopt


def sequences(name, steps=40, **kwargs):
    topt, kopt = pair()
    ts = getattr(torch.optim.lr_scheduler, name)(topt, **kwargs)
    ks = getattr(lr_scheduler, name)(kopt, **kwargs)
    tseq, kseq = [ts.get_last_lr()], [ks.get_last_lr()]
    for _ in range(steps):
        topt.step()
        kopt.step()
        ts.step()
        ks.step()
        tseq.append(ts.get_last_lr())
        kseq.append(ks.get_last_lr())
        assert [g["lr"] for g in kopt.param_groups] == kseq[-1]
    return tseq, kseq


@pytest.mark.parametrize("name,kwargs", [
    ("StepLR", {"step_size": 3}),
    ("StepLR", {"step_size": 5, "gamma": 0.5}),
    ("MultiStepLR", {"milestones": [2, 5, 5, 11], "gamma": 0.3}),
    ("ExponentialLR", {"gamma": 0.93}),
    ("CosineAnnealingLR", {"T_max": 10}),
    ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.001}),
    ("LinearLR", {}),
    ("LinearLR", {"start_factor": 0.1, "end_factor": 0.8, "total_iters": 12}),
    ("LambdaLR", {"lr_lambda": lambda epoch: 0.95 ** epoch + 1 / (epoch + 1)}),
    ("LambdaLR", {"lr_lambda": [lambda e: 1.0 / (e + 1), lambda e: 0.5 * e]}),
])
def test_sequences_equal_torch(name, kwargs):
    tseq, kseq = sequences(name, **kwargs)
    assert kseq == tseq


def test_warmup_cosine_equals_its_lambda_in_torch():
    warmup, total, eta_min, base = 5, 30, 0.001, 0.1

    def factor(epoch):
        if epoch < warmup:
            return (epoch + 1) / warmup
        progress = min(1.0, (epoch - warmup) / (total - warmup))
        return (eta_min + (base - eta_min) * (1 + math.cos(math.pi * progress)) / 2) / base

    topt, kopt = pair((base,))
    ts = torch.optim.lr_scheduler.LambdaLR(topt, factor)
    ks = lr_scheduler.WarmupCosineLR(kopt, warmup, total, eta_min=eta_min)
    seq = [ks.get_last_lr()[0]]
    for _ in range(40):
        topt.step()
        kopt.step()
        ts.step()
        ks.step()
        assert ks.get_last_lr()[0] == pytest.approx(ts.get_last_lr()[0], rel=1e-12)
        seq.append(ks.get_last_lr()[0])
    assert seq[0] == pytest.approx(base / warmup)
    assert seq[warmup - 1] == pytest.approx(base) and seq[warmup] == pytest.approx(base)
    assert all(a >= b for a, b in zip(seq[warmup:], seq[warmup + 1:]))
    assert seq[total] == pytest.approx(eta_min) and seq[-1] == pytest.approx(eta_min)
    with pytest.raises(ValueError, match="total_steps"):
        lr_scheduler.WarmupCosineLR(kopt, 10, 10)


def test_state_dict_round_trip():
    _, kopt = pair()
    sched = lr_scheduler.StepLR(kopt, step_size=2, gamma=0.5)
    for _ in range(3):
        kopt.step()
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 3
    _, kopt2 = pair()
    other = lr_scheduler.StepLR(kopt2, step_size=2, gamma=0.5)
    other.load_state_dict(state)
    assert other.last_epoch == 3 and other.get_last_lr() == sched.get_last_lr()
    tstate = torch.optim.lr_scheduler.StepLR(pair()[0], step_size=2, gamma=0.5).state_dict()
    assert set(tstate) >= {"step_size", "gamma", "base_lrs", "last_epoch", "_step_count", "_last_lr"}
    assert {"step_size", "gamma", "base_lrs", "last_epoch", "_step_count", "_last_lr"} <= set(state)


def test_lambda_state_dict_leaves_functions_out():
    _, kopt = pair()
    sched = lr_scheduler.LambdaLR(kopt, lambda e: 0.5)
    assert sched.state_dict()["lr_lambdas"] == [None, None]


def test_argument_checks_match_torch():
    topt, kopt = pair()
    for lib, opt in ((torch.optim.lr_scheduler, topt), (lr_scheduler, kopt)):
        with pytest.raises(ValueError, match="Starting multiplicative factor"):
            lib.LinearLR(opt, start_factor=0)
        with pytest.raises(ValueError, match="Ending multiplicative factor"):
            lib.LinearLR(opt, end_factor=2)
        with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
            lib.LambdaLR(opt, [lambda e: 1.0])
        with pytest.raises(TypeError, match="is not an Optimizer"):
            lib.StepLR(object(), 2)


# ------------------------------------------------------------ the schedulers a training loop composes

def pair_with(opt_name, lrs=(0.1, 0.02), **kwargs):
    tp = [torch.nn.Parameter(torch.zeros(1)) for _ in lrs]
    kp = [nn.Parameter(kael.zeros(1)) for _ in lrs]
    topt = getattr(torch.optim, opt_name)([{"params": [p], "lr": lr} for p, lr in zip(tp, lrs)], lr=lrs[0], **kwargs)
    kopt = getattr(optim, opt_name)([{"params": [p], "lr": lr} for p, lr in zip(kp, lrs)], lr=lrs[0], **kwargs)
    return topt, kopt


def run_both(make, steps=40, opt_name="SGD", metrics=None, **opt_kwargs):
    """make(lib_scheduler_module, optimizer) -> scheduler, for torch and kael; the learning rates
    (and momentum or betas, which OneCycleLR moves) after every step, for each."""
    topt, kopt = pair_with(opt_name, **opt_kwargs)
    ts, ks = make(torch.optim.lr_scheduler, topt), make(lr_scheduler, kopt)

    def record(opt, s):
        keys = [k for k in ("momentum", "betas") if k in opt.param_groups[0]]
        return (list(s.get_last_lr()), [g["lr"] for g in opt.param_groups], [[g[k] for k in keys] for g in opt.param_groups])

    tseq, kseq = [record(topt, ts)], [record(kopt, ks)]
    for i in range(steps):
        topt.step()
        kopt.step()
        if metrics is None:
            ts.step()
            ks.step()
        else:
            ts.step(metrics[i])
            ks.step(metrics[i])
        tseq.append(record(topt, ts))
        kseq.append(record(kopt, ks))
    return tseq, kseq, ts, ks


@pytest.mark.parametrize("make", [
    lambda L, o: L.MultiplicativeLR(o, lambda e: 0.9 + 0.001 * e),
    lambda L, o: L.MultiplicativeLR(o, [lambda e: 0.95, lambda e: 1.0 / (e + 1)]),
    lambda L, o: L.ConstantLR(o),
    lambda L, o: L.ConstantLR(o, factor=0.25, total_iters=9),
    lambda L, o: L.PolynomialLR(o),
    lambda L, o: L.PolynomialLR(o, total_iters=30, power=2.0),
    lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=5),
    lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001),
    lambda L, o: L.OneCycleLR(o, max_lr=0.5, total_steps=40),
    lambda L, o: L.OneCycleLR(o, max_lr=[0.5, 0.2], epochs=4, steps_per_epoch=10, pct_start=0.25,
                              anneal_strategy="linear", three_phase=True),
    lambda L, o: L.OneCycleLR(o, max_lr=0.5, total_steps=45, cycle_momentum=False, div_factor=10.0),
    lambda L, o: L.SequentialLR(o, [L.LinearLR(o, start_factor=0.1, total_iters=5), L.CosineAnnealingLR(o, T_max=30)],
                                milestones=[5]),
    lambda L, o: L.SequentialLR(o, [L.ConstantLR(o, factor=0.5, total_iters=3), L.ExponentialLR(o, gamma=0.9),
                                    L.StepLR(o, step_size=4, gamma=0.5)], milestones=[6, 20]),
    lambda L, o: L.SequentialLR(o, [L.PolynomialLR(o, total_iters=8, power=2.0),
                                    L.MultiStepLR(o, milestones=[3, 6], gamma=0.5)], milestones=[10]),
    lambda L, o: L.ChainedScheduler([L.ConstantLR(o, factor=0.1, total_iters=4), L.ExponentialLR(o, gamma=0.9)]),
    lambda L, o: L.ChainedScheduler([L.LinearLR(o, total_iters=6), L.CosineAnnealingWarmRestarts(o, T_0=7)], o),
    lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4),
    lambda L, o: L.CyclicLR(o, base_lr=[0.01, 0.002], max_lr=[0.1, 0.05], step_size_up=3, step_size_down=7,
                            mode="triangular2", base_momentum=0.7, max_momentum=0.95),
    lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=5, mode="exp_range", gamma=0.97),
    lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2, scale_fn=lambda x: 1 / (x + 1),
                            scale_mode="iterations", cycle_momentum=False),
], ids=["multiplicative", "multiplicative-per-group", "constant", "constant-args", "polynomial", "polynomial-power",
        "warm-restarts", "warm-restarts-mult", "one-cycle", "one-cycle-three-phase", "one-cycle-no-momentum",
        "sequential-warmup-cosine", "sequential-three", "sequential-milestones", "chained", "chained-restarts",
        "cyclic", "cyclic-triangular2", "cyclic-exp-range", "cyclic-scale-fn"])
def test_composed_sequences_equal_torch(make):
    tseq, kseq, _, _ = run_both(make)
    assert kseq == tseq


def test_one_cycle_moves_adams_beta1_and_stops_at_total_steps():
    make = lambda L, o: L.OneCycleLR(o, max_lr=0.01, total_steps=20, base_momentum=0.8, max_momentum=0.9)
    tseq, kseq, ts, ks = run_both(make, steps=19, opt_name="AdamW", betas=(0.9, 0.99))
    assert kseq == tseq
    assert {tuple(b) for _, _, rows in kseq for row in rows for b in row} > {(0.9, 0.99)}  # beta1 moved
    for s, opt in ((ts, ts.optimizer), (ks, ks.optimizer)):
        opt.step()
        s.step()  # step 20 of 20
        with pytest.raises(ValueError, match="Tried to step 21 times. The specified number of total steps is 20"):
            s.step()


def test_reduce_on_plateau_equals_torch():
    losses = [1.0, 0.9, 0.9, 0.91, 0.9, 0.95, 0.89, 0.9, 0.9, 0.9, 0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    for kwargs in ({"patience": 2}, {"patience": 1, "factor": 0.5, "cooldown": 2, "min_lr": [0.01, 0.001]},
                   {"mode": "max", "patience": 0, "threshold": 0.05, "threshold_mode": "abs", "min_lr": 0.004},
                   {"patience": 0, "eps": 0.05}, {"patience": 1, "threshold": 0.0},
                   {"mode": "max", "patience": 1, "threshold": 0.0}):
        tseq, kseq, ts, ks = run_both(lambda L, o: L.ReduceLROnPlateau(o, **kwargs), steps=len(losses),
                                      metrics=[kael.tensor(v) if i % 2 else v for i, v in enumerate(losses)])
        assert kseq == tseq, kwargs
        assert ks.num_bad_epochs == ts.num_bad_epochs and ks.best == ts.best and ks.last_epoch == ts.last_epoch


def test_step_with_an_epoch_warns_and_takes_the_closed_form():
    for make in (lambda L, o: L.StepLR(o, step_size=3, gamma=0.5), lambda L, o: L.MultiStepLR(o, [2, 5, 5], 0.3),
                 lambda L, o: L.ExponentialLR(o, 0.9), lambda L, o: L.CosineAnnealingLR(o, T_max=10),
                 lambda L, o: L.LinearLR(o, total_iters=6), lambda L, o: L.ConstantLR(o, total_iters=4),
                 lambda L, o: L.PolynomialLR(o, total_iters=8, power=3.0), lambda L, o: L.LambdaLR(o, lambda e: 1 / (1 + e))):
        topt, kopt = pair()
        ts, ks = make(torch.optim.lr_scheduler, topt), make(lr_scheduler, kopt)
        for epoch in (7, 2, 4, 11, 6, 0, 8):  # (4, 6, 8: where ConstantLR, LinearLR and PolynomialLR end)
            topt.step()
            kopt.step()
            with pytest.warns(UserWarning, match="deprecated"):
                ts.step(epoch)
            with pytest.warns(UserWarning, match="deprecated"):
                ks.step(epoch)
            assert ks.get_last_lr() == ts.get_last_lr() and ks.last_epoch == ts.last_epoch == epoch


def test_warm_restarts_take_fractional_epochs():
    topt, kopt = pair()
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, T_0=2, T_mult=3, eta_min=0.01)
    ks = lr_scheduler.CosineAnnealingWarmRestarts(kopt, T_0=2, T_mult=3, eta_min=0.01)
    for epoch in range(12):
        for i in range(4):
            ts.step(epoch + i / 4)
            ks.step(epoch + i / 4)
            assert ks.get_last_lr() == ts.get_last_lr() and (ks.T_cur, ks.T_i) == (ts.T_cur, ts.T_i)
    for L, o in ((torch.optim.lr_scheduler, topt), (lr_scheduler, kopt)):
        s = L.CosineAnnealingWarmRestarts(o, T_0=2)
        with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
            s.step(-1)


def test_sequential_state_dict_resumes_where_it_left_off():
    make = lambda L, o: L.SequentialLR(o, [L.LinearLR(o, start_factor=0.2, total_iters=4),
                                           L.CosineAnnealingLR(o, T_max=12)], milestones=[4])
    tseq, _, _, _ = run_both(make, steps=20)
    _, kopt = pair()
    ks = make(lr_scheduler, kopt)
    for _ in range(9):
        kopt.step()
        ks.step()
    state = ks.state_dict()
    assert [type(s) for s in state["_schedulers"]] == [dict, dict] and "optimizer" not in state
    lrs = [g["lr"] for g in kopt.param_groups]
    _, kopt2 = pair()
    resumed = make(lr_scheduler, kopt2)
    resumed.load_state_dict(state)
    for g, lr in zip(kopt2.param_groups, lrs):
        g["lr"] = lr  # the optimizer's own state_dict carries its groups' rates
    got = []
    for _ in range(11):
        kopt2.step()
        resumed.step()
        got.append(resumed.get_last_lr())
    assert got == [lrs_ for lrs_, _, _ in tseq[10:]]


def test_composed_argument_checks_match_torch():
    for L in (torch.optim.lr_scheduler, lr_scheduler):
        topt, _ = pair() if L is torch.optim.lr_scheduler else (None, None)
        opt = topt if L is torch.optim.lr_scheduler else pair()[1]
        other = (pair()[0] if L is torch.optim.lr_scheduler else pair()[1])
        cases = [
            (ValueError, "Constant multiplicative factor", lambda: L.ConstantLR(opt, factor=1.5)),
            (ValueError, "expects at least one scheduler", lambda: L.SequentialLR(opt, [], [])),
            (ValueError, "one more than the number of milestone points",
             lambda: L.SequentialLR(opt, [L.StepLR(opt, 2)], milestones=[3])),
            (ValueError, "belong to the same optimizer",
             lambda: L.SequentialLR(opt, [L.StepLR(opt, 2), L.StepLR(other, 2)], milestones=[3])),
            (ValueError, "does not support `ReduceLROnPlateau`",
             lambda: L.ChainedScheduler([L.StepLR(opt, 2), L.ReduceLROnPlateau(opt)])),
            (ValueError, "Expected positive integer T_0, but got 0", lambda: L.CosineAnnealingWarmRestarts(opt, T_0=0)),
            (ValueError, "Expected integer T_mult >= 1, but got 0",
             lambda: L.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=0)),
            (ValueError, "You must define either total_steps OR", lambda: L.OneCycleLR(opt, max_lr=0.1)),
            (ValueError, "Expected positive integer total_steps, but got 0", lambda: L.OneCycleLR(opt, 0.1, total_steps=0)),
            (ValueError, "Expected float between 0 and 1 pct_start, but got 2",
             lambda: L.OneCycleLR(opt, 0.1, total_steps=5, pct_start=2)),
            (ValueError, "anneal_strategy must be one of 'cos' or 'linear', instead got x",
             lambda: L.OneCycleLR(opt, 0.1, total_steps=5, anneal_strategy="x")),
            (ValueError, "max_lr must have the same length", lambda: L.OneCycleLR(opt, [0.1], total_steps=5)),
            (ValueError, "Factor should be < 1.0.", lambda: L.ReduceLROnPlateau(opt, factor=1.0)),
            (ValueError, "expected 2 min_lrs, got 1", lambda: L.ReduceLROnPlateau(opt, min_lr=[0.1])),
            (ValueError, "mode sideways is unknown!", lambda: L.ReduceLROnPlateau(opt, mode="sideways")),
            (ValueError, "threshold mode x is unknown!", lambda: L.ReduceLROnPlateau(opt, threshold_mode="x")),
            (TypeError, "lr_lambda should be a function, but got int", lambda: L.MultiplicativeLR(opt, 3)),
            (ValueError, "mode is invalid and scale_fn is None", lambda: L.CyclicLR(opt, 0.1, 1.0, mode="square")),
            (ValueError, "base_lr must have the same length", lambda: L.CyclicLR(opt, [0.1], 1.0)),
        ]
        for exc, message, call in cases:
            with pytest.raises(exc, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                               .replace(".", r"\.").replace("`", "`")):
                call()


def test_cyclic_lr_moves_adams_beta1_and_its_state_dict_round_trips():
    make = lambda L, o: L.CyclicLR(o, base_lr=0.001, max_lr=0.01, step_size_up=3, base_momentum=0.85,
                                   max_momentum=0.95)
    tseq, kseq, ts, ks = run_both(make, steps=15, opt_name="Adam")
    assert kseq == tseq
    state = ks.state_dict()
    assert state["_scale_fn_custom"] is None and "optimizer" not in state
    _, kopt2 = pair_with("Adam")
    other = make(lr_scheduler, kopt2)
    other.load_state_dict(state)
    assert other.last_epoch == ks.last_epoch and other.get_lr() == ks.get_lr()
