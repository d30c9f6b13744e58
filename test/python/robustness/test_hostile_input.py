"""Hostile Python input to kael._C: containers mutated by the __float__/__index__ of their own
elements, self-referencing and very deep nesting, foreign buffers (ctypes, array, memoryview),
size lists longer than kael's 64 dimensions, NumPy scalars of every type, complex numbers and
malformed device strings.

Every input that used to crash the interpreter runs in a subprocess, so a crash fails its test
instead of killing the suite; values, dtypes and exception classes are compared with torch.
"""
import array
import ctypes
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import kael
from helpers import check


def run_isolated(code, expect_exception=None, expect_output=None):
    """Runs `code` in a fresh interpreter; it must exit normally (a crash fails the test) and,
    when expect_exception is given, raise exactly that exception class (printed as NAME: msg)."""
    prelude = "import kael, numpy as np, ctypes, sys\n"
    if expect_exception is not None:
        body = textwrap.indent(textwrap.dedent(code), "    ")
        code = f"try:\n{body}\nexcept Exception as e:\n    print('RAISED', type(e).__name__, str(e))\n" \
               f"else:\n    print('RAISED nothing')\n"
    else:
        code = textwrap.dedent(code)
    proc = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"the interpreter exited with {proc.returncode}:\n{output}"
    if expect_exception is not None:
        assert f"RAISED {expect_exception.__name__} " in output, output
    if expect_output is not None:
        assert expect_output in output, output
    return output


def why(e):
    """The message of a kael error: what the user reads, which starts with the op name."""
    return str(e)


def exception_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001: the class is what is compared
        return e
    return None


def same_exception_class(kael_fn, torch_fn):
    k, t = exception_of(kael_fn), exception_of(torch_fn)
    assert k is not None and t is not None, (k, t)
    assert type(k) is type(t), (k, t)
    return k


# ------------------------------------------------------- 1. nested sequences mutated during conversion ---

EXTEND = """
data = [[None, 1.0], [2.0, 3.0]]
class A:
    def __float__(self):
        data[1].extend([7.0] * 100000)
        return 5.0
data[0][0] = A()
"""


@pytest.mark.parametrize("dtype", ["", ", dtype=kael.float32", ", dtype=kael.float64"])
def test_float_that_extends_a_walked_list_raises(dtype):
    out = run_isolated(EXTEND + f"kael.tensor(data{dtype})", ValueError)
    assert "expected sequence of length 2 at dim 1 (got 100002)" in out


def test_float_hook_is_not_called_for_an_integer_dtype():
    # An integer dtype reads elements through __index__ alone, as torch does: an object with
    # only __float__ is a TypeError there, before its hook could mutate anything.
    out = run_isolated(EXTEND + "kael.tensor(data, dtype=kael.int64)", TypeError)
    assert "'A' object cannot be interpreted as an integer" in out
    ns = {}
    exec(EXTEND, ns)
    with pytest.raises(TypeError, match="'A' object cannot be interpreted as an integer"):
        torch.tensor(ns["data"], dtype=torch.int64)
    assert len(ns["data"][1]) == 2


def test_float_that_extends_a_walked_list_raises_what_torch_raises():
    ns = {}
    exec(EXTEND, ns)
    with pytest.raises(ValueError, match=r"expected sequence of length 2 at dim 1 \(got 100002\)"):
        torch.tensor(ns["data"], dtype=torch.float32)
    exec(EXTEND, ns)
    with pytest.raises(ValueError, match=r"^tensor: .*expected sequence of length 2 at dim 1 \(got 100002\)"):
        kael.tensor(ns["data"], dtype=kael.float32)


# torch itself segfaults on these (it caches the item array across the call into __float__)
@pytest.mark.parametrize("mutation, exc, fragment", [
    ("data.clear()", ValueError, "expected sequence of length 2 at dim 0 (got 0)"),
    ("data[0].clear()", ValueError, "expected sequence of length 2 at dim 1 (got 0)"),
    ("data[1].clear()", ValueError, "expected sequence of length 2 at dim 1 (got 0)"),
    ("data[0].append(1.0)", ValueError, "expected sequence of length 2 at dim 1 (got 3)"),
    ("del data[:]; data.extend([0.0] * 1000)", ValueError, "expected sequence of length 2 at dim 0 (got 1000)"),
    ("data[1][1] = 'x'", TypeError, "str"),
    ("data[1][1] = [1.0, 2.0]", ValueError, "inconsistent sizes"),
    ("data[1] = 3.0", ValueError, "inconsistent sizes"),
    ("data[1][0] = kael.ones(3)", ValueError, "0-d tensors"),
    ("data[1][0] = 1 + 2j", TypeError, "complex"),
], ids=["clear-outer", "clear-own-row", "clear-next-row", "grow-own-row", "replace-everything", "str-item",
        "list-item", "number-row", "tensor-item", "complex-item"])
