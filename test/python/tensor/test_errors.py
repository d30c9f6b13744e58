"""Error contracts: exception classes and message fragments."""

import pytest
import torch

import kael
from helpers import KAEL_ERRORS, compare_raises


def t34():
    return kael.ones(3, 4)


# ------------------------------------------------------ wrong arg types ---
@pytest.mark.parametrize("name,call", [
    ("add", lambda: kael.add(t34(), "x")),
    ("add", lambda: kael.add(t34(), None)),
    ("add", lambda: t34().add("x")),
    ("sub", lambda: kael.sub(t34(), [1])),
    ("mul", lambda: kael.mul(t34(), "x")),
    ("div", lambda: kael.div(t34(), object())),
    ("pow", lambda: kael.pow(t34(), "2")),
    ("maximum", lambda: kael.maximum(t34(), "x")),
    ("eq", lambda: kael.eq(t34(), "x")),
    ("exp", lambda: kael.exp("x")),
    ("neg", lambda: kael.neg([1, 2])),
    ("zeros", lambda: kael.zeros("a")),
    ("zeros", lambda: kael.zeros(2, "a")),
    ("ones", lambda: kael.ones("a")),
    ("empty", lambda: kael.empty(None)),
    ("full", lambda: kael.full((2,), "x")),
    ("view", lambda: t34().view(object())),
    ("view", lambda: t34().view(2.5, 4)),
    ("reshape", lambda: t34().reshape("x")),
    ("sum", lambda: kael.sum(t34(), dim="x")),
    ("sum", lambda: t34().sum(dim=1.5)),
    ("mean", lambda: kael.mean(t34(), dim="x")),
    ("matmul", lambda: kael.matmul(t34(), 3)),
    ("matmul", lambda: kael.matmul("a", t34())),
    ("transpose", lambda: t34().transpose("a", 0)),
    ("permute", lambda: t34().permute("a", "b")),
    ("unsqueeze", lambda: t34().unsqueeze("a")),
    ("narrow", lambda: t34().narrow(0, "a", 1)),
    ("select", lambda: t34().select(0, "a")),
    ("expand", lambda: t34().expand("a", 4)),
], ids=lambda x: x if isinstance(x, str) else "")
def test_wrong_argument_types_raise_type_error_naming_op(name, call):
    with pytest.raises(TypeError) as ei:
        call()
    assert f"{name}(" in str(ei.value), f"message should name the op: {ei.value}"


def test_torch_also_rejects_those_argument_types():
    with pytest.raises(TypeError):
        torch.add(torch.ones(3, 4), "x")
    with pytest.raises(TypeError):
        torch.zeros("a")
    with pytest.raises(TypeError):
        torch.ones(3, 4).view(object())
    with pytest.raises(TypeError):
        torch.sum(torch.ones(3, 4), dim="x")
    with pytest.raises(TypeError):
        torch.matmul(torch.ones(3, 4), 3)


# ------------------------------------------------------- broadcasting ---
@pytest.mark.parametrize("call", [
    lambda a, b: kael.add(a, b),
    lambda a, b: kael.mul(a, b),
    lambda a, b: kael.div(a, b),
    lambda a, b: kael.pow(a, b),
    lambda a, b: kael.maximum(a, b),
    lambda a, b: kael.minimum(a, b),
    lambda a, b: kael.eq(a, b),
    lambda a, b: kael.lt(a, b),
    lambda a, b: a - b,
    lambda a, b: a * b,
    lambda a, b: a >= b,
    lambda a, b: a.add_(b),
    lambda a, b: a.sub(b),
], ids=["add", "mul", "div", "pow", "maximum", "minimum", "eq", "lt", "op_sub", "op_mul", "op_ge", "add_", "sub"])
@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((2, 3), (3, 2)), ((2, 3, 4), (5, 4)), ((0,), (2,))], ids=str)
def test_non_broadcastable_shapes_raise_runtime_error_as_torch(call, sa, sb):
    with pytest.raises(RuntimeError):
        torch.add(torch.ones(sa), torch.ones(sb))
    with pytest.raises(RuntimeError, match="broadcastable") as info:
        call(kael.ones(sa), kael.ones(sb))
    assert type(info.value) is RuntimeError


def test_expand_to_incompatible_shape_raises():
    compare_raises(lambda lib, x: x.expand(4), ((3,), "float32"))
    compare_raises(lambda lib, x: x.expand(2, 2), ((3, 2), "float32"))


