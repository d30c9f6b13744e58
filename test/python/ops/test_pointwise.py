"""Pointwise ops: unary, binary, scalars, operators, in-place, promotion."""
import operator

import pytest
import torch

import kael
from helpers import DTYPE_NAMES, FLOAT_NAMES, NUMERIC_NAMES, check, compare, compare_raises, kdtype, make_pair, torch_dtype_name

UNARY_OPS = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu"]
UNARY_DOMAIN = {"log": "pos", "sqrt": "pos", "rsqrt": "pos"}
BINARY_OPS = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"]
# domain of (lhs, rhs) per op so that results are finite and well defined
BINARY_DOMAIN = {"div": ("any", "nonzero"), "pow": ("pos", "small")}

SHAPES = [(), (1,), (5,), (3, 4), (2, 3, 4), (0, 3), (2, 1, 3, 1)]
NONCONTIG = [((3, 4), "T"), ((2, 3, 4), "T"), ((3, 5), "transpose"), ((2, 3, 4), "transpose"),
             ((3, 4), "step"), ((2, 3, 5), "step"), ((4, 3), "expand"), ((3, 2, 4), "expand")]


def udom(op):
    return UNARY_DOMAIN.get(op, "any")


def bdom(op):
    return BINARY_DOMAIN.get(op, ("any", "any"))


# ------------------------------------------------------------------ unary ---
@pytest.mark.parametrize("op", UNARY_OPS)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_unary_function(op, dtype, shape):
    compare(lambda lib, x: getattr(lib, op)(x), (shape, dtype, "contig", udom(op)))


@pytest.mark.parametrize("op", UNARY_OPS)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_unary_method(op, dtype):
    compare(lambda lib, x: getattr(x, op)(), ((4, 3), dtype, "contig", udom(op)))


@pytest.mark.parametrize("op", UNARY_OPS)
@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
@pytest.mark.parametrize("shape,layout", NONCONTIG, ids=str)
def test_unary_noncontiguous_input(op, dtype, shape, layout):
    compare(lambda lib, x: getattr(lib, op)(x), (shape, dtype, layout, udom(op)))


@pytest.mark.parametrize("op", UNARY_OPS)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("shape,layout", [((3, 4), "contig"), ((), "contig"), ((3, 4), "T"),
                                          ((2, 3, 4), "transpose"), ((3, 5), "step")], ids=str)
def test_unary_inplace(op, dtype, shape, layout):
    # int/bool self with a float result (exp_, ...) must raise, as in torch
    compare(lambda lib, x: getattr(x, op + "_")(), (shape, dtype, layout, udom(op)), check_same=0)


def test_unary_special_values():
    data = [0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan"), 80.0, -80.0, 1e-30]
    for op in UNARY_OPS:
        for dt in ("float32", "float64"):
            k = getattr(kael, op)(kael.tensor(data, dtype=dt))
            t = getattr(torch, op)(torch.tensor(data, dtype=getattr(torch, dt)))
            check(k, t)


@pytest.mark.parametrize("op", ["exp", "sigmoid", "tanh", "sin", "sqrt"])
def test_unary_int_input_promotes_to_float32(op):
    k = getattr(kael, op)(kael.tensor([1, 2, 3]))
    assert k.dtype is kael.float32
    check(k, getattr(torch, op)(torch.tensor([1, 2, 3])))


def test_unary_larger_tensor():
    for op in UNARY_OPS:
        compare(lambda lib, x: getattr(lib, op)(x), ((257, 33), "float32", "contig", udom(op)))


# ----------------------------------------------------------------- binary ---
BCAST = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((4,), (2, 3, 4)), ((), (3,)),
         ((3,), ()), ((), ()), ((0, 3), (3,)), ((0, 3), (1, 3)), ((2, 1, 3), (4, 1)),
         ((5,), (1,)), ((1, 1), (2, 3)), ((2, 1, 4, 1), (3, 1, 5))]