@pytest.mark.parametrize("hook", ["__float__", "__index__"])
@pytest.mark.parametrize("dtype", ["", ", dtype=kael.float64", ", dtype=kael.int32"])
def test_element_hook_mutating_the_lists_raises_cleanly(mutation, exc, fragment, hook, dtype):
    value = "5.0" if hook == "__float__" else "5"
    code = f"""
    data = [[None, 1], [2, 3]]
    class A:
        def {hook}(self):
            {mutation}
            return {value}
    data[0][0] = A()
    kael.tensor(data{dtype})
    """
    if hook == "__float__" and "int32" in dtype:
        # an integer dtype reads elements through __index__ alone, as torch does: the hook is
        # never called
        exc, fragment = TypeError, "'A' object cannot be interpreted as an integer"
    out = run_isolated(code, exc)
    assert fragment in out


def test_replacing_an_unvisited_row_uses_the_new_row():
    # Still a consistent nested list: the walk reads each row when it reaches it (as torch does).
    def build(lib):
        data = [[None, 1.0], [2.0, 3.0]]

        class A:
            def __float__(self):
                data[1] = [8.0, 9.0]
                return 5.0

        data[0][0] = A()
        return lib.tensor(data, dtype=lib.float64)

    check(build(kael), build(torch))
    out = run_isolated("""
    data = [[None, 1.0], [2.0, 3.0]]
    class A:
        def __float__(self):
            data[1] = [8.0, 9.0]
            import gc; gc.collect()
            return 5.0
    data[0][0] = A()
    print(kael.tensor(data, dtype=kael.float64).tolist())
    """)
    assert "[[5.0, 1.0], [8.0, 9.0]]" in out


def test_dropping_the_only_reference_to_a_row_while_it_is_walked():
    # The row being converted loses its last reference from the outer list; the walk holds it.
    out = run_isolated("""
    data = [[None, 1.0, 2.0], [3.0, 4.0, 5.0]]
    class A:
        def __float__(self):
            data[0] = [0.0, 0.0, 0.0]
            import gc; gc.collect()
            return 5.0
    data[0][0] = A()
    print(kael.tensor(data, dtype=kael.float64).tolist())
    """)
    assert "[[5.0, 1.0, 2.0], [3.0, 4.0, 5.0]]" in out


def test_list_subclass_with_a_lying_len_uses_the_items_it_holds():
    class Liar(list):
        def __len__(self):
            return 5

    # torch asks __len__ and then fails with IndexError; kael reads the list's own items and
    # never calls __len__ (so it cannot be made to read past them)
    assert kael.tensor(Liar([1, 2])).tolist() == [1, 2]
    assert kael.tensor([Liar([1, 2]), [3, 4]]).tolist() == [[1, 2], [3, 4]]


def test_self_referencing_lists_raise_like_torch():
    a = [1]
    a.append(a)
    e = same_exception_class(lambda: kael.tensor(a), lambda: torch.tensor(a))
    assert isinstance(e, TypeError) and why(e).startswith("tensor: self-referential lists are incompatible")
    b = []
    b.append(b)
    e = same_exception_class(lambda: kael.tensor(b), lambda: torch.tensor(b))
    assert isinstance(e, ValueError) and "at most 64 dimensions" in str(e)
    c = [[1.0]]
    c[0].append(c)  # torch crashes on this one
    run_isolated("c = [[1.0]]\nc[0].append(c)\nkael.tensor(c)", ValueError)


def nest(depth, leaf=1.0):
    x = leaf
    for _ in range(depth):
        x = [x]
    return x


@pytest.mark.parametrize("depth", [65, 1000, 100000, 1000000])
def test_very_deep_nesting_raises_value_error(depth):
    run_isolated(f"""
    x = 1.0
    for _ in range({depth}):
        x = [x]
    kael.tensor(x)
    """, ValueError, expect_output="at most 64 dimensions")


