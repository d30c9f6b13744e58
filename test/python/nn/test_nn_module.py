"""kael.nn.Module and Parameter: registration, traversal, state_dict, modes, hooks, repr, to()."""
import math
from collections import OrderedDict

import pytest
import torch

import kael
import kael.nn as nn
from helpers import check, to_kael


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(3, 4)
        self.second = nn.Linear(4, 2)
        self.register_buffer("count", kael.zeros(2))

    def forward(self, x):
        return self.second(self.first(x))


class TorchPair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(3, 4)
        self.second = torch.nn.Linear(4, 2)
        self.register_buffer("count", torch.zeros(2))

    def forward(self, x):
        return self.second(self.first(x))


def copy_weights(torch_module, kael_module, strict=True):
    """Loads torch_module's state_dict into kael_module (through kael's load_state_dict)."""
    state = {k: to_kael(v) for k, v in torch_module.state_dict().items()}
    kael_module.load_state_dict(state, strict=strict)


# ------------------------------------------------------------------ Parameter


def test_parameter_is_a_tensor_subclass_sharing_storage():
    data = kael.randn(3, 2)
    p = nn.Parameter(data)
    assert isinstance(p, kael.Tensor) and type(p) is nn.Parameter
    assert p.data_ptr() == data.data_ptr()
    assert p.requires_grad is True
    assert nn.Parameter(data, requires_grad=False).requires_grad is False


def test_parameter_stays_a_parameter_through_in_place_ops():
    p = nn.Parameter(kael.zeros(3))
    with kael.no_grad():
        assert p.add_(1) is p
        assert p.mul_(2) is p
        assert type(p.uniform_(0, 1)) is nn.Parameter
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        p.add_(1)


def test_parameter_repr_like_torch():
    p = nn.Parameter(kael.tensor([1.0, 2.0]))
    assert repr(p).startswith("Parameter containing:\ntensor([1., 2.]")


def test_parameter_rejects_non_tensor():
    with pytest.raises(TypeError, match="Parameter"):
        nn.Parameter([1.0, 2.0])


# ------------------------------------------------------------------ registration


def test_setattr_registers_parameters_modules_and_buffers():
    m = Pair()
    assert list(m._modules) == ["first", "second"]
    assert list(m._buffers) == ["count"]
    m.extra = nn.Parameter(kael.zeros(1))
    assert "extra" in m._parameters
    assert [n for n, _ in m.named_parameters()] == ["extra", "first.weight", "first.bias", "second.weight",
                                                    "second.bias"]


def test_reassigning_a_parameter_with_a_tensor_or_module_raises_as_torch():
    for lib in (torch, kael):
        m = lib.nn.Linear(2, 2)
        with pytest.raises(TypeError, match="cannot assign .* as parameter 'bias'"):
            m.bias = lib.zeros(2)
        with pytest.raises(TypeError, match="cannot assign .* as parameter 'weight'"):
            m.weight = lib.nn.Linear(2, 2)
        assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]


def test_assignment_before_super_init_raises_with_hint():
    class Broken(nn.Module):
        def __init__(self):
            self.layer = nn.Linear(1, 1)
            super().__init__()

    with pytest.raises(AttributeError, match=r"super\(\).__init__\(\)"):
        Broken()


def test_register_buffer_and_parameter_checks_match_torch():
    for lib in (torch, kael):
        m = lib.nn.Module()
        with pytest.raises(KeyError):
            m.register_buffer("a.b", None)
        with pytest.raises(TypeError):
            m.register_buffer("x", 3)
        with pytest.raises(TypeError):
            m.register_parameter("p", lib.zeros(2))
        m.register_parameter("p", None)
        assert m.p is None
        assert list(m.named_parameters()) == []


