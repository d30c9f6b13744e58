"""The losses' options beyond the common ones, against torch: class weights for cross_entropy and
nll_loss (class indices, probabilities, label smoothing, ignore_index), element weights for
mse_loss, l1_loss and huber_loss, the deprecated size_average/reduce pair, and Hardtanh's old
keyword names. Values and input gradients are compared; errors by class and message."""
import warnings

import pytest
import torch

import kael
import kael.nn as nn
import kael.nn.functional as F
from helpers import check, to_kael

REDUCTIONS = ["none", "sum", "mean"]


def _both(t, requires_grad=False):
    k = to_kael(t)
    if requires_grad:
        t = t.clone().requires_grad_(True)
        k.requires_grad_(True)
    return t, k


def _compare_with_grad(tfn, kfn, t_input, k_input):
    tout, kout = tfn(t_input), kfn(k_input)
    check(kout, tout.detach())
    tout.sum().backward()
    kout.sum().backward()
    check(k_input.grad, t_input.grad)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(6, 5), (5,), (3, 5, 2, 2)])
def test_nll_loss_with_class_weights(shape, reduction):
    torch.manual_seed(0)
    classes = shape[0] if len(shape) == 1 else shape[1]
    tx, kx = _both(torch.randn(shape).log_softmax(0 if len(shape) == 1 else 1), requires_grad=True)
    target_shape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    target = torch.randint(0, classes, target_shape)
    if target.dim() > 0:
        target.view(-1)[1] = -100  # an ignored target
    weight = torch.rand(classes) + 0.1
    _compare_with_grad(lambda x: torch.nn.functional.nll_loss(x, target, weight, reduction=reduction),
                       lambda x: F.nll_loss(x, to_kael(target), to_kael(weight), reduction=reduction), tx, kx)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("shape", [(6, 5), (5,), (3, 5, 4)])
def test_cross_entropy_with_class_weights_and_indices(shape, label_smoothing, reduction):
    torch.manual_seed(1)
    classes = shape[0] if len(shape) == 1 else shape[1]
    tx, kx = _both(torch.randn(shape) * 3, requires_grad=True)
    target_shape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    target = torch.randint(0, classes, target_shape)
    if target.dim() > 0:
        target.view(-1)[0] = 3  # an ignored target (ignore_index=3 here, a class index)
    weight = torch.rand(classes) + 0.1
    kwargs = dict(ignore_index=3, reduction=reduction, label_smoothing=label_smoothing)
    _compare_with_grad(lambda x: torch.nn.functional.cross_entropy(x, target, weight, **kwargs),
                       lambda x: F.cross_entropy(x, to_kael(target), to_kael(weight), **kwargs), tx, kx)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("label_smoothing", [0.0, 0.3])
def test_cross_entropy_with_class_weights_and_probabilities(label_smoothing, reduction):
    torch.manual_seed(2)
    tx, kx = _both(torch.randn(4, 6, 3), requires_grad=True)
    target = torch.rand(4, 6, 3).softmax(1)
    weight = torch.rand(6) + 0.1
    kwargs = dict(reduction=reduction, label_smoothing=label_smoothing)
    _compare_with_grad(lambda x: torch.nn.functional.cross_entropy(x, target, weight, **kwargs),
                       lambda x: F.cross_entropy(x, to_kael(target), to_kael(weight), **kwargs), tx, kx)


def test_class_weights_of_the_wrong_size_raise_as_torch():
    x, target, weight = torch.randn(4, 5), torch.tensor([0, 1, 2, 3]), torch.ones(3)
    for tfn, kfn in ((torch.nn.functional.nll_loss, F.nll_loss), (torch.nn.functional.cross_entropy, F.cross_entropy)):
        with pytest.raises(RuntimeError) as torch_error:
            tfn(x, target, weight)
        with pytest.raises(RuntimeError) as kael_error:
            kfn(to_kael(x), to_kael(target), to_kael(weight))
        assert str(kael_error.value) == str(torch_error.value)