def test_nesting_up_to_64_levels_matches_torch():
    for depth in (33, 63, 64):
        check(kael.tensor(nest(depth)), torch.tensor(nest(depth)))
        check(kael.tensor(nest(depth, True)), torch.tensor(nest(depth, True)))


def test_shared_rows_and_tuples_still_convert():
    row = (1, 2.5)
    data = [row, [row[0], 7], row]
    check(kael.tensor(data), torch.tensor(data))
    check(kael.tensor(data, dtype=kael.int64), torch.tensor(data, dtype=torch.int64))


@pytest.mark.parametrize("data", [[[1, 2], [3]], [[], [1]], [[1], []], [[[1]], [[2], [3]]], [[1, 2], [3, [4]]]],
                         ids=repr)
def test_ragged_input_names_the_expected_length(data):
    with pytest.raises(ValueError) as info:
        kael.tensor(data)
    assert why(info.value).startswith("tensor: nested sequences have inconsistent sizes: expected ")
    if not data[0]:
        # torch skips its length checks when the tensor is empty ((2, 0) here); kael checks anyway
        assert torch.tensor(data).shape == (2, 0)
    else:
        with pytest.raises((ValueError, TypeError)):
            torch.tensor(data)


# ------------------------------------------------------------------------------- 2. foreign buffers ---

CTYPES = [ctypes.c_double, ctypes.c_float, ctypes.c_int64, ctypes.c_int32, ctypes.c_int16, ctypes.c_int8,
          ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_bool, ctypes.c_long,
          ctypes.c_longlong, ctypes.c_ulong, ctypes.c_short, ctypes.c_longdouble]


def ctypes_values(ct):
    if ct is ctypes.c_bool:
        return (True, False, True)
    if ct in (ctypes.c_double, ctypes.c_float, ctypes.c_longdouble):
        return (1.5, -2.25, 0.1)
    if ct in (ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_ulong):
        return (1, 200, 3)
    return (1, -100, 3)


def test_ctypes_array_no_longer_crashes():
    out = run_isolated("print(kael.tensor((ctypes.c_double * 3)(1, 2, 3)).tolist())")
    assert "[1.0, 2.0, 3.0]" in out
    run_isolated("print(kael.tensor(((ctypes.c_int32 * 3) * 2)()).tolist())", expect_output="[[0, 0, 0], [0, 0, 0]]")


@pytest.mark.parametrize("ct", CTYPES, ids=lambda c: c.__name__)
def test_ctypes_arrays_match_torch(ct):
    # torch reads a ctypes array as a sequence of Python numbers: floats give the default dtype
    values = ctypes_values(ct)
    arr = (ct * 3)(*values)
    check(kael.tensor(arr), torch.tensor(arr))
    check(kael.tensor(arr, dtype=kael.float64), torch.tensor(arr, dtype=torch.float64))
    empty = (ct * 0)()
    check(kael.tensor(empty), torch.tensor(empty))


@pytest.mark.parametrize("ct", [ctypes.c_double, ctypes.c_int16, ctypes.c_bool], ids=lambda c: c.__name__)
def test_multidimensional_ctypes_arrays_match_torch(ct):
    arr = ((ct * 3) * 2)()
    for i in range(2):
        for j in range(3):
            arr[i][j] = ct(i * 3 + j if ct is not ctypes.c_bool else (i + j) % 2 == 1).value
    check(kael.tensor(arr), torch.tensor(arr))
    arr3 = (((ct * 2) * 3) * 4)()
    check(kael.tensor(arr3), torch.tensor(arr3))


def test_float64_buffers_keep_their_precision_when_float64_is_asked():
    arr = (ctypes.c_double * 2)(0.1, 1e300)
    check(kael.tensor(arr, dtype=kael.float64), torch.tensor(arr, dtype=torch.float64))
    a = array.array("d", [0.1, 1e300])
    check(kael.tensor(a, dtype=kael.float64), torch.tensor(a, dtype=torch.float64))