def test_shared_parameters_appear_once():
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    m[1].weight = m[0].weight
    names = [n for n, _ in m.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.bias"]
    assert len(list(m.parameters())) == 3
    shared = nn.Linear(2, 2)
    outer = nn.Sequential(shared, shared)
    assert len(list(outer.parameters())) == 2
    assert [n for n, _ in outer.named_modules()] == ["", "0"]
    assert len(list(outer.modules())) == 2


def test_traversal_matches_torch():
    k, t = Pair(), TorchPair()
    assert [n for n, _ in k.named_modules()] == [n for n, _ in t.named_modules()]
    assert [n for n, _ in k.named_children()] == [n for n, _ in t.named_children()]
    assert [n for n, _ in k.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in k.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [type(c).__name__ for c in k.children()] == [type(c).__name__ for c in t.children()]
    assert len(list(k.buffers())) == 1


# ------------------------------------------------------------------ state_dict


def test_state_dict_keys_and_values_match_torch():
    k, t = Pair(), TorchPair()
    copy_weights(t, k)
    assert list(k.state_dict()) == list(t.state_dict())
    for (kn, kv), (tn, tv) in zip(k.state_dict().items(), t.state_dict().items()):
        check(kv, tv)
        assert type(kv) is kael.Tensor  # detached, not the Parameter


def test_load_state_dict_restores_buffers():
    source = Pair()
    source.count.fill_(7)
    target = Pair()
    target.load_state_dict(source.state_dict())
    assert target.count.tolist() == [7.0, 7.0]
    assert target.first.weight.tolist() == source.first.weight.tolist()


def test_load_state_dict_copies_in_place_keeping_identity():
    m = Pair()
    weight = m.first.weight
    m.load_state_dict(Pair().state_dict())
    assert m.first.weight is weight


def test_load_state_dict_missing_and_unexpected_keys():
    m = Pair()
    state = m.state_dict()
    del state["second.bias"]
    before = m.first.weight.tolist()
    with pytest.raises(KeyError, match="second.bias"):
        m.load_state_dict({k: v + 1 for k, v in state.items()})
    assert m.first.weight.tolist() == before  # nothing written before the check
    result = m.load_state_dict(state, strict=False)
    assert result.missing_keys == ["second.bias"] and result.unexpected_keys == []
    state = m.state_dict()
    state["bogus"] = kael.zeros(1)
    with pytest.raises(KeyError, match="bogus"):
        m.load_state_dict(state)
    # torch reports both as a RuntimeError; kael raises KeyError (the chapter's contract)
    with pytest.raises(RuntimeError, match="Unexpected key"):
        TorchPair().load_state_dict({**TorchPair().state_dict(), "bogus": torch.zeros(1)})


def test_load_state_dict_shape_mismatch_raises_value_error_before_writing():
    m = Pair()
    state = Pair().state_dict()
    state["second.weight"] = kael.zeros(3, 3)
    before = m.first.weight.tolist()
    with pytest.raises(ValueError, match=r"size mismatch for 'second.weight'.*\[3, 3\].*\[2, 4\]"):
        m.load_state_dict(state)
    assert m.first.weight.tolist() == before


def test_non_persistent_buffers_stay_out_of_state_dict():
    for lib in (torch, kael):
        m = lib.nn.Module()
        m.register_buffer("a", lib.zeros(1))
        m.register_buffer("b", lib.zeros(1), persistent=False)
        assert list(m.state_dict()) == ["a"]
        assert [n for n, _ in m.named_buffers()] == ["a", "b"]


# ------------------------------------------------------------------ modes, apply, to, zero_grad


def test_train_eval_propagate():
    m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    assert m.training and m[1].training
    assert m.eval() is m
    assert not m.training and not m[1].training
    m.train()
    assert m[1].training
    with pytest.raises(ValueError):
        m.train("yes")


def test_dropout_is_identity_in_eval_mode():
    x = kael.randn(50)
    d = nn.Dropout(0.5).eval()
    assert d(x) is x


def test_apply_visits_children_first():
    k = Pair()
    t = TorchPair()
    order_k, order_t = [], []
    k.apply(lambda m: order_k.append(type(m).__name__))
    t.apply(lambda m: order_t.append(type(m).__name__))
    assert order_k == ["Linear", "Linear", "Pair"] and order_t == ["Linear", "Linear", "TorchPair"]


def test_to_dtype_keeps_parameter_identity_and_converts_buffers():
    m = Pair()
    weight = m.first.weight
    values = weight.tolist()
    assert m.to(kael.float64) is m
    assert m.first.weight is weight
    assert type(weight) is nn.Parameter and weight.dtype is kael.float64
    assert weight.tolist() == values
    assert m.count.dtype is kael.float64
    assert m.double().first.weight is weight
    m.float()
    assert weight.dtype is kael.float32
    out = m(kael.randn(2, 3))
    assert out.dtype is kael.float32
    m.to("cpu")
    assert m.first.weight is weight
    with pytest.raises(TypeError, match="floating point"):
        m.to(kael.int64)


def test_to_leaves_integer_buffers_alone():
    m = nn.Module()
    m.register_buffer("steps", kael.zeros(1, dtype=kael.int64))
    m.to(kael.float64)
    assert m.steps.dtype is kael.int64


def test_zero_grad_sets_gradients_to_none_or_zero():
    m = nn.Linear(2, 2)
    m.weight.grad = kael.ones(2, 2)
    m.bias.grad = kael.ones(2)
    m.zero_grad(set_to_none=False)
    assert m.weight.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    m.zero_grad()
    assert m.weight.grad is None and m.bias.grad is None


# ------------------------------------------------------------------ hooks


def test_forward_hooks_and_pre_hooks():
    m = nn.Linear(2, 2)
    calls = []

    def pre(module, args):
        calls.append("pre")
        return (args[0] * 0,)

    def post(module, args, output):
        calls.append("post")
        return output + 1

    h1 = m.register_forward_pre_hook(pre)
    h2 = m.register_forward_hook(post)
    out = m(kael.randn(3, 2))
    assert calls == ["pre", "post"]
    check(out, torch.tensor(m.bias.tolist()).expand(3, 2) + 1)
    h1.remove()
    h2.remove()
    x = kael.randn(3, 2)
    check(m(x), torch.tensor(m.forward(x).tolist()))
    assert calls == ["pre", "post"]


def test_hook_returning_none_keeps_output():
    m = nn.Identity()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(out))
    x = kael.ones(2)
    assert m(x) is x and seen[0] is x


def test_missing_forward_raises_not_implemented():
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(kael.ones(1))


# ------------------------------------------------------------------ repr


def test_repr_matches_torch():
    def both(make):
        assert repr(make(kael)) == repr(make(torch))

    both(lambda lib: lib.nn.Linear(3, 4))
    both(lambda lib: lib.nn.Linear(3, 4, bias=False))
    both(lambda lib: lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Dropout(0.1),
                                       lib.nn.LayerNorm(4), lib.nn.GELU(approximate="tanh")))
    both(lambda lib: lib.nn.ModuleList([lib.nn.Tanh(), lib.nn.Sigmoid(), lib.nn.SiLU(), lib.nn.Identity()]))
    both(lambda lib: lib.nn.ModuleDict({"a": lib.nn.Softmax(dim=1), "b": lib.nn.LogSoftmax(dim=-1),
                                        "c": lib.nn.Flatten()}))
    both(lambda lib: lib.nn.Embedding(10, 3, padding_idx=2))
    both(lambda lib: lib.nn.MultiheadAttention(8, 2, batch_first=True))
    both(lambda lib: lib.nn.TransformerEncoderLayer(8, 2, 16, norm_first=True))
    both(lambda lib: lib.nn.CrossEntropyLoss())
    both(lambda lib: lib.nn.Sequential(OrderedDict(inner=lib.nn.Sequential(lib.nn.ReLU(inplace=True)))))