def test_weighted_modules_keep_the_weight_as_a_buffer():
    weight = torch.tensor([1.0, 2.0, 0.5])
    for name in ("CrossEntropyLoss", "NLLLoss"):
        tm, km = getattr(torch.nn, name)(weight=weight), getattr(nn, name)(weight=to_kael(weight))
        assert list(km.state_dict()) == list(tm.state_dict()) == ["weight"]
        assert list(getattr(nn, name)().state_dict()) == list(getattr(torch.nn, name)().state_dict()) == []
    x, target = torch.randn(4, 3), torch.tensor([0, 2, 1, 2])
    check(nn.CrossEntropyLoss(weight=to_kael(weight), label_smoothing=0.1)(to_kael(x), to_kael(target)),
          torch.nn.CrossEntropyLoss(weight=weight, label_smoothing=0.1)(x, target))
    check(nn.NLLLoss(weight=to_kael(weight), reduction="sum")(to_kael(x), to_kael(target)),
          torch.nn.NLLLoss(weight=weight, reduction="sum")(x, target))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_element_weights(name, reduction):
    torch.manual_seed(3)
    tx, kx = _both(torch.randn(4, 5) * 2, requires_grad=True)
    target, weight = torch.randn(4, 5), torch.rand(4, 5)
    _compare_with_grad(lambda x: getattr(torch.nn.functional, name)(x, target, reduction=reduction, weight=weight),
                       lambda x: getattr(F, name)(x, to_kael(target), reduction=reduction, weight=to_kael(weight)),
                       tx, kx)


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_element_weights_of_the_wrong_size_raise_as_torch(name):
    x, weight = torch.randn(4, 5), torch.ones(5)
    with pytest.raises(ValueError, match="Weights and input must have the same size."):
        getattr(torch.nn.functional, name)(x, x, weight=weight)
    with pytest.raises(ValueError, match="Weights and input must have the same size."):
        getattr(F, name)(to_kael(x), to_kael(x), weight=to_kael(weight))


LEGACY = [(None, False), (False, None), (False, True), (True, False), (True, True), (None, True)]


def _legacy_inputs(name):
    torch.manual_seed(4)
    x = torch.rand(4, 3) * 0.8 + 0.1
    if name in ("cross_entropy", "nll_loss"):
        return (x.log(), torch.tensor([0, 2, 1, 1]))
    if name in ("soft_margin_loss",):
        return (x, torch.tensor([[1.0, -1.0, 1.0]] * 4))
    if name == "margin_ranking_loss":
        return (x, torch.rand(4, 3), torch.tensor([[1.0, -1.0, 1.0]] * 4))
    if name == "kl_div":
        return (x.log(), torch.rand(4, 3))
    return (x, torch.rand(4, 3))


@pytest.mark.parametrize("size_average,reduce", LEGACY)
@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss",
                                  "binary_cross_entropy", "binary_cross_entropy_with_logits", "soft_margin_loss",
                                  "margin_ranking_loss", "kl_div"])
def test_size_average_and_reduce_decide_the_reduction_as_in_torch(name, size_average, reduce):
    inputs = _legacy_inputs(name)
    with warnings.catch_warnings(record=True) as torch_warnings:
        warnings.simplefilter("always")
        want = getattr(torch.nn.functional, name)(*inputs, size_average=size_average, reduce=reduce)
    with warnings.catch_warnings(record=True) as kael_warnings:
        warnings.simplefilter("always")
        got = getattr(F, name)(*[to_kael(t) for t in inputs], size_average=size_average, reduce=reduce)
    check(got, want)
    deprecation = [str(w.message) for w in torch_warnings if "size_average and reduce" in str(w.message)]
    assert deprecation and deprecation == [str(w.message) for w in kael_warnings
                                          if "size_average and reduce" in str(w.message)]


@pytest.mark.parametrize("name", ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "BCELoss",
                                  "BCEWithLogitsLoss", "SoftMarginLoss", "KLDivLoss"])
def test_loss_modules_take_the_legacy_pair(name):
    with pytest.warns(UserWarning, match="reduction='sum'"):
        tm = getattr(torch.nn, name)(size_average=False)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        km = getattr(nn, name)(size_average=False)
    assert km.reduction == tm.reduction == "sum"
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert getattr(nn, name)(reduce=False).reduction == "none"