@pytest.mark.parametrize("make", [
    lambda: array.array("d", [1.5, -2.0]), lambda: array.array("f", [1.5, -2.0]), lambda: array.array("i", [1, -2]),
    lambda: array.array("b", [1, -2]), lambda: array.array("B", [1, 250]), lambda: array.array("Q", [1, 2 ** 40]),
    lambda: array.array("q", []), lambda: memoryview(b"abc"), lambda: bytearray(b"\x00\x01\xff"),
    lambda: memoryview(bytearray(b"\x00\x01\xff")).toreadonly(), lambda: memoryview(np.arange(6.0))[::2],
    lambda: memoryview(np.arange(3.0)).toreadonly(),
    lambda: memoryview(np.array([True, False])),
], ids=["array-d", "array-f", "array-i", "array-b", "array-B", "array-Q", "array-empty", "memoryview-bytes",
        "bytearray", "memoryview-readonly", "memoryview-strided", "memoryview-np-readonly",
        "memoryview-bool"])
def test_other_buffer_objects_match_torch(make):
    check(kael.tensor(make()), torch.tensor(make()))


def test_multidimensional_memoryview_reads_as_its_nested_values():
    # torch cannot read it ("could not determine the shape"); kael reads the buffer
    k = kael.tensor(memoryview(np.arange(6, dtype=np.int32).reshape(2, 3)))
    assert k.dtype is kael.int64 and k.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_read_only_numpy_arrays_are_copied():
    arr = np.frombuffer(np.arange(4.0).tobytes(), dtype=np.float64)
    assert not arr.flags.writeable
    k = kael.tensor(arr)
    check(k, torch.tensor(arr))
    k.add_(1)
    assert arr.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("make", [lambda: (ctypes.c_char * 3)(), lambda: b"abc"], ids=["c_char", "bytes"])
def test_byte_strings_are_rejected_like_torch(make):
    e = same_exception_class(lambda: kael.tensor(make()), lambda: torch.tensor(make()))
    assert why(e).startswith("tensor: ")


def test_unsupported_buffer_formats_raise_type_error_naming_the_format():
    structured = np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")])
    e = same_exception_class(lambda: kael.tensor(structured), lambda: torch.tensor(structured))
    assert isinstance(e, TypeError) and why(e).startswith("tensor: unsupported buffer format 'T{")
    longdouble = np.zeros(2, dtype=np.longdouble)
    e = same_exception_class(lambda: kael.tensor(longdouble), lambda: torch.tensor(longdouble))
    assert "'g'" in str(e) or "long double" in str(e)


def test_non_native_byte_order_raises_value_error_like_torch():
    arr = np.array([1.0, 2.0], dtype=">f8")
    e = same_exception_class(lambda: kael.tensor(arr), lambda: torch.tensor(arr))
    assert isinstance(e, ValueError) and "'>d'" in str(e) and "byte order" in str(e)
    check(kael.tensor(np.array([1, 2], dtype=">u1")), torch.tensor(np.array([1, 2], dtype=">u1")))


@pytest.mark.parametrize("make, dtype", [
    (lambda: (ctypes.c_double * 3)(1, 2, 3), "float64"), (lambda: ((ctypes.c_float * 3) * 2)(), "float32"),
    (lambda: (ctypes.c_int32 * 4)(1, -2, 3, 4), "int16"), (lambda: array.array("d", [0.5, 1.5]), "float64"),
    (lambda: (ctypes.c_bool * 2)(True, False), "bool"),
], ids=["c_double", "c_float-2d", "c_int32-as-int16", "array-d", "c_bool"])
def test_frombuffer_of_foreign_buffers_matches_torch(make, dtype):
    check(kael.frombuffer(make(), dtype=getattr(kael, dtype)), torch.frombuffer(make(), dtype=getattr(torch, dtype)))


def test_frombuffer_of_read_only_and_non_contiguous_buffers_behaves_like_torch():
    with pytest.warns(UserWarning):
        k = kael.frombuffer(b"\x00\x00\x80\x3f", dtype=kael.float32)
    # (torch warns once per process about read-only buffers: compare with a writable copy)
    check(k, torch.frombuffer(bytearray(b"\x00\x00\x80\x3f"), dtype=torch.float32))
    strided = memoryview(bytearray(16))[::2]
    same_exception_class(lambda: kael.frombuffer(strided, dtype=kael.uint8),
                         lambda: torch.frombuffer(strided, dtype=torch.uint8))


# ----------------------------------------------------------------- 5. size lists mutated by __index__ ---