@pytest.mark.parametrize("op", BINARY_OPS)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("sa,sb", BCAST, ids=str)
def test_binary_function_broadcasting(op, dtype, sa, sb):
    da, db = bdom(op)
    compare(lambda lib, a, b: getattr(lib, op)(a, b), (sa, dtype, "contig", da), (sb, dtype, "contig", db))


@pytest.mark.parametrize("op", BINARY_OPS)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_binary_method(op, dtype):
    da, db = bdom(op)
    compare(lambda lib, a, b: getattr(a, op)(b), ((3, 4), dtype, "contig", da), ((4,), dtype, "contig", db))


@pytest.mark.parametrize("op", BINARY_OPS)
@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
@pytest.mark.parametrize("sa,la,sb,lb", [
    ((3, 4), "T", (3, 4), "contig"),
    ((3, 4), "contig", (3, 4), "T"),
    ((3, 4), "T", (3, 4), "T"),
    ((2, 3, 4), "transpose", (3, 4), "step"),
    ((3, 5), "step", (3, 5), "transpose"),
    ((4, 3), "expand", (4, 3), "step"),
    ((2, 3, 4), "T", (4,), "step"),
], ids=str)
def test_binary_noncontiguous_inputs(op, dtype, sa, la, sb, lb):
    da, db = bdom(op)
    compare(lambda lib, a, b: getattr(lib, op)(a, b), (sa, dtype, la, da), (sb, dtype, lb, db))


SCALARS = [2, -3, 0, 2.5, -0.5, True, False]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge"])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
def test_binary_tensor_scalar(op, dtype, scalar):
    if op == "div" and scalar in (0, False):
        scalar = 4
    compare(lambda lib, a: getattr(lib, op)(a, scalar), ((3, 4), dtype))
    compare(lambda lib, a: getattr(a, op)(scalar), ((2, 3), dtype))


@pytest.mark.parametrize("exponent", [2, 3, 0, 1, 0.5, -1.0, 2.0, -2, True])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_pow_tensor_scalar(exponent, dtype):
    # int tensor to a negative int power raises in torch, so kael must raise too
    compare(lambda lib, a: lib.pow(a, exponent), ((3, 4), dtype, "contig", "pos"))
    compare(lambda lib, a: a.pow(exponent), ((5,), dtype, "contig", "pos"))


@pytest.mark.parametrize("base", [2, 3, 2.5, 0.5, -2])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_pow_scalar_tensor(base, dtype):
    compare(lambda lib, e: lib.pow(base, e), ((3, 4), dtype, "contig", "small"))


def test_pow_special_cases():
    b = [0.0, 0.0, 2.0, -2.0, -2.0, 1.0, float("nan"), 4.0]
    e = [0.0, -1.0, 0.5, 2.0, 0.5, float("nan"), 0.0, -0.5]
    check(kael.pow(kael.tensor(b), kael.tensor(e)), torch.pow(torch.tensor(b), torch.tensor(e)))


def test_int_pow_int_tensor_exact():
    b = torch.tensor([0, 1, 2, 3, -3, 7, -1])
    e = torch.tensor([0, 5, 10, 3, 3, 2, 7])
    check(kael.pow(kael.tensor(b.tolist()), kael.tensor(e.tolist())), torch.pow(b, e))


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
@pytest.mark.parametrize("alpha", [2, -1, 0.5, 0])
def test_alpha_keyword(op, dtype, alpha):
    # torch raises for a float alpha with integral inputs
    compare(lambda lib, a, b: getattr(lib, op)(a, b, alpha=alpha), ((3, 4), dtype), ((4,), dtype))
    compare(lambda lib, a: getattr(a, op)(3, alpha=alpha), ((2, 2), dtype))


@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_div_of_integers_is_true_division_float32(dtype):
    kr, tr = compare(lambda lib, a, b: lib.div(a, b), ((4, 4), dtype), ((4,), dtype, "contig", "nonzero"))
    if dtype == "int64":
        assert kr.dtype is kael.float32
    check(kael.tensor([7, -7]) / kael.tensor([2, 2]), torch.tensor([7, -7]) / torch.tensor([2, 2]))