def test_hardtanh_takes_its_old_keyword_names():
    with pytest.warns(FutureWarning, match="`min_value` is deprecated and renamed to `min_val`"):
        km = nn.Hardtanh(min_value=-0.5)
    with pytest.warns(FutureWarning, match="`max_value` is deprecated and renamed to `max_val`"):
        km2 = nn.Hardtanh(max_value=0.25)
    x = torch.linspace(-2, 2, 9)
    check(km(to_kael(x)), torch.nn.Hardtanh(min_val=-0.5)(x))
    check(km2(to_kael(x)), torch.nn.Hardtanh(max_val=0.25)(x))
    assert (km.min_val, km.max_val, km2.min_val, km2.max_val) == (-0.5, 1.0, -1.0, 0.25)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0])
def test_embedding_max_norm_renormalises_the_rows_it_reads_as_torch(norm_type):
    torch.manual_seed(5)
    weight = torch.randn(10, 4) * 2
    index = torch.tensor([[1, 3, 3], [7, 1, 0]])
    tw = weight.clone().requires_grad_(True)
    kw = to_kael(weight).requires_grad_(True)
    want = torch.nn.functional.embedding(index, tw, max_norm=1.5, norm_type=norm_type)
    got = F.embedding(to_kael(index), kw, max_norm=1.5, norm_type=norm_type)
    check(got, want.detach())
    check(kw.detach(), tw.detach())  # the rows read were renormalised in place, the others kept
    g = torch.randn(want.shape)
    want.backward(g)
    got.backward(to_kael(g))
    check(kw.grad, tw.grad)
    tm = torch.nn.Embedding.from_pretrained(weight.clone(), max_norm=0.5, norm_type=norm_type)
    km = nn.Embedding.from_pretrained(to_kael(weight), max_norm=0.5, norm_type=norm_type)
    assert repr(km) == repr(tm)
    check(km(to_kael(index)), tm(index))
    check(km.weight.detach(), tm.weight.detach())


@pytest.mark.parametrize("padding_idx", [None, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_scale_grad_by_freq_divides_each_rows_gradient_by_its_count_as_torch(padding_idx, dtype):
    torch.manual_seed(6)
    weight = torch.randn(8, 5, dtype=dtype)
    index = torch.tensor([[1, 3, 3, 3], [7, 1, 0, 3], [2, 2, 2, 2]])  # counts 1 to 6, an unused row
    tw = weight.clone().requires_grad_(True)
    kw = to_kael(weight).requires_grad_(True)
    want = torch.nn.functional.embedding(index, tw, padding_idx=padding_idx, scale_grad_by_freq=True)
    got = F.embedding(to_kael(index), kw, padding_idx=padding_idx, scale_grad_by_freq=True)
    check(got, want.detach())
    g = torch.randn(want.shape, dtype=dtype)
    want.backward(g)
    got.backward(to_kael(g))
    check(kw.grad, tw.grad)
    # the module, its repr, and a second call whose counts differ (a 1-d index)
    tm = torch.nn.Embedding(8, 5, padding_idx=padding_idx, scale_grad_by_freq=True, dtype=dtype)
    km = nn.Embedding(8, 5, padding_idx=padding_idx, scale_grad_by_freq=True)
    with torch.no_grad():
        tm.weight.copy_(weight)
    km.weight = nn.Parameter(to_kael(weight))
    assert repr(km) == repr(tm)
    for idx in (index, torch.tensor([5, 5, 1])):
        tm(idx).sum().backward()
        km(to_kael(idx)).sum().backward()
    check(km.weight.grad, tm.weight.grad)


def test_embedding_scale_grad_by_freq_without_grad_and_sparse_refused():
    w = kael.randn(4, 2)
    out = F.embedding(kael.tensor([1, 1, 2]), w, scale_grad_by_freq=True)  # no gradient: a plain lookup
    check(out, torch.nn.functional.embedding(torch.tensor([1, 1, 2]), torch.tensor(w.tolist())))
    with pytest.raises(NotImplementedError, match="sparse"):
        F.embedding(kael.tensor([1]), w, sparse=True)
    with pytest.raises(NotImplementedError, match="sparse"):
        nn.Embedding(4, 2, sparse=True)