EVIL = """
class Evil:
    def __init__(self, victim, action):
        self.victim, self.action = victim, action
    def __index__(self):
        if self.action == 'clear':
            self.victim.clear()
        elif self.action == 'extend':
            self.victim.extend([10 ** 6] * 1000)
        else:
            self.victim[:] = [object()] * len(self.victim)
        import gc; gc.collect()
        return 2
"""


@pytest.mark.parametrize("action", ["clear", "extend", "replace"])
@pytest.mark.parametrize("call", [
    "kael.zeros(sizes)", "kael.ones(sizes, dtype=kael.int32)", "kael.empty(sizes)", "kael.full(sizes, 1.5)",
    "kael.zeros(size=sizes)",
], ids=["zeros", "ones", "empty", "full", "zeros-kw"])
def test_factory_size_list_cleared_by_index_reads_no_freed_memory(action, call):
    out = run_isolated(EVIL + f"""
sizes = [None, 1000, 1001]
sizes[0] = Evil(sizes, {action!r})
t = {call}
print('SHAPE', tuple(t.shape))
""")
    assert "SHAPE (2, 1000, 1001)" in out


@pytest.mark.parametrize("action", ["clear", "extend", "replace"])
@pytest.mark.parametrize("call, shape", [
    ("x.view(sizes)", "(2, 3, 4)"), ("x.reshape(sizes)", "(2, 3, 4)"), ("kael.reshape(x, sizes)", "(2, 3, 4)"),
    ("x.view(-1).view(sizes)", "(2, 3, 4)"), ("x.expand(sizes)", "(2, 3, 4)"),
    ("kael.empty_strided(sizes, [12, 4, 1])", "(2, 3, 4)"), ("x.as_strided(sizes, [12, 4, 1])", "(2, 3, 4)"),
], ids=["view", "reshape", "reshape-fn", "view-of-view", "expand", "empty_strided", "as_strided"])
def test_view_size_lists_cleared_by_index_read_no_freed_memory(action, call, shape):
    out = run_isolated(EVIL + f"""
x = kael.arange(24.0).view(2, 3, 4) if 'expand' not in {call!r} else kael.ones(3, 4)
sizes = [None, 3, 4]
sizes[0] = Evil(sizes, {action!r})
t = {call}
print('SHAPE', tuple(t.shape))
""")
    assert f"SHAPE {shape}" in out


@pytest.mark.parametrize("action", ["clear", "extend", "replace"])
def test_permute_dims_cleared_by_index_read_no_freed_memory(action):
    out = run_isolated(EVIL + f"""
x = kael.arange(24.0).view(2, 3, 4)
dims = [None, 0, 1]
dims[0] = Evil(dims, {action!r})
a = x.permute(dims)
dims = [None, 0, 1]
dims[0] = Evil(dims, {action!r})
print('SHAPE', tuple(a.shape), tuple(kael.permute(x, dims).shape))
""")
    assert "SHAPE (4, 2, 3) (4, 2, 3)" in out


def test_varargs_sizes_with_index_mutating_a_list_are_fine():
    out = run_isolated(EVIL + """
victim = [1, 2, 3]
print('SHAPE', tuple(kael.zeros(Evil(victim, 'clear'), 3).shape), tuple(kael.ones(2, 3).view(Evil(victim, 'extend'), 3).shape))
""")
    assert "SHAPE (2, 3) (2, 3)" in out


def test_index_that_raises_in_a_size_list_propagates():
    class Raises:
        def __index__(self):
            raise ZeroDivisionError("from __index__")

    for fn in (lambda: kael.zeros([2, Raises()]), lambda: kael.zeros(2, Raises()),
               lambda: kael.ones(4).view([Raises(), 2])):
        with pytest.raises(ZeroDivisionError, match="from __index__"):
            fn()


# ------------------------------------------------------------------------------ 6. at most 64 dims ---

def test_64_dims_work_and_match_torch():
    shape = [1] * 62 + [2, 1]
    k, t = kael.zeros(shape), torch.zeros(shape)
    check(k, t)
    assert k.tolist() == t.tolist()
    assert repr(k).startswith("tensor(")
    check(k.view([2] + [1] * 63), t.view([2] + [1] * 63))
    check(kael.tensor(np.zeros([1] * 64)), torch.tensor(np.zeros([1] * 64)))
    check(kael.ones(*shape), torch.ones(*shape))


