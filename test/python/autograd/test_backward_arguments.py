"""Tensor.backward and kael.autograd.backward/grad read their arguments as torch does, in C++.

Tensor.backward runs the engine from C++ (its method and run_backward, both in
csrc/autograd_engine.cpp) with no Python code in between; kael.autograd.backward and grad hand
their arguments to the same reader. Each case is run in kael and torch: the same exception class,
or the same gradients.
"""
import sys

import pytest
import torch

import kael

CASES = {
    "defaults": lambda L, y, x: y.backward(),
    "gradient_tensor": lambda L, y, x: y.backward(L.tensor(2.0)),
    "gradient_list": lambda L, y, x: y.backward([L.tensor(2.0)]),
    "gradient_list_extra_junk": lambda L, y, x: y.backward([L.tensor(2.0), "x"]),
    "gradient_generator": lambda L, y, x: y.backward(g for g in [L.tensor(3.0)]),
    "gradient_junk": lambda L, y, x: y.backward("x"),
    "gradient_int": lambda L, y, x: y.backward(3),
    "gradient_empty": lambda L, y, x: y.backward([]),
    "retain_str": lambda L, y, x: y.backward(retain_graph="x"),
    "retain_int": lambda L, y, x: y.backward(retain_graph=2),
    "retain_256": lambda L, y, x: y.backward(retain_graph=256),
    "retain_negative": lambda L, y, x: y.backward(retain_graph=-1),
    "retain_float": lambda L, y, x: y.backward(retain_graph=1.5),
    "create_str": lambda L, y, x: y.backward(create_graph="x"),
    "create_none": lambda L, y, x: y.backward(create_graph=None),
    "create_then_again": lambda L, y, x: (y.backward(create_graph=True), y.backward()),
    "retain_then_again": lambda L, y, x: (y.backward(retain_graph=True), y.backward()),
    "twice": lambda L, y, x: (y.backward(), y.backward()),
    "inputs_tensor": lambda L, y, x: y.backward(inputs=x),
    "inputs_list": lambda L, y, x: y.backward(inputs=[x]),
    "inputs_empty": lambda L, y, x: y.backward(inputs=[]),
    "inputs_int": lambda L, y, x: y.backward(inputs=3),
    "every_argument_by_position": lambda L, y, x: y.backward(None, None, False, [x]),
    "one_argument_too_many": lambda L, y, x: y.backward(None, None, False, None, 1),
    "unknown_keyword": lambda L, y, x: y.backward(foo=1),
    "no_grad_anywhere": lambda L, y, x: L.ones(2).sum().backward(),
    "not_a_scalar": lambda L, y, x: (x * 2).backward(),
    "function_inputs_empty": lambda L, y, x: L.autograd.backward(y, inputs=[]),
    "function_retain_str": lambda L, y, x: L.autograd.backward([y], retain_graph="x"),
    "grad_retain_str": lambda L, y, x: L.autograd.grad(y, x, retain_graph="x"),
    "grad_allow_unused_str": lambda L, y, x: L.autograd.grad(y, x, allow_unused="x"),
    "grad_allow_unused_none": lambda L, y, x: L.autograd.grad(y, x, allow_unused=None),
    "grad_inputs_empty": lambda L, y, x: L.autograd.grad(y, []),
    "grad_outputs_none": lambda L, y, x: L.autograd.grad(None, x),
}


def _outcome(lib, case):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    try:
        r = CASES[case](lib, y, x)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)
    grads = [t.tolist() for t in r] if isinstance(r, tuple) and r and hasattr(r[0], "tolist") else None
    return (None if x.grad is None else x.grad.tolist(), grads)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("case", list(CASES))
def test_backward_arguments_as_torch(case):
    assert _outcome(kael, case) == _outcome(torch, case)


def test_flag_messages_name_the_flag_and_value():
    y = (kael.ones(2, requires_grad=True) * 2).sum()
    with pytest.raises(TypeError, match="^retain_graph must be a bool, got str$"):
        y.backward(retain_graph="x")
    with pytest.raises(OverflowError, match="^create_graph must be a bool, got 256$"):
        y.backward(retain_graph=True, create_graph=256)
    with pytest.raises(RuntimeError, match="^backward: got 1 tensors and 0 gradients$"):
        y.backward([])
    with pytest.raises(TypeError, match="^backward: gradients can be either Tensors or None, but got str$"):
        y.backward("x")


def test_inputs_that_are_not_tensors():
    # torch raises RuntimeError ("all inputs have to be Tensors or GradientEdges"); kael keeps its
    # TypeError naming the position (it has no GradientEdge)
    x = kael.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="^backward: expected a Tensor at position 0, got NoneType$"):
        (x * 2).sum().backward(inputs=[None])
    with pytest.raises(TypeError, match="^backward: expected Tensors, got str$"):
        (x * 2).sum().backward(inputs=["x"])


def test_tensor_backward_runs_no_python_code():
    # Tensor.backward used to call kael.autograd's Python functions (an import, a getattr and
    # three Python frames per call); now nothing in Python runs between the call and the engine
    x = kael.ones(3, requires_grad=True)
    y = (x * x).sum()
    calls = []
    sys.setprofile(lambda frame, event, arg: calls.append(frame.f_code.co_name) if event == "call" else None)
    try:
        y.backward()
    finally:
        sys.setprofile(None)
    assert calls == []
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_tensor_backward_override_receives_tensor_backward():
    # Note [__kael_function__]: a subclass's override still sees Tensor.backward and its arguments
    seen = []

    class Sub(kael.Tensor):
        @classmethod
        def __kael_function__(cls, func, types, args=(), kwargs=None):
            if func is kael.Tensor.backward:
                seen.append((len(args), dict(kwargs or {})))
            return super().__kael_function__(func, types, args, kwargs)

    x = kael.ones(2, requires_grad=True)
    y = (x * 3).sum().as_subclass(Sub)
    y.backward(retain_graph=True)
    assert seen == [(1, {"retain_graph": True})]
    assert x.grad.tolist() == [3.0, 3.0]
