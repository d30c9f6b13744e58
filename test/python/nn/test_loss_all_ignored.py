"""nll_loss and cross_entropy where some or every target is ignore_index, with and without class
weights and label smoothing, each reduction: the loss (NaN for a mean over no target) and the
input's gradient (0 at ignored targets, never inf * 0) as torch's."""
import numpy as np
import pytest
import torch

import kael

TARGET_SETS = {"all-ignored": [1, 1, 1], "some-ignored": [1, 0, 2], "none-ignored": [0, 2, 0]}


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("targets", list(TARGET_SETS))
@pytest.mark.parametrize("fn,label_smoothing", [("nll_loss", 0.0), ("cross_entropy", 0.0), ("cross_entropy", 0.1)])
def test_ignored_targets_loss_and_gradient(fn, label_smoothing, targets, reduction, weighted):
    x = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    w = np.array([1.0, 2.0, 0.5, 3.0], dtype=np.float32)
    results = {}
    for lib in (torch, kael):
        inp = lib.tensor(x, requires_grad=True)
        kwargs = {"ignore_index": 1, "reduction": reduction}
        if weighted:
            kwargs["weight"] = lib.tensor(w)
        if fn == "cross_entropy":
            kwargs["label_smoothing"] = label_smoothing
        loss = getattr(lib.nn.functional, fn)(inp, lib.tensor(TARGET_SETS[targets]), **kwargs)
        loss.sum().backward()
        results[lib.__name__] = (np.asarray(loss.detach().tolist(), dtype=np.float32),
                                 np.asarray(inp.grad.tolist(), dtype=np.float32))
    (kl, kg), (tl, tg) = results["kael"], results["torch"]
    np.testing.assert_allclose(kl, tl, rtol=1e-5, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(kg, tg, rtol=1e-5, atol=1e-6, equal_nan=True)