@pytest.mark.parametrize("n", [65, 30000, 10 ** 6])
@pytest.mark.parametrize("call, op", [
    ("kael.zeros(sizes)", "zeros"), ("kael.zeros(*sizes)", "zeros"), ("kael.ones(sizes)", "ones"),
    ("kael.empty(sizes)", "empty"), ("kael.full(sizes, 1.0)", "full"), ("x.view(sizes)", "view"),
    ("x.view(*sizes)", "view"), ("x.reshape(sizes)", "reshape"), ("x.expand(sizes)", "expand"),
    ("x.permute(sizes)", "permute"), ("kael.empty_strided(sizes, sizes)", "empty_strided"),
    ("x.as_strided(sizes, sizes)", "as_strided"), ("kael.reshape(x, sizes)", "reshape"),
], ids=lambda v: v if isinstance(v, str) and "(" not in v else None)
def test_more_than_64_dims_raise_value_error_fast(n, call, op):
    # fast: one length check before any size is converted (counted through __index__), not n
    # conversions
    class One:
        conversions = 0

        def __index__(self):
            One.conversions += 1
            return 1

    x = kael.ones(1)
    for sizes in ([1] * n, [One()] * n):
        with pytest.raises(ValueError) as info:
            eval(call)
        assert why(info.value) == f"{op}: a tensor has at most 64 dimensions (got {n})"
    assert One.conversions == 0


def test_more_than_64_dims_from_repr_and_nested_lists_do_not_overflow_the_stack():
    run_isolated("print(repr(kael.zeros([1] * 30000)))", ValueError)
    run_isolated("kael.zeros([1] * 100000)", ValueError, expect_output="(got 100000)")


def test_ops_that_add_a_dim_stop_at_64():
    x = kael.zeros([1] * 64)
    for fn, op in [(lambda: x.unsqueeze(0), "unsqueeze"), (lambda: kael.unsqueeze(x, -1), "unsqueeze"),
                   (lambda: x[None], None), (lambda: x.view([1] * 65), "view")]:
        with pytest.raises(ValueError) as info:
            fn()
        assert why(info.value).endswith("a tensor has at most 64 dimensions (got 65)")
        assert op is None or why(info.value).startswith(f"{op}: ")
    check(kael.zeros([1] * 63).unsqueeze(0), torch.zeros([1] * 64))
    check(kael.zeros([1] * 63).unsqueeze(-1), torch.zeros([1] * 63).unsqueeze(-1))


def test_buffers_with_more_than_64_dims_are_rejected():
    # NumPy and memoryview stop at 64 themselves; kael's check runs before anything is allocated
    k = kael.tensor(memoryview(np.zeros([1] * 64)))  # torch reads no memoryview of more than one dim
    assert k.shape == (1,) * 64 and k.dtype is kael.float32
    with pytest.raises(ValueError, match="at most 64 dimensions"):
        kael.tensor(nest(65))


# ------------------------------------------------------------------------------------- 9. NumPy input ---

def test_uint64_values_that_int64_cannot_hold_raise():
    for arr in (np.array([2 ** 64 - 1], np.uint64), np.array([0, 2 ** 63], np.uint64),
                np.array([[1, 2], [3, 2 ** 63 + 5]], np.uint64)[:, ::-1]):
        with pytest.raises(ValueError, match=r"^tensor: uint64 value \d+ at element \d+ does not fit in int64"):
            kael.tensor(arr)
    run_isolated("kael.tensor(np.array([2 ** 64 - 1], np.uint64))", ValueError)
    with pytest.raises(ValueError, match="does not fit in int64"):
        kael.tensor([np.uint64(2 ** 64 - 1)])
    with pytest.raises(ValueError):
        torch.tensor([2 ** 64 - 1])  # the same value as a Python int: torch raises ValueError too
    with pytest.raises(ValueError, match="does not fit in int64"):
        kael.tensor([2 ** 64 - 1])


def test_uint64_values_that_fit_become_int64():
    arr = np.array([0, 1, 2 ** 63 - 1], np.uint64)
    k = kael.tensor(arr)
    assert k.dtype is kael.int64 and k.tolist() == [0, 1, 2 ** 63 - 1]
    assert torch.tensor(arr).tolist() == k.tolist()  # torch keeps uint64, which kael does not have
    assert kael.tensor([np.uint64(7)]).tolist() == [7]
    assert kael.tensor([np.uint16(7), np.uint32(8)]).dtype is kael.int64