def test_division_by_zero_gives_ieee_results():
    a = [1.0, -1.0, 0.0, 3.0]
    b = [0.0, 0.0, 0.0, -0.0]
    check(kael.tensor(a) / kael.tensor(b), torch.tensor(a) / torch.tensor(b))
    check(kael.tensor([1, 0, -2]) / kael.tensor([0, 0, 0]), torch.tensor([1, 0, -2]) / torch.tensor([0, 0, 0]))


def test_maximum_minimum_propagate_nan():
    a = [1.0, float("nan"), 3.0, -0.0]
    b = [float("nan"), 0.0, 2.0, 0.0]
    check(kael.maximum(kael.tensor(a), kael.tensor(b)), torch.maximum(torch.tensor(a), torch.tensor(b)))
    check(kael.minimum(kael.tensor(a), kael.tensor(b)), torch.minimum(torch.tensor(a), torch.tensor(b)))


def test_comparisons_with_nan():
    a = [1.0, float("nan"), float("nan"), float("inf")]
    b = [float("nan"), 1.0, float("nan"), float("inf")]
    for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
        check(getattr(kael, op)(kael.tensor(a), kael.tensor(b)), getattr(torch, op)(torch.tensor(a), torch.tensor(b)))


def test_int64_arithmetic_is_exact_beyond_2_pow_53():
    a = [2 ** 61, -(2 ** 61), 2 ** 53 + 1, 123456789012345]
    b = [3, 2, 1, 1000]
    ka, kb, ta, tb = kael.tensor(a), kael.tensor(b), torch.tensor(a), torch.tensor(b)
    check(ka + kb, ta + tb)
    check(ka * kb, ta * tb)
    check(ka - kb, ta - tb)


def test_binary_larger_tensor():
    for op in BINARY_OPS:
        da, db = bdom(op)
        compare(lambda lib, a, b: getattr(lib, op)(a, b), ((129, 65), "float32", "contig", da),
                ((65,), "float32", "contig", db))
        compare(lambda lib, a, b: getattr(lib, op)(a, b), ((65, 129), "float64", "T", da),
                ((65, 129), "float64", "contig", db))


# -------------------------------------------------------------- operators ---
BIN_OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "**": operator.pow,
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


@pytest.mark.parametrize("sym", list(BIN_OPERATORS))
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_binary_operator_tensor_tensor(sym, dtype):
    f = BIN_OPERATORS[sym]
    da, db = {"/": ("any", "nonzero"), "**": ("pos", "small")}.get(sym, ("any", "any"))
    compare(lambda a, b: f(a, b), ((3, 1), dtype, "contig", da), ((1, 4), dtype, "contig", db), lib_arg=False)
    compare(lambda a, b: f(a, b), ((3, 4), dtype, "T", da), ((4,), dtype, "contig", db), lib_arg=False)


@pytest.mark.parametrize("sym", list(BIN_OPERATORS))
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("scalar", [2, 2.5, True], ids=repr)
def test_binary_operator_with_scalar_both_sides(sym, dtype, scalar):
    f = BIN_OPERATORS[sym]
    dom = "pos" if sym in ("/", "**") else "any"
    compare(lambda a: f(a, scalar), ((2, 3), dtype, "contig", "pos" if sym == "**" else "any"), lib_arg=False)
    compare(lambda a: f(scalar, a), ((2, 3), dtype, "contig", dom if sym != "**" else "small"), lib_arg=False)


@pytest.mark.parametrize("expr", [
    lambda t: 1 - t, lambda t: 2.0 * t, lambda t: 2 ** t, lambda t: 1 / t, lambda t: 3 + t,
    lambda t: 0.5 - t, lambda t: 2.5 ** t, lambda t: -t, lambda t: abs(t), lambda t: -(-t),
    lambda t: 2 < t, lambda t: 1.5 >= t, lambda t: 0 == t, lambda t: (t * 2 + 1) / (t + 10),
], ids=["1-t", "2.0*t", "2**t", "1/t", "3+t", "0.5-t", "2.5**t", "-t", "abs", "--t", "2<t", "1.5>=t",
        "0==t", "chain"])