# ---------------------------------------------------------- dims / index ---
@pytest.mark.parametrize("call", [
    lambda lib, t: t.sum(dim=5),
    lambda lib, t: t.sum(dim=-4),
    lambda lib, t: t.sum(dim=(0, 3)),
    lambda lib, t: lib.sum(t, dim=2),
    lambda lib, t: t.mean(dim=2),
    lambda lib, t: t.transpose(0, 7),
    lambda lib, t: t.transpose(-3, 0),
    lambda lib, t: t.select(3, 0),
    lambda lib, t: t.unsqueeze(9),
    lambda lib, t: t.unsqueeze(-4),
    lambda lib, t: t.squeeze(2),
    lambda lib, t: t.narrow(2, 0, 1),
    lambda lib, t: t.flatten(0, 2),
    lambda lib, t: t.size(2),
    lambda lib, t: t.stride(-3),
], ids=["sum5", "sum-4", "sum_tuple", "module_sum2", "mean2", "transpose7", "transpose-3", "select3", "unsqueeze9",
        "unsqueeze-4", "squeeze2", "narrow2", "flatten_end2", "size2", "stride-3"])
def test_out_of_range_dims_raise_index_error(call):
    with pytest.raises(IndexError):
        call(torch, torch.ones(3, 4))
    with pytest.raises(IndexError):
        call(kael, kael.ones(3, 4))


@pytest.mark.parametrize("call", [
    lambda: kael.zeros(2)[5],
    lambda: kael.zeros(2)[-3],
    lambda: kael.zeros(2, 3)[0, 3],
    lambda: kael.zeros(2, 3)[:, -4],
    lambda: kael.zeros(4, 5).select(1, 5),
    lambda: kael.zeros(4, 5).select(0, -5),
], ids=["pos", "neg", "second_dim", "second_dim_neg", "select", "select_neg"])
def test_out_of_range_index_raises_index_error(call):
    with pytest.raises(IndexError, match="out of range"):
        call()


def test_too_many_indices_raise():
    with pytest.raises(IndexError):
        torch.zeros(2)[0, 0]
    with pytest.raises((IndexError, ValueError)):
        kael.zeros(2)[0, 0]
    with pytest.raises((IndexError, ValueError)):
        kael.tensor(1.0)[0]


def test_narrow_out_of_bounds_raises():
    compare_raises(lambda lib, x: x.narrow(1, 3, 3), ((3, 4), "float32"))
    compare_raises(lambda lib, x: x.narrow(0, 0, -1), ((3, 4), "float32"))


# ------------------------------------------------------------ dtype strings ---
@pytest.mark.parametrize("bad", ["float8", "float128", "xyz", "", "Float32", "half"])
def test_unknown_dtype_name_raises_value_error(bad):
    with pytest.raises(ValueError):
        kael.zeros(2, dtype=bad)
    with pytest.raises(ValueError):
        kael.tensor([1, 2], dtype=bad)
    with pytest.raises(RuntimeError):  # not a dtype name, so a device string, as in torch
        torch.ones(2).to(bad)
    with pytest.raises(RuntimeError, match="device: "):
        kael.ones(2).to(bad)


@pytest.mark.parametrize("bad", [3, 1.5, [kael.float32], torch.float32])
def test_non_dtype_object_raises_type_error(bad):
    with pytest.raises(TypeError):
        kael.zeros(2, dtype=bad)
    with pytest.raises(TypeError):
        kael.full((2,), 1.0, dtype=bad)


# ------------------------------------------------------------------ device ---
@pytest.mark.parametrize("factory", [lambda **kw: kael.zeros(2, **kw), lambda **kw: kael.ones((2, 2), **kw),
                                     lambda **kw: kael.empty(3, **kw), lambda **kw: kael.full((2,), 1.0, **kw),
                                     lambda **kw: kael.arange(3, **kw), lambda **kw: kael.eye(2, **kw)],
                         ids=["zeros", "ones", "empty", "full", "arange", "eye"])
def test_device_cuda_without_backend_raises_runtime_error(factory):
    with pytest.raises(RuntimeError, match="CUDA"):
        factory(device="cuda")
    assert factory(device="cpu").device == "cpu"


@pytest.mark.parametrize("bad", ["tpu", "cpu:x", "", "gpu"])
def test_invalid_device_string_raises_runtime_error(bad):
    with pytest.raises(RuntimeError):  # as torch
        torch.zeros(2, device=bad)
    with pytest.raises(RuntimeError, match="device: "):
        kael.zeros(2, device=bad)


# ---------------------------------------------------- foreign operands ---
@pytest.mark.parametrize("expr", [
    lambda t: t + "x", lambda t: "x" + t, lambda t: t + [1, 2], lambda t: [1, 2] + t, lambda t: t - None,
    lambda t: t * "x", lambda t: t / {}, lambda t: t ** "2", lambda t: t @ "x", lambda t: t < "x",
    lambda t: t >= [1], lambda t: "x" @ t,
], ids=["add_str", "radd_str", "add_list", "radd_list", "sub_none", "mul_str", "div_dict", "pow_str", "matmul_str",
        "lt_str", "ge_list", "rmatmul_str"])
