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