@pytest.mark.parametrize("dtype", NUMERIC_NAMES)
def test_reflected_and_unary_operators(expr, dtype):
    compare(expr, ((3, 4), dtype, "contig", "pos"), lib_arg=False)


@pytest.mark.parametrize("sym,method", [("+=", "add"), ("-=", "sub"), ("*=", "mul"), ("/=", "div")])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("other", ["tensor", "row", 2, 1.5, True], ids=str)
def test_augmented_assignment_keeps_identity(sym, method, dtype, other):
    def run(lib, a, b):
        before = a
        if sym == "+=":
            a += b
        elif sym == "-=":
            a -= b
        elif sym == "*=":
            a *= b
        else:
            a /= b
        assert a is before
        return a
    if other == "tensor":
        o = ((3, 4), dtype, "contig", "nonzero")
    elif other == "row":
        o = ((4,), dtype, "contig", "nonzero")
    else:
        o = other
    compare(run, ((3, 4), dtype), o, check_same=0)


def test_augmented_assignment_on_view_updates_base():
    for layout in ["T", "step", "transpose"]:
        compare(lambda lib, a, b: a.__iadd__(b), ((3, 4), "float32", layout), ((4,), "float32"), check_same=0)
        compare(lambda lib, a: a.__imul__(3.0), ((3, 4), "float64", layout), check_same=0)


# --------------------------------------------------------------- in-place ---
INPLACE_BINARY = ["add", "sub", "mul", "div", "pow"]


@pytest.mark.parametrize("op", INPLACE_BINARY)
@pytest.mark.parametrize("self_dtype", DTYPE_NAMES)
@pytest.mark.parametrize("other_dtype", DTYPE_NAMES)
def test_inplace_binary_dtype_table(op, self_dtype, other_dtype):
    # result dtype must stay self's dtype; torch raises if the promoted type cannot be cast back
    da, db = bdom(op)
    compare(lambda lib, a, b: getattr(a, op + "_")(b), ((3, 4), self_dtype, "contig", da),
            ((3, 4), other_dtype, "contig", db), check_same=0)


@pytest.mark.parametrize("op", INPLACE_BINARY)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("scalar", [2, 1.5, True], ids=repr)
def test_inplace_binary_with_scalar(op, dtype, scalar):
    da = "pos" if op == "pow" else "any"
    compare(lambda lib, a: getattr(a, op + "_")(scalar), ((2, 5), dtype, "contig", da), check_same=0)


@pytest.mark.parametrize("op", INPLACE_BINARY)
@pytest.mark.parametrize("layout", ["T", "transpose", "step", "contig"])
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_inplace_binary_on_noncontiguous_view_broadcast_rhs(op, layout, dtype):
    da, db = bdom(op)
    compare(lambda lib, a, b: getattr(a, op + "_")(b), ((3, 4), dtype, layout, da), ((4,), dtype, "contig", db),
            check_same=0)
    compare(lambda lib, a, b: getattr(a, op + "_")(b), ((2, 3, 4), dtype, layout, da),
            ((3, 1), dtype, "step", db), check_same=0)


def test_inplace_add_alpha():
    compare(lambda lib, a, b: a.add_(b, alpha=2), ((3, 4), "float32"), ((3, 4), "float32"), check_same=0)
    compare(lambda lib, a, b: a.sub_(b, alpha=3), ((3, 4), "int64"), ((4,), "int64"), check_same=0)


def test_inplace_result_cannot_broadcast_self():
    compare_raises(lambda lib, a, b: a.add_(b), ((1, 4), "float32"), ((3, 4), "float32"))
    compare_raises(lambda lib, a, b: a.mul_(b), ((4,), "float32"), ((2, 4), "float32"))