def test_foreign_operands_raise_type_error(expr):
    with pytest.raises(TypeError):
        expr(kael.ones(2))


def test_binary_dunders_return_not_implemented_for_foreign_types():
    t = kael.ones(2)
    assert t.__add__("x") is NotImplemented
    assert t.__mul__([1, 2]) is NotImplemented
    assert t.__radd__("x") is NotImplemented


def test_eq_with_foreign_operand_is_false_not_error():
    t = kael.ones(2)
    assert (t == "x") is False
    assert (t != "x") is True
    assert (t == None) is False  # noqa: E711


def test_augmented_assignment_with_foreign_operand_raises_type_error():
    t = kael.ones(2)
    with pytest.raises(TypeError):
        t += "x"


# ---------------------------------------------------------------- bool() ---
@pytest.mark.parametrize("shape", [(3,), (2, 2), (0,)], ids=str)
def test_bool_of_multi_element_tensor_is_ambiguous(shape):
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(kael.zeros(shape))
    with pytest.raises(RuntimeError):
        bool(torch.zeros(shape))


def test_if_on_tensor_is_ambiguous():
    with pytest.raises(RuntimeError, match="ambiguous"):
        if kael.ones(2) > 0:
            pass


# ----------------------------------------------------- dtype-combination ---
@pytest.mark.parametrize("call", [
    lambda lib: lib.neg(lib.tensor([True, False])),
    lambda lib: -lib.tensor([True]),
    lambda lib: lib.sub(lib.tensor([True]), lib.tensor([False])),
    lambda lib: lib.tensor([True]) - lib.tensor([True]),
    lambda lib: lib.pow(lib.tensor([2, 3]), -1),
    lambda lib: lib.tensor([2]) ** -2,
    lambda lib: lib.abs(lib.tensor([True])),
    lambda lib: lib.tensor([1, 2]).add_(1.5),
    lambda lib: lib.tensor([1, 2]).div_(2),
    lambda lib: lib.tensor([True]).add_(1),
    lambda lib: lib.tensor([1, 2]).exp_(),
    lambda lib: lib.tensor([1, 2]).add(lib.tensor([1, 2]), alpha=0.5),
    lambda lib: lib.tensor([1, 2]).mean(),
    lambda lib: lib.tensor([True, False]).mean(),
    lambda lib: lib.ones(2, 2).add_(lib.ones(3, 2, 2)),
], ids=["neg_bool", "op_neg_bool", "sub_bool", "op_sub_bool", "int_pow_neg", "op_int_pow_neg", "abs_bool",
        "int_add_float_inplace", "int_div_inplace", "bool_add_int_inplace", "int_exp_inplace",
        "int_float_alpha", "mean_int", "mean_bool", "inplace_shape_grow"])
def test_torch_rejected_dtype_combinations_raise_in_kael(call):
    with pytest.raises(Exception):
        call(torch)
    with pytest.raises(KAEL_ERRORS):
        call(kael)


def test_mean_of_int64_raises_runtime_error():
    with pytest.raises(RuntimeError):
        kael.tensor([1, 2, 3]).mean()


# -------------------------------------------------------- misc factories ---
@pytest.mark.parametrize("call", [
    lambda lib: lib.zeros(-1),
    lambda lib: lib.ones(2, -3),
    lambda lib: lib.empty((-2,)),
    lambda lib: lib.arange(0, 5, 0),
    lambda lib: lib.arange(5, 0, 1),
    lambda lib: lib.eye(-1),
    lambda lib: lib.arange(0, float("inf")),
], ids=["zeros_neg", "ones_neg", "empty_neg", "arange_zero_step", "arange_wrong_sign", "eye_neg", "arange_inf"])
def test_invalid_factory_arguments_raise(call):
    with pytest.raises(Exception):
        call(torch)
    with pytest.raises(KAEL_ERRORS):
        call(kael)


def test_view_incompatible_strides_runtime_error():
    with pytest.raises(RuntimeError):
        kael.ones(2, 3).T.view(6)


def test_negative_step_value_error():
    with pytest.raises(ValueError):
        kael.ones(5)[::-1]


def test_errors_leave_library_usable():
    for bad in (lambda: kael.add(kael.ones(3), kael.ones(4)), lambda: kael.zeros("a"), lambda: kael.ones(2)[7]):
        with pytest.raises((RuntimeError, TypeError, IndexError)):
            bad()
    assert (kael.ones(2) + 1).tolist() == [2.0, 2.0]