@pytest.mark.parametrize("make", [
    lambda: [np.complex128(1 + 2j)], lambda: [np.complex64(1 + 2j)], lambda: [1 + 2j], lambda: 1 + 2j,
    lambda: np.array([1 + 2j]), lambda: np.array([1 + 2j], np.complex64), lambda: np.complex128(1 + 2j),
    lambda: [[1.0, np.complex64(3j)]],
], ids=["np-complex128", "np-complex64", "py-complex", "py-complex-0d", "array-c128", "array-c64",
        "np-complex-scalar", "nested"])
@pytest.mark.parametrize("dtype", [None, "float32", "int64"])
def test_complex_input_raises_type_error(make, dtype):
    kw = {} if dtype is None else {"dtype": getattr(kael, dtype)}
    with pytest.raises(TypeError, match="complex"):
        kael.tensor(make(), **kw)


@pytest.mark.parametrize("value", [1 + 2j, np.complex128(1 + 2j), np.complex64(1 + 2j)], ids=type)
def test_complex_operands_raise_type_error_instead_of_dropping_the_imaginary_part(value):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's ComplexWarning would mean the real part was taken
        for fn in (lambda: kael.ones(2) + value, lambda: kael.add(kael.ones(2), value),
                   lambda: kael.ones(2).mul(value), lambda: kael.full((2,), value)):
            with pytest.raises(TypeError):
                fn()


NUMPY_SCALARS = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_,
                 np.longlong, np.intc, np.short, np.byte, np.ubyte, np.half, np.single, np.double]


@pytest.mark.parametrize("form", ["alone", "list", "nested", "with-int", "with-float", "with-bool", "with-tensor",
                                  "0d-array", "two"])
@pytest.mark.parametrize("sctype", NUMPY_SCALARS, ids=lambda t: t.__name__)
def test_numpy_scalar_dtype_inference_matches_torch(sctype, form):
    v = sctype(1)
    make = {
        "alone": lambda lib: v, "list": lambda lib: [v], "nested": lambda lib: [[v], [v]],
        "with-int": lambda lib: [v, 3], "with-float": lambda lib: [v, 1.5], "with-bool": lambda lib: [True, v],
        "with-tensor": lambda lib: [v, lib.tensor(2, dtype=lib.int16)], "0d-array": lambda lib: np.array(v),
        "two": lambda lib: [v, sctype(0)],
    }[form]
    compare_creation(lambda lib: lib.tensor(make(lib)))


def compare_creation(make):
    """The same result as torch, or the same exception class (torch cannot store numpy.bool_ into
    the integer dtype it infers for [np.bool_(True), 3])."""
    t = exception_of(lambda: make(torch))
    if t is not None:
        same_exception_class(lambda: make(kael), lambda: make(torch))
    else:
        check(make(kael), make(torch))


@pytest.mark.parametrize("pair", [(np.float32, np.float64), (np.float64, np.float32), (np.int32, np.float16),
                                  (np.int8, np.int64), (np.uint8, np.int8), (np.float16, np.int64),
                                  (np.bool_, np.uint8), (np.float16, np.float32)], ids=str)
def test_mixed_numpy_scalars_promote_like_torch(pair):
    data = [[pair[0](1), pair[1](2)], [pair[1](3), pair[0](0)]]
    compare_creation(lambda lib: lib.tensor(data))


def test_numpy_bool_and_float64_scalars_keep_their_dtype():
    assert kael.tensor([np.bool_(True)]).dtype is kael.bool
    assert kael.tensor([np.float64(1.5)]).dtype is kael.float64
    assert kael.tensor([np.float32(1.5)]).dtype is kael.float32
    assert kael.tensor([np.int32(1)]).dtype is kael.int32
    check(kael.tensor([np.float64(0.1)]), torch.tensor([np.float64(0.1)]))


@pytest.mark.parametrize("sctype", NUMPY_SCALARS + [np.uint16, np.uint32, np.uint64], ids=lambda t: t.__name__)
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
def test_numpy_scalar_operands_are_numbers_like_torch(sctype, dtype):
    # before, NumPy scalars other than float64 and integers fell through to NumPy's reflected
    # operator, which silently returned an object array of 0-d tensors
    v = sctype(1)
    for make in (lambda lib, t: t + v, lambda lib, t: lib.add(t, v), lambda lib, t: t.mul(v),
                 lambda lib, t: lib.full((2,), v, dtype=t.dtype), lambda lib, t: t > v):
        k = make(kael, kael.ones(2, dtype=getattr(kael, dtype)))
        assert isinstance(k, kael.Tensor), type(k)
        check(k, make(torch, torch.ones(2, dtype=getattr(torch, dtype))))