def test_inplace_with_overlapping_self_operand():
    compare(lambda lib, a: a.add_(a), ((3, 4), "float32"), check_same=0)
    compare(lambda lib, a: a.mul_(a.T.T), ((3, 3), "float64"), check_same=0)


# ----------------------------------------------------------- promotion ---
def _operand(kind, dtype):
    """kind: 'tensor' (shape (2,3)), 'zerodim' (0-d tensor) or 'scalar' (python value)."""
    if kind == "tensor":
        return ((2, 3), dtype, "contig", "pos")
    if kind == "zerodim":
        return ((), dtype, "contig", "pos")
    return {"float32": 2.5, "float64": 2.5, "int64": 2, "bool": True}[dtype]


OPERANDS = [(k, d) for k in ("tensor", "zerodim") for d in DTYPE_NAMES] + [("scalar", "int64"),
                                                                          ("scalar", "float32"),
                                                                          ("scalar", "bool")]
OPERAND_IDS = [f"{k}-{d}" if k != "scalar" else {"int64": "int", "float32": "float", "bool": "pybool"}[d]
               for k, d in OPERANDS]


PROMOTION_CASES = [
    pytest.param(op, lhs, rhs, id=f"{op}-{li}-{ri}")
    for op in ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "lt", "eq"]
    for lhs, li in zip(OPERANDS[:2 * len(DTYPE_NAMES)], OPERAND_IDS[:2 * len(DTYPE_NAMES)])  # tensors, 0-d
    for rhs, ri in zip(OPERANDS, OPERAND_IDS)
    if not (op in ("maximum", "minimum") and rhs[0] == "scalar")  # they take two tensors
]


@pytest.mark.parametrize("op,lhs,rhs", PROMOTION_CASES)
def test_type_promotion_table(op, lhs, rhs):
    compare(lambda lib, a, b: getattr(lib, op)(a, b), _operand(*lhs), _operand(*rhs))


@pytest.mark.parametrize("expr,expected", [
    (lambda lib: lib.tensor([1, 2]) + 2.5, "float32"),
    (lambda lib: lib.tensor([1.0, 2.0]) + lib.tensor(2.0, dtype=lib.float64), "float32"),
    (lambda lib: lib.tensor([True, False]) + True, "bool"),
    (lambda lib: lib.tensor([True, False]) + 1, "int64"),
    (lambda lib: lib.tensor([1, 2]) + lib.tensor(2.0, dtype=lib.float64), "float64"),  # higher category 0-d wins
    (lambda lib: lib.tensor([1, 2]) * lib.tensor([2.0], dtype=lib.float64), "float64"),
    (lambda lib: lib.tensor(1) + lib.tensor(2.0, dtype=lib.float64), "float64"),
    (lambda lib: lib.tensor(True) + lib.tensor([1, 2]), "int64"),
    (lambda lib: lib.tensor([True]) * 2.5, "float32"),
    (lambda lib: lib.tensor([1, 2]) / 2, "float32"),
    (lambda lib: lib.tensor([1, 2], dtype=lib.float64) / 2, "float64"),
    (lambda lib: lib.tensor(3) + 1.5, "float32"),
    (lambda lib: 2 ** lib.tensor([1, 2]), "int64"),
    (lambda lib: 2.0 ** lib.tensor([1, 2]), "float32"),
    (lambda lib: lib.tensor([1, 2]) ** 2.0, "float32"),
    (lambda lib: lib.tensor([True, False]) < 0.5, "bool"),
], ids=["int+2.5", "f32+f64_0d", "bool+True", "bool+1", "int+f64_0d", "int*f64_1d", "int0d+f64_0d",
        "bool0d+int", "bool*2.5", "int/2", "f64/2", "int0d+1.5", "2**int", "2.0**int", "int**2.0", "bool<0.5"])
def test_promotion_spot_checks(expr, expected):
    kr, tr = compare(lambda lib: expr(lib))
    assert kr.dtype is getattr(kael, expected)


