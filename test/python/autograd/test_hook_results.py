"""What a gradient hook may return, against torch: None keeps the gradient, a tensor of the
same dtype, device and size replaces it, anything else raises (never converted silently).

Every kind of hook kael has is swept: Tensor.register_hook on leaves and on non-leaves (also
together with retain_grad, whose .grad sees the hook's result), hooks registered from a
Module's forward. kael has no Node hooks (grad_fn.register_hook / register_prehook), no
register_post_accumulate_grad_hook and no Module backward hooks.
"""

import functools

import pytest
import torch

import kael


def named_hook(fn, name):
    fn.__name__ = name
    return fn


class CallableHook:
    """A hook without __name__: torch calls it '<unknown>'."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, g):
        return self.fn(g)


# (id, hook factory(lib) -> callable): each returns a bad replacement of the gradient
BAD_RESULTS = {
    "float64": lambda lib: (lambda g: g.double()),
    "int64": lambda lib: (lambda g: g.long()),
    "float16": lambda lib: (lambda g: g.half()),
    "bool": lambda lib: (lambda g: g > 0),
    "0-d": lambda lib: (lambda g: g.sum()),
    "bigger": lambda lib: (lambda g: lib.ones(4)),
    "broadcastable": lambda lib: (lambda g: g[:1]),
    "extra-dim": lambda lib: (lambda g: g.unsqueeze(0)),
    "named": lambda lib: named_hook(lambda g: g.double(), "my_hook"),
    "no-name": lambda lib: CallableHook(lambda g: g.double()),
    "partial": lambda lib: functools.partial(lambda extra, g: g[:1], 1),
    "double-and-shape": lambda lib: (lambda g: lib.ones(5, dtype=lib.float64)),
}

GOOD_RESULTS = {
    "same": lambda lib: (lambda g: g * 2),
    "none": lambda lib: (lambda g: None),
    "non-contiguous": lambda lib: (lambda g: lib.stack([g * 3, g], dim=-1)[..., 0]),
    "new-tensor": lambda lib: (lambda g: lib.full(tuple(g.shape), 7.0)),
}


def leaf_case(lib, hook):
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a.register_hook(hook)
    (a * a).sum().backward()
    return a.grad


def nonleaf_case(lib, hook):
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2
    b.register_hook(hook)
    (b * b).sum().backward()
    return a.grad


def retain_grad_case(lib, hook):
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2
    b.retain_grad()
    b.register_hook(hook)
    (b * b).sum().backward()
    return b.grad, a.grad


def retain_grad_first_hook_later_case(lib, hook):
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2
    b.register_hook(hook)
    b.retain_grad()
    (b * b).sum().backward()
    return b.grad, a.grad


def grad_case(lib, hook):
    """autograd.grad runs the non-leaf hooks on the way to its inputs."""
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2
    b.register_hook(hook)
    return lib.autograd.grad((b * b).sum(), a)


def module_case(lib, hook):
    """A hook registered on a Module's output from a forward hook, and on a parameter."""
    lin = lib.nn.Linear(3, 3)
    with lib.no_grad():
        lin.weight.copy_(lib.eye(3))
        lin.bias.zero_()
    lin.register_forward_hook(lambda mod, args, out: out.register_hook(hook) and None)
    x = lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]], requires_grad=True)
    (lin(x) ** 2).sum().backward()
    return x.grad


def parameter_case(lib, hook):
    lin = lib.nn.Linear(3, 3)
    with lib.no_grad():
        lin.weight.copy_(lib.eye(3))
        lin.bias.zero_()
    lin.weight.register_hook(hook)
    (lin(lib.ones(2, 3)) ** 2).sum().backward()
    return lin.weight.grad


CASES = {
    "leaf": leaf_case,
    "non-leaf": nonleaf_case,
    "retain_grad": retain_grad_case,
    "retain_grad-after-hook": retain_grad_first_hook_later_case,
    "autograd.grad": grad_case,
    "module-output": module_case,
    "parameter": parameter_case,
}


def run(lib, case, hook_factory):
    try:
        return "ok", case(lib, hook_factory(lib))
    except Exception as e:  # noqa: BLE001 - the class and message are compared
        return type(e), str(e)


def torch_message_in_kael_terms(msg):
    return msg.replace("torch.", "kael.")


@pytest.mark.parametrize("hook_id", sorted(BAD_RESULTS))
@pytest.mark.parametrize("case_id", sorted(CASES))
def test_bad_hook_result_raises_as_torch(case_id, hook_id):
    case, factory = CASES[case_id], BAD_RESULTS[hook_id]
    tk, kk = run(torch, case, factory), run(kael, case, factory)
    assert tk[0] != "ok", f"torch accepted {hook_id} in {case_id}"
    assert kk[0] is tk[0], f"{case_id}/{hook_id}: kael {kk}, torch {tk}"
    assert kk[1] == torch_message_in_kael_terms(tk[1])


@pytest.mark.parametrize("hook_id", sorted(GOOD_RESULTS))
@pytest.mark.parametrize("case_id", sorted(CASES))
def test_good_hook_result_replaces_gradient_as_torch(case_id, hook_id):
    case, factory = CASES[case_id], GOOD_RESULTS[hook_id]
    tk, kk = run(torch, case, factory), run(kael, case, factory)
    assert tk[0] == "ok", tk
    assert kk[0] == "ok", kk
    t_out = tk[1] if isinstance(tk[1], tuple) else (tk[1],)
    k_out = kk[1] if isinstance(kk[1], tuple) else (kk[1],)
    assert len(t_out) == len(k_out)
    for t, k in zip(t_out, k_out):
        assert str(k.dtype).split(".")[1] == str(t.dtype).split(".")[1]
        assert tuple(k.shape) == tuple(t.shape)
        assert k.reshape(-1).tolist() == pytest.approx(t.reshape(-1).tolist())


def test_non_tensor_result_is_type_error_naming_the_hook():
    for lib in (torch, kael):
        a = lib.ones(3, requires_grad=True)
        a.register_hook(named_hook(lambda g: 1, "returns_int"))
        with pytest.raises(TypeError) as info:
            (a * 2).sum().backward()
        if lib is kael:
            assert str(info.value).startswith("hook 'returns_int'")


def test_failed_hook_leaves_grad_untouched_and_graph_reusable():
    for lib in (torch, kael):
        a = lib.ones(3, requires_grad=True)
        h = a.register_hook(lambda g: g.double())
        y = (a * 2).sum()
        with pytest.raises(RuntimeError):
            y.backward(retain_graph=True)
        assert a.grad is None
        h.remove()
        y.backward()
        assert a.grad.tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("returns", ["float32", "int64", "bool", "bfloat16", "float64-shape"])
def test_float64_gradient_replaced_by_another_type_raises_as_torch(returns):
    def run_one(lib):
        hooks = {"float32": lambda g: g.float(), "int64": lambda g: g.long(), "bool": lambda g: g != 0,
                 "bfloat16": lambda g: g.bfloat16(), "float64-shape": lambda g: g[:2]}
        a = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        b = a * 2
        b.register_hook(hooks[returns])
        try:
            b.sum().backward()
        except Exception as e:  # noqa: BLE001
            return type(e), str(e)
        return "ok", None

    tk, kk = run_one(torch), run_one(kael)
    assert tk[0] is RuntimeError
    assert kk == (tk[0], torch_message_in_kael_terms(tk[1]))