def test_zero_d_tensors_in_lists_keep_their_dtype_like_torch():
    for make in (lambda lib: [lib.tensor(1.5, dtype=lib.float64)], lambda lib: [lib.tensor(1, dtype=lib.int32)],
                 lambda lib: [lib.tensor(1, dtype=lib.int32), 2.0], lambda lib: [lib.tensor(True), True]):
        check(kael.tensor(make(kael)), torch.tensor(make(torch)))


# ------------------------------------------------------------------------------- 13. device strings ---

GOOD_DEVICES = ["cpu", "cpu:0", "cpu:1", "cpu:12"]
BAD_DEVICES = ["cpu\x00junk", "cpu\x00", " cpu", "cpu ", "CPU", "Cpu", "", "cpu:01", "cpu:00", "cpu:-1", "cpu:+1",
               "cpu:", "cpu:1x", "cpu:0:0", "cuda:-1", "cuda:1x", "cuda:01", "cuda:", "cuda: 1", "cuda:+1", "gpu",
               "cuda:\u0663", "cpu,cuda", "cuda:99999999999999999999", "cuda:2147483648"]


@pytest.mark.parametrize("device", GOOD_DEVICES, ids=repr)
def test_cpu_device_strings_are_accepted_like_torch(device):
    for make in (lambda lib: lib.zeros(2, device=device), lambda lib: lib.tensor([1.0], device=device),
                 lambda lib: lib.ones(2).to(device), lambda lib: lib.arange(3, device=device),
                 lambda lib: lib.empty_like(lib.ones(1), device=device)):
        k, t = make(kael), make(torch)
        assert k.device == str(t.device) == "cpu"
    assert str(torch.device("cpu:0")) == "cpu:0"  # the device object keeps the index; tensors do not


@pytest.mark.parametrize("device", BAD_DEVICES, ids=repr)
def test_malformed_device_strings_raise_like_torch(device):
    for make in (lambda lib: lib.zeros(2, device=device), lambda lib: lib.tensor([1.0], device=device),
                 lambda lib: lib.ones(2).to(device), lambda lib: lib.empty(1, device=device)):
        e = same_exception_class(lambda: make(kael), lambda: make(torch))
        assert why(e).startswith("device: "), e
        if device:
            assert repr(device)[1:-1] in str(e) or repr(device.split(":")[-1])[1:-1] in str(e), e


@pytest.mark.parametrize("fn", ["allocator_stats", "empty_cache"])
def test_allocator_device_argument_is_parsed_strictly(fn):
    for device in ("cpu\x00junk", "cpu:01", "CPU"):
        with pytest.raises(RuntimeError, match="^device: "):
            getattr(kael, fn)(device)
    getattr(kael, fn)("cpu:0")


def test_dtype_names_with_nul_bytes_are_rejected():
    with pytest.raises(ValueError, match="unknown dtype name 'float32\\\\x00junk'"):
        kael.ones(2, dtype="float32\x00junk")
    assert kael.ones(2, dtype="float32").dtype is kael.float32


@pytest.mark.parametrize("scalar", [np.float32(1.5), np.float64(1.5), np.int64(2), np.int32(2), np.bool_(True)])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "lt", "eq"])
def test_numpy_scalar_on_the_left_defers_to_the_tensor(scalar, op):
    # NumPy would otherwise build an object array of 0-d tensors (Tensor.__array_priority__).
    import operator
    f = getattr(operator, op)
    try:
        t = f(scalar, torch.tensor([1.0, 2.0]))
    except RuntimeError:  # bool - tensor
        with pytest.raises(RuntimeError):
            f(scalar, kael.tensor([1.0, 2.0]))
        return
    k = f(scalar, kael.tensor([1.0, 2.0]))
    assert isinstance(k, kael.Tensor), type(k)
    assert k.tolist() == t.tolist() and str(k.dtype)[5:] == str(t.dtype)[6:]
    assert kael.ones(1).__array_priority__ == torch.ones(1).__array_priority__