@pytest.mark.parametrize("op", ["sub"])
def test_bool_sub_raises_like_torch(op):
    compare_raises(lambda lib, a, b: lib.sub(a, b), ((3,), "bool"), ((3,), "bool"))
    compare_raises(lambda lib, a: a - True, ((3,), "bool"))


def test_neg_of_bool_raises_like_torch():
    compare_raises(lambda lib, a: lib.neg(a), ((3,), "bool"))
    compare_raises(lambda lib, a: -a, ((3,), "bool"))


def test_int_tensor_to_negative_int_power_raises_like_torch():
    compare_raises(lambda lib, a: lib.pow(a, -1), ((3,), "int64", "contig", "pos"))
    compare_raises(lambda lib, a: a ** -2, ((3,), "int64", "contig", "pos"))


def test_ops_do_not_modify_inputs():
    p, q = make_pair((3, 4)), make_pair((4,))
    before_a, before_b = p.k.tolist(), q.k.tolist()
    for op in BINARY_OPS:
        getattr(kael, op)(p.k, q.k)
    for op in ["neg", "abs", "exp", "sin", "relu"]:
        getattr(kael, op)(p.k)
    assert p.k.tolist() == before_a and q.k.tolist() == before_b


# ---------------------------------------------------------------- out=

@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "lt"])
def test_binary_out_matches_torch_and_returns_out(op):
    ta, tb = torch.rand(3, 4) + 0.5, torch.rand(4) + 0.5
    ka, kb = kael.tensor(ta.numpy()), kael.tensor(tb.numpy())
    tres = getattr(torch, op)(ta, tb)
    tout = torch.empty(3, 4, dtype=tres.dtype)
    kout = kael.empty(3, 4, dtype=kdtype(torch_dtype_name(tres.dtype)))
    assert getattr(kael, op)(ka, kb, out=kout) is kout
    getattr(torch, op)(ta, tb, out=tout)
    check(kout, tout)


@pytest.mark.parametrize("op", UNARY_OPS)
def test_unary_out_matches_torch(op):
    t = torch.rand(2, 5, dtype=torch.float64) + 0.5
    k = kael.tensor(t.numpy())
    kout = kael.empty(2, 5, dtype=kael.float64)
    assert getattr(kael, op)(k, out=kout) is kout
    check(kout, getattr(torch, op)(t))  # (torch.relu has no out=; kael's pointwise ops all do)


def test_out_resizes_like_torch():
    import warnings

    a, b = kael.ones(2, 3), kael.ones(3)
    empty = kael.empty(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # resizing an empty out is silent
        kael.add(a, b, out=empty)
    assert empty.shape == (2, 3) and empty.tolist() == [[2.0] * 3] * 2
    wrong = kael.zeros(5)
    with pytest.warns(UserWarning, match="resized"):
        kael.mul(a, b, out=wrong)
    with pytest.warns(UserWarning, match="resized"):
        torch.mul(torch.ones(2, 3), torch.ones(3), out=torch.zeros(5))
    assert wrong.shape == (2, 3) and wrong.tolist() == [[1.0] * 3] * 2


def test_out_dtype_rules_match_torch():
    a, b = kael.tensor([1.5, 2.5]), kael.tensor([1.0, 1.0])
    wide = kael.zeros(2, dtype=kael.float64)
    kael.add(a, b, out=wide)  # float32 result into float64: allowed
    assert wide.tolist() == [2.5, 3.5] and wide.dtype is kael.float64
    with pytest.raises(RuntimeError):
        torch.add(torch.tensor([1.5]), torch.tensor([1.0]), out=torch.zeros(1, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="can't be cast"):
        kael.add(a, b, out=kael.zeros(2, dtype=kael.int64))


def test_out_may_be_an_input():
    a = kael.tensor([1.0, 2.0, 3.0])
    version = a._version
    assert kael.mul(a, a, out=a) is a
    assert a.tolist() == [1.0, 4.0, 9.0] and a._version == version + 1
