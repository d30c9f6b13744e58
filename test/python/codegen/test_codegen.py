"""The registry model (codegen/model.py) and the writer (codegen/gen.py).

Each test parses a small inline registry and checks the parsed entry or the exact error.
Every error names the file, the line of the entry and the entry: ``t.yaml:3: add: ...``.
The schema is documented in codegen/README.md, one section per key; the tests follow it.
"""
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codegen import enums, gen, types  # noqa: E402
from codegen.model import CodegenError, Return, Type, parse_registry  # noqa: E402

# Every snippet starts with these two lines, so its first entry is on line 3.
HEADER = "# a test registry\n\n"

# A valid entry to put before a bad one, so that the line of the bad entry is not the first.
VIEW = """\
- func: view(Tensor self, int[] size) -> Tensor(a)
  variants: [method]
  dispatch: {CompositeExplicit: view}
  doc: Returns a view.
"""


def parse(text):
    return parse_registry(HEADER + textwrap.dedent(text), "t.yaml")


def parse_one(text):
    (f,) = parse(text)
    return f


def error(text):
    with pytest.raises(CodegenError) as info:
        parse(text)
    return str(info.value)


def hand_written(func, extra=""):
    """A dispatch entry with the given signature."""
    return f"- func: {func}\n  dispatch: {{CPU: k_cpu}}\n{extra}  doc: Does it.\n"


def pointwise(func, formula="a", extra="", variants="[function, method]"):
    return f"- func: {func}\n  variants: {variants}\n  pointwise: {formula}\n{extra}  doc: Does it.\n"


# ============================================================================ func

def test_func_signature_grammar():
    f = parse_one(hand_written(
        "f.over(Tensor self, Tensor? w, Scalar s, int i=-1, float x=0.5, bool b=True, int[2] dims=[], "
        "int[]? o=None, *, ScalarType? dtype=None, Device device=cpu, ScalarType t=float64) -> Tensor(a)"))
    s = f.schema
    assert (s.name, s.overload, s.full_name, s.returns_text) == ("f", "over", "f.over", "Tensor(a)")
    assert s.returns == (Return(None, types.TENSOR, types.Annotation("a", False)),) and s.returns_view
    assert s.params[6].type == types.ListType(types.BaseType("int"), 2)  # the size is kept in the model
    assert f.ident == "f_over"
    got = [(p.name, str(p.type), p.default, p.kwonly) for p in s.params]
    assert got == [
        ("self", "Tensor", None, False), ("w", "Tensor?", None, False), ("s", "Scalar", None, False),
        ("i", "int", "-1", False), ("x", "float", "0.5", False), ("b", "bool", "True", False),
        ("dims", "int[]", "[]", False),  # int[N] is a size hint for int[]
        ("o", "int[]?", "None", False),
        ("dtype", "ScalarType?", "None", True), ("device", "Device", "cpu", True),
        ("t", "ScalarType", "float64", True),
    ]
    assert [p.name for p in s.tensor_params] == ["self", "w"]
    # What users see: self is 'input' in Python functions, and is left out for methods.
    assert s.signature_text().startswith("f(Tensor input, Tensor? w, Scalar s, int i=-1,")
    assert s.signature_text(skip_self=True).startswith("f(Tensor? w, ")
    assert "*, ScalarType? dtype=None, Device device=cpu" in s.signature_text()


def test_func_tensor_lists_strings_and_several_results():
    f = parse_one(hand_written("f(Tensor[] tensors, str mode='none', str? name=None) -> (Tensor values, Tensor indices)"))
    s = f.schema
    assert [(p.name, str(p.type), p.default) for p in s.params] == [
        ("tensors", "Tensor[]", None), ("mode", "str", "'none'"), ("name", "str?", "None")]
    assert s.returns_tuple and not s.returns_list and s.return_names == ("values", "indices")
    assert gen.cpp_return(f) == "std::tuple<Tensor, Tensor>"
    assert gen.cpp_params(f, defaults=True) == ('TensorList tensors, std::string_view mode = "none", '
                                               'std::optional<std::string_view> name = std::nullopt')
    assert gen.key_expr(f) == "dispatch::or_cpu(dispatch::key_set_of(tensors))"
    assert "const Var& values, const Var& indices" in gen.formula_params(f)
    u = parse_one(hand_written("u(Tensor self) -> (Tensor, Tensor)")).schema
    assert u.returns_tuple and not u.returns_named_tuple and u.return_names == ()
    assert s.returns_named_tuple
    g = parse_one(hand_written("g(Tensor self, int n) -> Tensor[]"))
    assert g.schema.returns_list and gen.cpp_return(g) == "std::vector<Tensor>" and gen.pyi_return(g) == "tuple[Tensor, ...]"
    assert error(hand_written("f(str mode=none) -> Tensor")) == "t.yaml:3: f: bad default 'none' for type 'str'"


def test_pointwise_three_inputs_and_self_not_first():
    f = parse_one(pointwise("where(Tensor condition, Tensor self, Tensor other) -> Tensor", "'a ? b : c'"))
    assert f.operand_inputs and not f.inplace  # the in-place variant would write `condition`
    assert gen.method_params(f, gen.cpp_variants(f)[0]) == "const Operand& condition, const Operand& other"
    assert gen.method_args(f, gen.cpp_variants(f)[0]) == "condition, *this, other"
    assert error(pointwise("where(Tensor condition, Tensor self, Tensor other) -> Tensor", "'a ? b : c'",
                           extra="  inplace: true\n")) \
        == "t.yaml:3: where: an in-place variant writes its first argument, which must be 'Tensor self'"


def test_func_no_arguments_and_plain_tensor_return():
    f = parse_one(hand_written("g() -> Tensor"))
    assert f.schema.params == () and f.schema.returns == (Return(None, types.TENSOR),) and f.schema.overload == ""
    assert f.schema.returns_tensor and not (f.schema.returns_view or f.schema.mutating)


@pytest.mark.parametrize("text", ["Tensr", "Tensor[][]", "int[x]", "Tensor??", "long", "string"])
def test_func_unknown_type(text):
    assert error(hand_written(f"f(Tensor self, {text} x) -> Tensor")) == f"t.yaml:3: f: unknown type '{text}'"


def test_func_unknown_type_names_the_line_of_its_entry():
    msg = error(VIEW + "\n" + pointwise("add(Tensr self, Tensor other) -> Tensor", "a + b"))
    assert msg == "t.yaml:8: add: unknown type 'Tensr'"


@pytest.mark.parametrize("arg,reason", [
    ("int a=1.5", "bad default '1.5' for type 'int'"),
    ("int a=x", "bad default 'x' for type 'int'"),
    ("int a=True", "bad default 'True' for type 'int'"),
    ("int a=None", "default None for non-optional type 'int'"),
    ("int? a=2.0", "bad default '2.0' for type 'int?'"),
    ("float a=one", "bad default 'one' for type 'float'"),
    ("float a=.5", "bad default '.5' for type 'float'"),
    ("float a=True", "bad default 'True' for type 'float'"),
    ("Scalar a=abc", "bad default 'abc' for type 'Scalar'"),
    ("Scalar a=None", "default None for non-optional type 'Scalar'"),
    ("bool a=true", "bad default 'true' for type 'bool'"),
    ("bool a=1", "bad default '1' for type 'bool'"),
    ("int[] a=(1)", "bad default '(1)' for type 'int[]'"),
    ("int[] a=[x]", "bad default '[x]' for type 'int[]'"),
    ("int[] a=3", "bad default '3' for type 'int[]'"),
    ("ScalarType a=float8", "bad default 'float8' for type 'ScalarType'"),
    ("ScalarType? a=Float32", "bad default 'Float32' for type 'ScalarType?'"),
    ("Device a=cuda", "bad default 'cuda' for type 'Device'"),
    ("Tensor? a=0", "bad default '0' for type 'Tensor?'"),
])
def test_func_bad_default(arg, reason):
    assert error(hand_written(f"f(Tensor self, *, {arg}) -> Tensor")) == f"t.yaml:3: f: {reason}"


@pytest.mark.parametrize("arg", [
    "int a=0", "int a=-12", "float a=1", "float a=-1.5e-3", "float a=2.", "Scalar a=1", "Scalar a=0.5",
    "Scalar a=False", "bool a=True", "int[] a=[]", "int[1] a=[0]", "int[]? a=None", "ScalarType a=bool",
    "ScalarType? a=None", "Device a=cpu", "Device? a=None", "Tensor? a=None", "float? a=None",
])
def test_func_good_default(arg):
    f = parse_one(hand_written(f"f(Tensor self, *, {arg}) -> Tensor"))
    assert f.schema.params[1].default == arg.split("=")[1]



def test_func_int_list_default_with_two_elements():
    f = parse_one(hand_written("f(Tensor self, int[] dims=[0, 1]) -> Tensor"))
    assert f.schema.params[1].default == "[0, 1]"


def test_func_required_argument_after_defaulted_one():
    msg = error(hand_written("f(Tensor self, int a=1, int b) -> Tensor"))
    assert msg == "t.yaml:3: f: argument 'b' without default follows one with a default"


def test_func_keyword_only_argument_may_follow_a_defaulted_one():
    f = parse_one(hand_written("f(Tensor self, int a=1, *, int b) -> Tensor"))
    assert [(p.name, p.has_default, p.kwonly) for p in f.schema.params[1:]] == [("a", True, False),
                                                                                 ("b", False, True)]


def test_func_duplicate_name():
    msg = error(hand_written("f(Tensor self) -> Tensor") + "\n" + hand_written("f(Tensor self, int a) -> Tensor"))
    assert msg == "t.yaml:7: f: duplicate name (first defined at line 3)"


def test_func_duplicate_overload_name():
    msg = error(hand_written("f.x(Tensor self) -> Tensor") + hand_written("f.x(Tensor self, int a) -> Tensor"))
    assert msg == "t.yaml:6: f.x: duplicate name (first defined at line 3)"


def test_func_duplicate_argument_name():
    assert error(hand_written("f(Tensor self, int a, float a) -> Tensor")) == \
        "t.yaml:3: f: duplicate argument name 'a'"


@pytest.mark.parametrize("func,reason", [
    ("f(Tensor self)", "cannot parse func 'f(Tensor self)': expected 'name[.overload](args) -> Return'"),
    ("f Tensor self -> Tensor",
     "cannot parse func 'f Tensor self -> Tensor': expected 'name[.overload](args) -> Return'"),
    ("f(Tensor self) -> Tensor(a!)", "'f' returns Tensor(a!), so it writes in place: its name ends in '_'"),
    ("f_(Tensor self) -> Tensor(a!)", "an op returning Tensor(a!) takes 'Tensor(a!) self' first"),
    ("f_(Tensor self, Tensor(a!) x) -> Tensor(a!)", "only the first argument, 'self', can be Tensor(a!)"),
    ("f(Tensor self) -> float", "unknown return type 'float' (expected Tensor, Tensor(a), Tensor(a!), Tensor[], "
                                "(Tensor name, Tensor name, ...), (Tensor, Tensor, ...), bool, int or ())"),
    ("f(Tensor self) -> (Tensor a)", "a tuple return has two or more results, got '(Tensor a)'"),
    ("f(Tensor self) -> (Tensor)", "a tuple return has two or more results, got '(Tensor)'"),
    ("f(Tensor self) -> (Tensor a, Tensor a)", "a tuple return names all its results, each differently, or none, "
                                               "got '(Tensor a, Tensor a)'"),
    ("f(Tensor self) -> (Tensor a, Tensor)", "a tuple return names all its results, each differently, or none, "
                                             "got '(Tensor a, Tensor)'"),
    ("f(Tensor self) -> (Tensor a, int b)", "cannot parse return 'int b' of '(Tensor a, int b)' (expected "
                                            "'Tensor name' or 'Tensor')"),
    ("f(Tensor self) -> (Tensor self, Tensor b)", "result name 'self' is also an argument name"),
    ("f(Tensor self, *, *, int a) -> Tensor", "'*' appears twice"),
    ("f(Tensor self, Tensor) -> Tensor", "cannot parse argument 'Tensor'"),
    ("f(Tensor self, int a=) -> Tensor", "cannot parse argument 'int a='"),
])
def test_func_malformed(func, reason):
    label = func.split("(")[0]
    assert error(hand_written(func)) == f"t.yaml:3: {label}: {reason}"


def test_func_inplace_names_are_derived():
    assert error(pointwise("add_(Tensor self, Tensor other) -> Tensor")) == \
        "t.yaml:3: add_: 'add_': in-place variants are derived, declare the functional op " \
        "(an op that exists only in place returns Tensor(a!))"


def test_func_missing():
    assert error("- variants: [function]\n  doc: Does it.\n") == "t.yaml:3: <entry>: missing 'func'"


def test_type_parse():
    assert Type.parse("int[3]?") == types.OptionalType(types.ListType(types.BaseType("int"), 3))
    assert str(Type.parse("int[3]?")) == "int[]?" and Type.parse("int[3]?").spelling() == "int[3]?"
    assert str(Type.parse("ScalarType?")) == "ScalarType?"
    t = Type.parse("Tensor[]")
    assert t.is_tensor_list() and t.is_tensor_like() and not t.is_tensor() and t.base == "Tensor[]"
    assert Type.parse("Tensor?").is_tensor() and Type.parse("Tensor?").optional
    assert Type.parse("int[]?").is_int_list() and Type.parse("int[]?").unwrap() == types.ListType(types.BaseType("int"))
    assert types.parse_annotated("Tensor(a!)") == (types.TENSOR, types.Annotation("a", True))
    assert types.parse_annotated("Tensor(a!)[]") == (types.ListType(types.TENSOR), types.Annotation("a", True))
    assert types.parse_annotated("Tensor(b)") == (types.TENSOR, types.Annotation("b", False))
    for bad in ("Tensor(a!)?", "Tensor(!)", "int(a)", "Tensor[2]", "Scalar[]"):
        with pytest.raises(ValueError):
            types.parse_annotated(bad)


def test_returns_are_parsed_objects():
    s = parse_one(hand_written("f(Tensor self) -> (Tensor values, Tensor indices)")).schema
    assert s.returns == (Return("values", types.TENSOR), Return("indices", types.TENSOR))
    assert s.returns_tuple and s.return_names == ("values", "indices")
    assert s.returns_text == "(Tensor values, Tensor indices)"
    g = parse_one(hand_written("g_(Tensor(a!) self) -> Tensor(a!)")).schema
    assert g.mutating and g.params[0].is_write and g.returns_text == "Tensor(a!)"
    assert g.signature_text() == "g_(Tensor(a!) input)"
    h = parse_one(hand_written("h(Tensor self) -> Tensor[]")).schema
    assert h.returns_list and h.returns == (Return(None, types.ListType(types.TENSOR)),)


def test_func_written_tensor_lists():
    """Tensor(a!)[]: a list of tensors the op writes (fused optimizer steps); any argument may be one."""
    f = parse_one(hand_written("f(Tensor(a!)[] params, Tensor(b!)[] grads, float lr) -> Tensor"))
    params, grads, _ = f.schema.params
    assert params.is_write and params.type.is_tensor_list() and params.type_text == "Tensor(a!)[]"
    assert grads.annotation == types.Annotation("b", True)
    assert gen.cpp_params(f, defaults=False) == "TensorList params, TensorList grads, double lr"


def test_func_arguments_split_at_top_level_commas():
    f = parse_one(hand_written("f(Tensor self, int[2] dims=[0, 1], str sep=', ', int k=1) -> Tensor"))
    assert [(p.name, p.default) for p in f.schema.params] == [
        ("self", None), ("dims", "[0, 1]"), ("sep", "', '"), ("k", "1")]
    # the C++ declaration leaves a non-empty list default out (an IntArrayRef over a temporary would
    # dangle); the generated parser applies it
    assert gen.cpp_params(f, defaults=True) == \
        'const Tensor& self, IntArrayRef dims, std::string_view sep = ", ", std::int64_t k = 1'


# ============================================================================ variants

def test_variants_default_is_function():
    assert parse_one(hand_written("f(Tensor self) -> Tensor")).variants == ("function",)


def test_variants_empty_means_cpp_only():
    f = parse_one("- func: f(Tensor self) -> Tensor\n  variants: []\n  dispatch: {CPU: k}\n  doc: Does it.\n")
    assert f.variants == ()


def test_variants_unknown():
    text = "- func: f(Tensor self) -> Tensor\n  variants: [function, static]\n  dispatch: {CPU: k}\n  doc: D.\n"
    assert error(text) == "t.yaml:3: f: unknown variant 'static' (expected one of function, method)"


def test_variants_not_a_list():
    text = "- func: f(Tensor self) -> Tensor\n  variants: method\n  dispatch: {CPU: k}\n  doc: D.\n"
    assert error(text) == "t.yaml:3: f: 'variants' must be a list of names"


@pytest.mark.parametrize("func", [
    "f() -> Tensor", "f(int self) -> Tensor", "f(Tensor other) -> Tensor", "f(Tensor? self) -> Tensor",
    "f(Tensor other, *, Tensor self) -> Tensor",
])
def test_variants_method_without_tensor_self(func):
    text = f"- func: {func}\n  variants: [method]\n  dispatch: {{CPU: k}}\n  doc: D.\n"
    assert error(text) == "t.yaml:3: f: a method variant needs a positional 'Tensor self' argument"


def test_variants_overloads_with_different_variants():
    text = (
        "- func: to.device(Tensor self, Device device) -> Tensor\n  variants: [method]\n"
        "  dispatch: {CPU: to_device}\n  doc: D.\n\n"
        "- func: to.dtype(Tensor self, ScalarType dtype) -> Tensor\n  variants: [function, method]\n"
        "  dispatch: {CompositeExplicit: to_dtype}\n  doc: D.\n"
    )
    assert error(text) == ("t.yaml:3: to.device: overloads of 'to' must declare the same variants (one without a "
                           "positional 'Tensor self' may leave out 'method')")


def test_variants_an_overload_without_self_is_a_function_only():
    """As PyTorch's repeat_interleave.Tensor(Tensor repeats): kael.f has both overloads, Tensor.f
    the one that binds self; the stubs and the docs say so."""
    fs = parse(
        "- func: f.counts(Tensor repeats) -> Tensor\n  dispatch: {CPU: a1}\n  doc: Counts.\n"
        "- func: f.self(Tensor self, int n) -> Tensor\n  variants: [function, method]\n  dispatch: {CPU: a2}\n"
        "  doc: Self.\n"
    )
    assert [f.variants for f in fs] == [("function",), ("function", "method")]
    assert [f.schema.full_name for f in gen.with_variant(fs, True)] == ["f.self"]
    assert [f.schema.full_name for f in gen.with_variant(fs, False)] == ["f.counts", "f.self"]
    text = ("- func: g.a(Tensor self) -> Tensor\n  dispatch: {CPU: a1}\n  doc: D.\n"
            "- func: g.b(Tensor self, int n) -> Tensor\n  variants: [function, method]\n  dispatch: {CPU: a2}\n"
            "  doc: D.\n")
    assert "overloads of 'g' must declare the same variants" in error(text)


def test_variants_overloads_with_the_same_variants():
    text = (
        "- func: arange(Scalar end) -> Tensor\n  dispatch: {CPU: a1}\n  doc: D.\n"
        "- func: arange.start(Scalar start, Scalar end) -> Tensor\n  dispatch: {CPU: a2}\n  doc: D.\n"
    )
    assert [f.schema.full_name for f in parse(text)] == ["arange", "arange.start"]


# ============================================================================ pointwise

def test_pointwise_entry():
    f = parse_one(pointwise("add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", "a + alpha * b"))
    assert f.is_pointwise and f.pointwise == "a + alpha * b"
    assert f.dispatch == ()  # the CPU kernel is generated
    assert f.operand_inputs  # two tensor inputs: Python numbers are accepted for either
    assert (f.inplace, f.gil, f.promotion, f.dtypes) == (True, "auto", "default", enums.DTYPE_NAMES)
    unary = parse_one(pointwise("neg(Tensor self) -> Tensor", "-a"))
    assert not unary.operand_inputs


def test_pointwise_with_dispatch():
    text = pointwise("f(Tensor self) -> Tensor", extra="  dispatch: {CPU: f_cpu}\n")
    assert error(text) == "t.yaml:3: f: an entry has either 'pointwise' or 'dispatch', not both"


@pytest.mark.parametrize("func,reason", [
    ("f(Tensor self) -> Tensor(a)", "pointwise ops return a new Tensor (their in-place variant is derived)"),
    ("f(Scalar s) -> Tensor", "pointwise ops take one to three Tensor inputs, got 0"),
    ("f(Tensor self, Tensor b, Tensor c, Tensor d) -> Tensor", "pointwise ops take one to three Tensor inputs, got 4"),
    ("f(Tensor a, Tensor b) -> Tensor", "a pointwise op takes a 'Tensor self' argument"),
    ("f(Tensor self, int n) -> Tensor", "pointwise argument 'n' must be Tensor or Scalar, got 'int'"),
    ("f(Tensor self, Scalar? s=None) -> Tensor", "pointwise argument 's' must be Tensor or Scalar, got 'Scalar?'"),
    ("f(Tensor self, Tensor? w=None) -> Tensor", "pointwise argument 'w' must be Tensor or Scalar, got 'Tensor?'"),
])
def test_pointwise_signature_rules(func, reason):
    assert error(pointwise(func, variants="[function]")) == f"t.yaml:3: f: {reason}"


@pytest.mark.parametrize("formula", ["''", "' '", "[a]"])
def test_pointwise_formula_must_be_an_expression(formula):
    assert error(pointwise("f(Tensor self) -> Tensor", formula)) == "t.yaml:3: f: 'pointwise' must be a C++ expression"


def test_pointwise_cannot_have_overloads():
    text = pointwise("f(Tensor self) -> Tensor") + pointwise("f.two(Tensor self, Tensor other) -> Tensor", "a + b")
    assert error(text) == "t.yaml:7: f.two: pointwise op 'f' cannot have overloads"


def test_pointwise_and_hand_written_op_cannot_share_a_name():
    text = pointwise("f(Tensor self) -> Tensor") + \
        "- func: f.k(Tensor self, int n) -> Tensor\n  variants: [function, method]\n  dispatch: {CPU: k}\n  doc: D.\n"
    assert error(text) == ("t.yaml:7: f.k: an overload of pointwise op 'f' needs a keyword-only parameter of its own, "
                           "or fewer positional arguments")


def test_pointwise_overload_with_fewer_positional_arguments():
    # where(condition) beside where(condition, self, other): no call of one can be a call of the other
    text = pointwise("f(Tensor self, Tensor other) -> Tensor", "a + b") + \
        "- func: f.one(Tensor self) -> Tensor[]\n  variants: [function, method]\n  dispatch: {CompositeImplicit: k}\n" \
        "  doc: D.\n"
    assert [f.schema.full_name for f in parse_registry(HEADER + text, "t.yaml")] == ["f", "f.one"]


def test_a_pointwise_op_takes_hand_written_overloads_with_a_keyword_of_their_own():
    text = pointwise("f(Tensor self) -> Tensor") + \
        "- func: f.k(Tensor self, *, int n) -> Tensor\n  variants: [function, method]\n  dispatch: {CPU: k}\n  doc: D.\n"
    assert [f.schema.full_name for f in parse(text)] == ["f", "f.k"]
    two = pointwise("f(Tensor self) -> Tensor") + pointwise("f.g(Tensor self, Tensor other) -> Tensor")
    assert "pointwise op 'f' cannot have overloads" in error(two)


def test_hand_written_in_place_overloads_join_the_derived_in_place_method(tmp_path):
    # div_.mode joins Tensor.div_ (the derived in-place form of pointwise div): one Python method
    # tries the derived form first, then div_.mode, which gets no method of its own; the stub
    # lists both as overloads.
    yaml_path = tmp_path / "reg.yaml"
    yaml_path.write_text(HEADER + pointwise("div(Tensor self, Tensor other) -> Tensor", "a / b")
                         + "- func: div_.mode(Tensor(a!) self, Tensor other, *, str? rounding_mode) -> Tensor(a!)\n"
                           "  variants: [method]\n  dispatch: {CompositeImplicit: div__mode}\n  doc: D.\n")
    gen.generate(yaml_path, tmp_path / "out")
    shards = "".join(p.read_text() for p in sorted((tmp_path / "out/python").glob("functions_*.cpp")))
    assert shards.count('{"div_", ') == 1  # one method table entry
    tried = re.findall(r"switch \(parse_m_div__(\d+)\(", shards)
    assert tried == ["0", "1"]
    assert "return kael::div_(self_tensor, a0);" in shards  # the derived form, tried first
    assert "return kael::div_(self_tensor, *a0, a1);" in shards  # then div_.mode
    assert '#include "kael/ops/div_.h"' in shards
    assert "py_m_div__" not in shards.replace("py_m_div_(", "")  # no second method
    pyi = (tmp_path / "out/kael/_C.pyi").read_text()
    assert re.findall(r"@overload\n    def div_\((.*)\) -> Tensor:", pyi) == [
        "self, other: Tensor | Number", "self, other: Tensor, *, rounding_mode: str | None"]


def test_neither_pointwise_nor_dispatch():
    assert error("- func: f(Tensor self) -> Tensor\n  doc: D.\n") == "t.yaml:3: f: missing 'dispatch' (or 'pointwise')"


# ============================================================================ promotion

@pytest.mark.parametrize("promotion", ["default", "int_to_float", "always_bool"])
def test_promotion(promotion):
    f = parse_one(pointwise("f(Tensor self, Tensor other) -> Tensor", "a < b", f"  promotion: {promotion}\n"))
    assert f.promotion == promotion
    assert f.inplace == (promotion != "always_bool")  # comparisons get no in-place variant


@pytest.mark.parametrize("value", ["float", "Default", "[default]"])
def test_promotion_unknown(value):
    text = pointwise("f(Tensor self) -> Tensor", extra=f"  promotion: {value}\n")
    shown = "['default']" if value == "[default]" else value
    assert error(text) == f"t.yaml:3: f: unknown promotion '{shown}' " \
                          "(expected one of default, int_to_float, always_bool)"


def test_promotion_on_a_hand_written_op():
    assert error(hand_written("f(Tensor self) -> Tensor", "  promotion: int_to_float\n")) == \
        "t.yaml:3: f: 'promotion' applies to pointwise ops only"


# ============================================================================ dtypes

def test_dtypes():
    assert parse_one(pointwise("f(Tensor self) -> Tensor")).dtypes == enums.DTYPE_NAMES
    f = parse_one(pointwise("f(Tensor self) -> Tensor", extra="  dtypes: [float32, float64]\n"))
    assert f.dtypes == ("float32", "float64")


@pytest.mark.parametrize("name", ["float8", "Float32", "uint16", "double", "half"])
def test_dtypes_unknown(name):
    text = pointwise("f(Tensor self) -> Tensor", extra=f"  dtypes: [float32, {name}]\n")
    expected = "bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64"
    assert ", ".join(enums.DTYPE_NAMES) == expected
    assert error(text) == f"t.yaml:3: f: unknown dtype '{name}' (expected one of {expected})"


def test_dtypes_not_a_list():
    text = pointwise("f(Tensor self) -> Tensor", extra="  dtypes: float32\n")
    assert error(text) == "t.yaml:3: f: 'dtypes' must be a list of names"


# ============================================================================ inplace

def test_inplace_derived_and_switched_off():
    assert parse_one(pointwise("f(Tensor self) -> Tensor")).inplace
    assert not parse_one(pointwise("f(Tensor self) -> Tensor", extra="  inplace: false\n")).inplace
    assert not parse_one(hand_written("f(Tensor self) -> Tensor")).inplace


def test_inplace_on_a_hand_written_op():
    assert error(hand_written("f(Tensor self) -> Tensor", "  inplace: true\n")) == \
        "t.yaml:3: f: 'inplace' is derived for pointwise ops only"


# ============================================================================ check

def test_check():
    f = parse_one(pointwise("add(Tensor self, Tensor other) -> Tensor", "a + b", "  check: add_check\n"))
    assert f.check == "add_check"
    assert parse_one(pointwise("f(Tensor self) -> Tensor")).check is None


def test_out_dtype():
    f = parse_one(pointwise("f(Tensor self) -> Tensor", "a < 0", "  promotion: always_bool\n  out_dtype: result\n"))
    assert f.out_dtype == "result" and f.bool_out
    g = parse_one(pointwise("f(Tensor self) -> Tensor", "a < 0", "  promotion: always_bool\n"))
    assert g.out_dtype == "castable" and not g.bool_out
    # on another op the promoted dtype, checked in the out= kernel (heaviside's)
    h = parse_one(pointwise("f(Tensor self, Tensor other) -> Tensor", "a", "  out_dtype: result\n"))
    assert h.out_dtype == "result" and h.exact_out and not h.bool_out
    assert not f.exact_out and not g.exact_out
    assert error(hand_written("f(Tensor self) -> Tensor", "  out_dtype: result\n")) == \
        "t.yaml:3: f: out_dtype 'result' applies to pointwise ops only"
    assert error(pointwise("f(Tensor self) -> Tensor", "a < 0", "  promotion: always_bool\n  out_dtype: bool\n")) == \
        "t.yaml:3: f: unknown out_dtype 'bool' (expected one of castable, result)"


def test_out_key_of_other_functions():
    f = parse_one(hand_written("f(Tensor self, Tensor other) -> Tensor", "  out: exact\n"))
    assert f.out == "exact" and not f.is_pointwise
    [base, out] = gen.cpp_variants(f)
    assert (out.name, out.schema_name, out.returns_arg, out.out_of, out.out_exact) == \
        ("f_out", "f.out", "out", "f", True)
    assert set(out.kernels) == {"CPU", "Python", "Autograd"} and set(out.kernels.values()) == {"f_out_generated"}
    assert out.grad_inputs == "&self, &other" and gen.has_out(f, method=False) and not gen.has_out(f, method=True)
    assert "out=None" in gen.py_signature(f, False, "f") and "out" not in gen.py_signature(f, True, "f")
    g = parse_one(hand_written("g(Tensor[] tensors, Tensor? w=None) -> Tensor", "  out: castable\n"))
    out = gen.cpp_variants(g, cuda=True)[1]
    assert not out.out_exact and out.grad_lists == "tensors" and out.grad_inputs == "w ? &*w : nullptr"
    assert "CUDA" in out.kernels
    assert parse_one(hand_written("h(Tensor self) -> Tensor")).out is None
    assert error(hand_written("f(Tensor self) -> Tensor", "  out: true\n")) == \
        "t.yaml:3: f: unknown out 'True' (expected one of exact, castable)"
    assert error(pointwise("f(Tensor self) -> Tensor", "a", "  out: exact\n")) == \
        "t.yaml:3: f: 'out' is for non-pointwise ops: every pointwise op takes out="
    assert error(hand_written("f(Tensor self) -> Tensor[]", "  out: exact\n")) == \
        "t.yaml:3: f: 'out' needs an op that returns one new Tensor"
    assert error(hand_written("f_(Tensor(a!) self) -> Tensor(a!)", "  out: exact\n  variants: [method]\n")) == \
        "t.yaml:3: f_: 'out' needs the function variant (methods take no out=)"
    assert error(hand_written("f_(Tensor(a!) self) -> Tensor(a!)", "  out: exact\n")) == \
        "t.yaml:3: f_: 'out' needs an op that returns one new Tensor"
    assert error(hand_written("f(Tensor self, Tensor out) -> Tensor", "  out: exact\n")) == \
        "t.yaml:3: f: 'out' needs an op without a parameter named out"


def test_check_on_a_hand_written_op():
    assert error(hand_written("f(Tensor self) -> Tensor", "  check: f_check\n")) == \
        "t.yaml:3: f: 'check' applies to pointwise ops only (hand-written kernels check their inputs)"


@pytest.mark.parametrize("name", ["add-check", "'add_check()'", "'1check'", "[a]"])
def test_check_must_be_a_function_name(name):
    text = pointwise("add(Tensor self, Tensor other) -> Tensor", "a + b", f"  check: {name}\n")
    assert error(text) == "t.yaml:3: add: 'check' must be a C++ function name"


# ============================================================================ opmath, layout, argument order

def test_opmath_names_scalars_and_the_second_input(tmp_path):
    f = parse_one(pointwise("mul(Tensor self, Tensor other) -> Tensor", "a * b", "  opmath: [other]\n"))
    assert f.opmath == ("other",) and f.opmath_other_scalar
    assert not parse_one(pointwise("mul(Tensor self, Tensor other) -> Tensor", "a * b")).opmath_other_scalar
    g = parse_one(pointwise("f(Tensor self, Scalar beta=1, Scalar t=2) -> Tensor", "a * beta + t", "  opmath: [beta]\n"))
    assert [g.scalar_in_opmath(p) for p in g.schema.scalar_params] == [True, False] and not g.opmath_other_scalar
    for bad, func in (("self", "mul(Tensor self, Tensor other) -> Tensor"), ("x", "mul(Tensor self, Tensor other) -> Tensor"),
                      ("other", "f(Tensor self, Tensor other, Tensor c) -> Tensor")):
        assert error(pointwise(func, "a", f"  opmath: [{bad}]\n")).endswith(
            f"'opmath' names Scalar parameters or the second of two tensor inputs of a pointwise op, not '{bad}'")
    assert error(pointwise("mul(Tensor self, Tensor other) -> Tensor", "a", "  opmath: other\n")) == \
        "t.yaml:3: mul: 'opmath' must be a list of names"
    yaml_path = tmp_path / "reg.yaml"
    yaml_path.write_text(HEADER + pointwise("f(Tensor self, Tensor other, Scalar beta=1, Scalar t=2) -> Tensor",
                                            "a * b * beta * t", "  opmath: [other, t]\n"))
    gen.generate(yaml_path, tmp_path / "out")
    kernel = (tmp_path / "out/src/pointwise/f.cpp").read_text()
    assert "/*opmath_other_scalar=*/true" in kernel and "/*number_self_contiguous=*/false" in kernel
    assert "const C t = t_scalar.template to<T>();" in kernel  # read in the compute type
    assert "const C beta = static_cast<T>(beta_scalar.template checked_to<S>(kSpec.name));" in kernel


def test_layout(tmp_path):
    func = "pow(Tensor self, Tensor exponent) -> Tensor"
    assert parse_one(pointwise(func, "a * b", "  layout: number_self_contiguous\n")).number_self_contiguous
    assert parse_one(pointwise(func, "a * b")).layout == "inputs"
    assert error(pointwise(func, "a * b", "  layout: rows\n")) == \
        "t.yaml:3: pow: unknown layout 'rows' (expected one of inputs, number_self_contiguous)"
    assert error(pointwise("f(Tensor self) -> Tensor", "a", "  layout: number_self_contiguous\n")) == \
        "t.yaml:3: f: layout 'number_self_contiguous' applies to pointwise ops of two tensor inputs only"
    yaml_path = tmp_path / "reg.yaml"
    yaml_path.write_text(HEADER + pointwise(func, "a * b", "  layout: number_self_contiguous\n"))
    gen.generate(yaml_path, tmp_path / "out")
    kernel = (tmp_path / "out/src/pointwise/pow.cpp").read_text()
    assert "/*number_self_contiguous=*/true" in kernel and "/*opmath_other_scalar=*/false" in kernel


def test_a_tensor_input_before_self_is_a_condition(tmp_path):
    sig = "where(Tensor condition, Tensor self, Tensor other) -> Tensor"
    f = parse_one(pointwise(sig, "'truth(a) ? b : c'"))
    assert f.condition_first and [p.name for p in f.conditions] == ["condition"]
    assert not parse_one(pointwise("f(Tensor self, Tensor other) -> Tensor", "a")).condition_first
    assert error(pointwise("f(Tensor c, Tensor d, Tensor self) -> Tensor", "a")) == \
        "t.yaml:3: f: a pointwise op takes at most one tensor input before 'self', first (a condition)"
    assert error(pointwise(sig, "'truth(a) ? b : c'", "  condition_first: true\n")) == \
        "t.yaml:3: where: unknown key(s): condition_first"
    yaml_path = tmp_path / "reg.yaml"
    yaml_path.write_text(HEADER + pointwise(sig, "'truth(a) ? b : c'"))
    gen.generate(yaml_path, tmp_path / "out")
    kernel = (tmp_path / "out/src/pointwise/where.cpp").read_text()
    assert "/*condition_first=*/true" in kernel and "/*opmath_other_scalar=*/false" in kernel


def test_simd_flag(tmp_path):
    assert parse_one(pointwise("exp(Tensor self) -> Tensor", "exp(a)", "  simd: true\n")).simd is True
    assert parse_one(pointwise("exp(Tensor self) -> Tensor", "exp(a)")).simd is False
    assert error(pointwise("exp(Tensor self) -> Tensor", "exp(a)", "  simd: 1\n")) == \
        "t.yaml:3: exp: 'simd' must be true or false"
    only = "'simd' applies to pointwise ops of one input whose formula is one call f(a)"
    for func, formula in [("exp(Tensor self) -> Tensor", "exp(a) + 1"), ("exp(Tensor self) -> Tensor", "a"),
                          ("exp(Tensor self) -> Tensor", "exp(exp(a))"),
                          ("add(Tensor self, Tensor other) -> Tensor", "add(a)"),
                          ("f(Tensor self, Scalar s) -> Tensor", "f(a)")]:
        assert error(pointwise(func, f"'{formula}'", "  simd: true\n")).endswith(only), (func, formula)
    assert error(hand_written("f(Tensor self) -> Tensor", "  simd: true\n")).endswith(only)
    # the kernel passes a formula struct whose simd() calls vmath::simd::<f>; without the key, a lambda
    yaml_path = tmp_path / "reg.yaml"
    yaml_path.write_text(HEADER + pointwise("exp(Tensor self) -> Tensor", "exp(a)", "  simd: true\n")
                         + pointwise("log(Tensor self) -> Tensor", "log(a)"))
    gen.generate(yaml_path, tmp_path / "out")
    kernel = (tmp_path / "out/src/pointwise/exp.cpp").read_text()
    assert "return vmath::simd::exp(a);" in kernel and "call.run<S, Out, 1>(Formula{});" in kernel
    assert "simd" not in (tmp_path / "out/src/pointwise/log.cpp").read_text()


# ============================================================================ dispatch

def test_dispatch_keys_and_alias():
    f = parse_one("- func: f(Tensor self) -> Tensor\n  dispatch: {CPU: f_cpu, CUDA: f_cuda}\n  doc: D.\n")
    assert f.dispatch == (("CPU", "f_cpu"), ("CUDA", "f_cuda"))
    assert f.kernel_for("CUDA") == "f_cuda" and f.kernel_for("Autograd") is None
    g = parse_one("- func: g(Tensor self) -> Tensor(a)\n  dispatch: {CompositeExplicit: g}\n  doc: D.\n")
    assert g.dispatch == (("CPU", "g"), ("CUDA", "g"))  # the alias names every backend key
    assert (g.gil, g.inplace, g.is_pointwise) == ("hold", False, False)


@pytest.mark.parametrize("key", ["GPU", "cpu", "Autograd", "Python", "CompositeImplicitAutograd"])
def test_dispatch_unknown_key(key):
    text = f"- func: f(Tensor self) -> Tensor\n  dispatch: {{{key}: f_k}}\n  doc: D.\n"
    assert error(text) == (f"t.yaml:3: f: unknown dispatch key '{key}' "
                           "(expected one of CPU, CUDA, CompositeExplicit, CompositeImplicit)")


def test_composite_implicit_serves_every_key_and_has_no_derivatives():
    alone = "- func: f(Tensor self) -> Tensor\n  dispatch: {CUDA: a, CompositeImplicit: b}\n  doc: D.\n"
    assert error(alone) == "t.yaml:3: f: dispatch key 'CUDA' given twice"
    derivative = ("- func: f(Tensor self) -> Tensor\n  dispatch: {CompositeImplicit: b}\n"
                  "  derivatives:\n    self: grad\n  doc: D.\n")
    assert error(derivative) == ("t.yaml:3: f: a CompositeImplicit op is differentiated through the ops it calls; "
                                 "give 'derivatives' only with CompositeExplicit or backend kernels")


def test_dispatch_key_given_twice_through_the_alias():
    text = "- func: f(Tensor self) -> Tensor\n  dispatch: {CPU: a, CompositeExplicit: b}\n  doc: D.\n"
    assert error(text) == "t.yaml:3: f: dispatch key 'CPU' given twice"


@pytest.mark.parametrize("kernel", ["'f cpu'", "'ns::f'", "1", "[f]"])
def test_dispatch_kernel_must_be_a_function_name(kernel):
    text = f"- func: f(Tensor self) -> Tensor\n  dispatch: {{CPU: {kernel}}}\n  doc: D.\n"
    assert error(text) == "t.yaml:3: f: dispatch kernel for 'CPU' must be a C++ function name"


@pytest.mark.parametrize("value", ["{}", "f_cpu", "[CPU]"])
def test_dispatch_must_be_a_mapping(value):
    text = f"- func: f(Tensor self) -> Tensor\n  dispatch: {value}\n  doc: D.\n"
    assert error(text) == "t.yaml:3: f: missing 'dispatch' (or 'pointwise')"


# ============================================================================ gil

@pytest.mark.parametrize("mode", ["release", "auto", "hold"])
def test_gil(mode):
    assert parse_one(hand_written("f(Tensor self) -> Tensor", f"  gil: {mode}\n")).gil == mode
    assert parse_one(pointwise("f(Tensor self) -> Tensor", extra=f"  gil: {mode}\n")).gil == mode


def test_gil_defaults():
    assert parse_one(hand_written("f(Tensor self) -> Tensor")).gil == "hold"
    assert parse_one(pointwise("f(Tensor self) -> Tensor")).gil == "auto"


@pytest.mark.parametrize("mode,shown", [("never", "never"), ("Release", "Release"), ("no", "False")])
def test_gil_unknown_mode(mode, shown):
    assert error(hand_written("f(Tensor self) -> Tensor", f"  gil: {mode}\n")) == \
        f"t.yaml:3: f: unknown gil mode '{shown}' (expected one of release, auto, hold)"


# ============================================================================ derivatives

def test_derivatives():
    text = pointwise("mul(Tensor self, Tensor other) -> Tensor", "a * b",
                     "  derivatives:\n    self: grad * other\n    other: grad * self\n")
    assert parse_one(text).derivatives == (("self", "grad * other"), ("other", "grad * self"))
    assert parse_one(pointwise("f(Tensor self) -> Tensor")).derivatives == ()


def test_derivative_for_an_unknown_input():
    text = pointwise("f(Tensor self) -> Tensor", extra="  derivatives:\n    self: grad\n    input: grad\n")
    assert error(text) == "t.yaml:3: f: derivative for unknown input 'input'"


def test_derivative_must_be_a_formula():
    text = pointwise("f(Tensor self) -> Tensor", extra="  derivatives:\n    self: 1\n")
    assert error(text) == "t.yaml:3: f: derivative for 'self' must be a C++ expression"


def test_derivatives_must_be_a_mapping():
    text = pointwise("f(Tensor self) -> Tensor", extra="  derivatives: [grad]\n")
    assert error(text) == "t.yaml:3: f: 'derivatives' must map input names to formulas"


# ============================================================================ doc

def test_doc_whitespace_is_collapsed():
    text = "- func: f(Tensor self) -> Tensor\n  dispatch: {CPU: k}\n  doc: >\n    Does\n    it,   twice.\n"
    assert parse_one(text).doc == "Does it, twice."


@pytest.mark.parametrize("doc", [None, "''", "'   '", "[a, b]", "3"])
def test_doc_missing(doc):
    text = "- func: f(Tensor self) -> Tensor\n  dispatch: {CPU: k}\n" + (f"  doc: {doc}\n" if doc else "")
    assert error(VIEW + text) == "t.yaml:7: f: missing 'doc' (one sentence users read in help())"


# ============================================================================ the entry and the file

@pytest.mark.parametrize("key", ["dispach", "description", "__line__x"])
def test_unknown_key_in_an_entry(key):
    text = pointwise("f(Tensor self) -> Tensor", extra=f"  {key}: x\n")
    assert error(text) == f"t.yaml:3: f: unknown key(s): {key}"


def test_unknown_keys_are_listed_sorted():
    text = hand_written("f(Tensor self) -> Tensor", "  zeta: 1\n  alpha: 2\n")
    assert error(text) == "t.yaml:3: f: unknown key(s): alpha, zeta"


@pytest.mark.parametrize("text,line,problem", [
    ("- func: f(Tensor self) -> Tensor\n  doc: a: b\n", 4, "mapping values are not allowed here"),
    ("- func: f(Tensor self) -> Tensor\n  dispatch: {CPU: k\n  doc: D.\n", 5, "expected ',' or '}', but got ':'"),
    ("- func: f(Tensor self) -> Tensor\n\tdoc: D.\n", 4, "found character '\\t' that cannot start any token"),
])
def test_invalid_yaml(text, line, problem):
    assert error(text) == f"t.yaml:{line}: invalid YAML: {problem}"


@pytest.mark.parametrize("text", ["", "func: f() -> Tensor\n", "just text\n"])
def test_registry_must_be_a_list(text):
    assert error(text) == "t.yaml:1: the registry must be a list of entries"



def test_entry_that_is_not_a_mapping_names_its_line():
    assert error(VIEW + "- just a string\n").startswith("t.yaml:7: ")



def test_repeated_key_in_an_entry():
    with pytest.raises(CodegenError):
        parse("- func: f(Tensor self) -> Tensor\n  dispatch: {CPU: a}\n  dispatch: {CPU: b}\n  doc: D.\n")


def test_entries_keep_registry_order_and_lines():
    fs = parse(VIEW + "\n" + hand_written("f(Tensor self) -> Tensor") + hand_written("g(Tensor self) -> Tensor"))
    assert [(f.name, f.line) for f in fs] == [("view", 3), ("f", 8), ("g", 11)]


def test_the_real_registry_parses():
    fs = parse_registry((ROOT / "native_functions.yaml").read_text())
    names = {f.schema.full_name for f in fs}
    assert {"add", "arange.start", "to.dtype", "matmul"} <= names
    assert all(f.doc for f in fs)


# ============================================================================ generated output

SMALL = """\
# a small registry for the writer tests

- func: neg(Tensor self) -> Tensor
  variants: [function, method]
  pointwise: -a
  doc: Negates.

- func: add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  variants: [function, method]
  pointwise: a + alpha * b
  check: add_check
  doc: Adds.

- func: eq(Tensor self, Tensor other) -> Tensor
  variants: [function, method]
  pointwise: a == b
  promotion: always_bool
  doc: Compares.

- func: arange(Scalar end) -> Tensor
  dispatch: {CPU: arange_end_cpu}
  doc: Counts.

- func: arange.start(Scalar start, Scalar end, Scalar step=1) -> Tensor
  dispatch: {CPU: arange_cpu}
  doc: Counts.

- func: view(Tensor self, int[] size) -> Tensor(a)
  variants: [method]
  dispatch: {CompositeExplicit: view}
  doc: Views.

- func: internal(Tensor self) -> Tensor
  variants: []
  dispatch: {CPU: internal_cpu}
  doc: C++ only.
"""


def expected_files(names, pointwise_names):
    files = {"include/kael/enums.h", "include/kael/python/param_kind.h", "include/kael/var.h",
             "include/kael/autograd/formulas.h", "include/kael/ops.h", "include/kael/native/declarations.h",
             "src/all_ops.cpp", "python/tables.cpp", "python/return_types.cpp", "kael/_C.pyi", "sources.cmake", "docs/ops.md"}
    files |= {f"src/ops_{i}.cpp" for i in range(gen.NUM_SHARDS)}
    files |= {f"python/functions_{i}.cpp" for i in range(gen.NUM_SHARDS)}
    files |= {f"src/autograd/functions_{i}.cpp" for i in range(gen.NUM_SHARDS)}  # graph nodes, Autograd kernels
    files |= {f"include/kael/autograd/formulas_{i}.h" for i in range(gen.NUM_SHARDS)}  # their formulas' declarations
    files |= {f"src/autograd/formulas_{i}.cpp" for i in range(gen.NUM_SHARDS)}  # and definitions
    files |= {f"include/kael/ops/{n}.h" for n in names}
    files |= {f"src/pointwise/{n}.cpp" for n in pointwise_names}
    files |= {f"cuda/pointwise/{n}.cu" for n in pointwise_names}
    return files


def listing(out):
    """The generated files (not codegen's cache of compiled templates, out/.jinja-cache)."""
    return {p.relative_to(out).as_posix() for p in out.rglob("*")
            if p.is_file() and not p.relative_to(out).as_posix().startswith(".jinja-cache/")}


def freeze_mtimes(out):
    """Sets every mtime to a fixed past time, so that any rewrite is visible."""
    for p in out.rglob("*"):
        if p.is_file():
            os.utime(p, ns=(10**9, 10**9))


def touched(out):
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.stat().st_mtime_ns != 10**9}


@pytest.fixture
def small(tmp_path):
    yaml_path = tmp_path / "reg.yaml"
    yaml_path.write_text(SMALL)
    out = tmp_path / "out"
    gen.generate(yaml_path, out)
    return yaml_path, out


def test_generate_writes_the_expected_files(small):
    yaml_path, out = small
    assert listing(out) == expected_files(["neg", "add", "eq", "arange", "view", "internal"], ["neg", "add", "eq"])
    pyi = (out / "kael/_C.pyi").read_text()
    assert re.search(r"^def neg\(input: Tensor, \*, out: Tensor \| None = None\) -> Tensor:\n    \"\"\"Negates.\"\"\"$",
                     pyi, re.M)
    assert re.search(r"^    def neg_\(self\) -> Tensor:$", pyi, re.M)
    assert re.search(r"^def add\(input: Tensor \| Number, other: Tensor \| Number, \*, alpha: Number = \.\.\., "
                     r"out: Tensor \| None = None\)", pyi, re.M)
    assert not re.search(r"def eq_\(", pyi)  # always_bool: no in-place variant
    assert pyi.count("@overload") == 2  # arange and arange.start
    assert not re.search(r"def internal\(", pyi)  # variants: []
    decls = (out / "include/kael/native/declarations.h").read_text()
    assert "Tensor internal_cpu(const Tensor& self);" in decls
    assert "Tensor view(const Tensor& self, IntArrayRef size);" in decls
    assert "void add_check(const Operand& self, const Operand& other, const Scalar& alpha);" in decls
    all_ops = (out / "src/all_ops.cpp").read_text()
    assert re.findall(r"&op_(\w+),", all_ops) == ["neg", "neg_inplace", "neg_out", "add", "add_inplace", "add_out",
                                                 "eq", "eq_out", "arange", "arange_start", "view", "internal"]
    cmake = (out / "sources.cmake").read_text()
    for rel in listing(out):
        if rel.endswith((".cpp", ".cu")):
            assert f'"{out / rel}"' in cmake


def test_generate_stamps_every_file(small):
    _, out = small
    for rel in listing(out):
        first = (out / rel).read_text().splitlines()[0]
        if rel.endswith(".md"):
            assert first == "<!-- @generated from codegen/templates/ops.md.j2 -- do not edit -->", (rel, first)
            continue
        comment = "#" if rel.endswith((".pyi", ".cmake")) else "//"
        assert re.fullmatch(re.escape(comment) + r" @generated from codegen/templates/[\w.]+\.j2 -- do not edit",
                            first), (rel, first)


def test_generate_does_not_rewrite_unchanged_files(small):
    yaml_path, out = small
    before = {rel: (out / rel).read_text() for rel in listing(out)}
    freeze_mtimes(out)
    writer = gen.generate(yaml_path, out)
    assert touched(out) == set()
    assert {rel: (out / rel).read_text() for rel in listing(out)} == before
    assert {p.relative_to(out).as_posix() for p in writer.written} == set(before)


def test_one_entry_edit_rewrites_only_its_files(small):
    yaml_path, out = small
    freeze_mtimes(out)
    yaml_path.write_text(SMALL.replace("doc: Negates.", "doc: Negates each element."))
    gen.generate(yaml_path, out)
    shard = gen.shard_of("neg")
    assert touched(out) == {"include/kael/ops/neg.h", f"python/functions_{shard}.cpp", "kael/_C.pyi", "docs/ops.md"}
    freeze_mtimes(out)
    yaml_path.write_text(SMALL.replace("pointwise: -a", "pointwise: 0 - a"))
    gen.generate(yaml_path, out)
    assert touched(out) == {"include/kael/ops/neg.h", f"python/functions_{shard}.cpp", "kael/_C.pyi",
                            "src/pointwise/neg.cpp", "cuda/pointwise/neg.cu",
                            "docs/ops.md"}  # (the doc edit is undone too)


def test_generate_removes_stale_files(small):
    yaml_path, out = small
    stamp = "// @generated from codegen/templates/op_header.h.j2 -- do not edit\n"
    (out / "src/pointwise/old_op.cpp").write_text(stamp)
    (out / "include/kael/ops/old_op.h").write_text(stamp)
    (out / "notes.txt").write_text("not generated: kept\n")
    text = SMALL.replace("- func: neg(Tensor self) -> Tensor\n  variants: [function, method]\n"
                         "  pointwise: -a\n  doc: Negates.\n", "")
    assert text != SMALL
    yaml_path.write_text(text)
    gen.generate(yaml_path, out)
    assert listing(out) == expected_files(["add", "eq", "arange", "view", "internal"], ["add", "eq"]) | {"notes.txt"}
    assert "neg" not in (out / "sources.cmake").read_text()
    assert not re.search(r"def neg", (out / "kael/_C.pyi").read_text())


def test_generate_fails_before_writing_anything(tmp_path):
    yaml_path = tmp_path / "reg.yaml"
    yaml_path.write_text(SMALL.replace("Tensor self, Tensor other, *", "Tensor self, Tensr other, *"))
    with pytest.raises(CodegenError, match=r"^reg\.yaml:8: add: unknown type 'Tensr'$"):
        gen.generate(yaml_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


# -- generation writes under out_dir only: every file-system call that writes is recorded.
# (Wrappers rather than sys.addaudithook: a hook could not be removed and would slow every
# later test of the session.)
_MODE_WRITES = set("wax+")
_FLAG_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def record_writes(monkeypatch):
    """Wraps the file-system calls that write; returns the list of (call, path) they record."""
    import builtins
    import io
    import shutil

    seen = []
    real_open, real_os_open = builtins.open, os.open

    def open_(file, mode="r", *args, **kwargs):
        if not isinstance(file, int) and _MODE_WRITES & set(mode):
            seen.append(("open", file))
        return real_open(file, mode, *args, **kwargs)

    def os_open(path, flags, *args, **kwargs):
        if flags & _FLAG_WRITES:
            seen.append(("os.open", path))
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(io, "open", open_)
    monkeypatch.setattr(os, "open", os_open)

    def wrap(module, name, npaths=1):
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            seen.extend((f"{module.__name__}.{name}", a) for a in args[:npaths])
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    for name in ("mkdir", "makedirs", "remove", "unlink", "rmdir", "removedirs", "truncate", "utime", "chmod"):
        wrap(os, name)
    for name in ("rename", "replace", "symlink", "link"):
        wrap(os, name, 2)
    for name in ("rmtree",):
        wrap(shutil, name)
    for name in ("copyfile", "copy", "copy2", "move", "copytree"):
        wrap(shutil, name, 2)
    return seen


def test_generate_never_writes_outside_out_dir(tmp_path, monkeypatch):
    work = tmp_path / "cwd"  # a relative out dir, resolved against the working directory
    work.mkdir()
    monkeypatch.chdir(work)
    (tmp_path / "reg.yaml").write_text(SMALL)
    (tmp_path / "edited.yaml").write_text(SMALL.replace("doc: Adds.", "doc: Adds two."))
    out = Path("build") / "generated"
    (work / out / "stale").mkdir(parents=True)
    (work / out / "stale" / "x.h").write_text("// @generated from codegen/templates/ops.h.j2 -- do not edit\n")
    seen = record_writes(monkeypatch)
    gen.generate(tmp_path / "reg.yaml", out)
    gen.generate(tmp_path / "edited.yaml", out)  # rewrites some files
    monkeypatch.undo()
    calls = {call for call, _ in seen}
    assert {"open", "os.mkdir", "os.unlink"} <= calls, calls  # the wrappers see the writer's calls
    root = (work / out).resolve()
    for call, path in seen:
        resolved = (work / os.fsdecode(path)).resolve()
        assert resolved.is_relative_to(root), f"{call} outside out_dir: {resolved}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "edited.yaml", "reg.yaml"]
    assert [p.name for p in work.iterdir()] == ["build"]
    assert [p.name for p in (work / "build").iterdir()] == ["generated"]


# ============================================================================ the command CMake runs

def run_codegen(yaml_path, out):
    return subprocess.run([sys.executable, "-m", "codegen.gen", "--yaml", str(yaml_path), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_cli_fails_with_file_line_and_reason(tmp_path):
    bad = tmp_path / "native_functions.yaml"
    bad.write_text(SMALL.replace("  promotion: always_bool\n", "  promotion: always_boool\n"))
    r = run_codegen(bad, tmp_path / "out")
    assert r.returncode == 1
    assert r.stderr == ("error: native_functions.yaml:14: eq: unknown promotion 'always_boool' "
                        "(expected one of default, int_to_float, always_bool)\n")
    assert r.stdout == ""
    assert not (tmp_path / "out").exists()


def test_cli_fails_on_invalid_yaml(tmp_path):
    bad = tmp_path / "native_functions.yaml"
    bad.write_text(SMALL.replace("  doc: Adds.\n", "  doc: Adds: two.\n"))
    r = run_codegen(bad, tmp_path / "out")
    assert (r.returncode, r.stderr) == (1, "error: native_functions.yaml:12: invalid YAML: "
                                           "mapping values are not allowed here\n")


# ============================================================================ stricter validation

@pytest.mark.parametrize("entry, message", [
    (hand_written("f(Tensor self, *) -> Tensor"), "'*' must be followed by keyword-only arguments"),
    (hand_written("f(Tensor self, Tensor input) -> Tensor"), "argument name 'input' is reserved"),
    (hand_written("f(Tensor self) -> Tensor", "  dtypes: [float32]\n"), "'dtypes' applies to pointwise ops only"),
    (pointwise("f(Tensor self) -> Tensor", extra="  dtypes: []\n"), "'dtypes' must list each supported dtype once"),
    (pointwise("f(Tensor self) -> Tensor", extra="  dtypes: [float32, float32]\n"),
     "'dtypes' must list each supported dtype once"),
    (pointwise("f(Tensor self) -> Tensor", extra="  inplace: 'no'\n"), "'inplace' must be true or false"),
    (pointwise("f(Tensor x) -> Tensor", variants="[function]"),
     "a pointwise op takes a 'Tensor self' argument"),
    (hand_written("f(Tensor self) -> Tensor", "  reads_values: 'no'\n"), "'reads_values' must be true or false"),
    (pointwise("f(Tensor self) -> Tensor", extra="  reads_values: false\n"),
     "'reads_values' applies to hand-written ops only"),
    (hand_written("f(Tensor[] tensors) -> Tensor", "  varargs: 1\n"), "'varargs' must be true or false"),
    (hand_written("f(Tensor[] tensors, int dim) -> Tensor", "  varargs: true\n"),
     "'varargs' needs a Tensor[] as the last positional argument"),
], ids=["trailing-star", "input-name", "dtypes-on-dispatch", "empty-dtypes", "repeated-dtype", "inplace-not-bool",
        "pointwise-first-not-self", "reads-values-not-bool", "reads-values-on-pointwise", "varargs-not-bool",
        "varargs-not-last"])
def test_stricter_validation(entry, message):
    assert error(VIEW + entry).startswith("t.yaml:7: f: " + message)


def test_bool_inputs_of_hand_written_cpu_kernels(tmp_path):
    # Note [Bool bytes]: the CPU entry of a hand-written kernel passes each tensor it reads and does
    # not write through BoolInput; not a composite's, a view's, a pointwise op's, or one that
    # reads no values
    (tmp_path / "reg.yaml").write_text(HEADER + VIEW + """\
- func: f(Tensor self, Tensor? mask, Tensor[] others, int n) -> Tensor
  dispatch: {CPU: f_cpu, CUDA: f_cuda}
  doc: Does it.
- func: w_(Tensor(a!) self, Tensor other) -> Tensor(a!)
  dispatch: {CPU: w_cpu}
  doc: Does it.
- func: g(Tensor self) -> Tensor
  dispatch: {CompositeExplicit: g_any}
  doc: Does it.
- func: h(Tensor self) -> Tensor
  dispatch: {CPU: h_cpu}
  reads_values: false
  doc: Does it.
- func: k(Tensor self) -> Tensor
  pointwise: a
  doc: Does it.
""")
    gen.generate(tmp_path / "reg.yaml", tmp_path / "cpu")
    src = "".join(p.read_text() for p in (tmp_path / "cpu" / "src").glob("ops_*.cpp"))
    assert ("  const native::BoolInput self_read(self);\n"
            "  const native::OptionalBoolInput mask_read(mask);\n"
            "  const native::BoolListInput others_read(others);\n"
            "  return native::f_cpu(self_read.get(), mask_read.get(), others_read.get(), n);\n") in src
    assert "  const native::BoolInput other_read(other);\n  return native::w_cpu(self, other_read.get());\n" in src
    assert src.count("_read(") == 4
    assert "return native::g_any(self);" in src and "return native::h_cpu(self);" in src


def test_varargs_index_in_the_parsers(tmp_path):
    # `varargs: true`: the parser may spread the last positional Tensor[] (index 1 here, after the
    # equation); other entries have -1
    (tmp_path / "reg.yaml").write_text(HEADER + """\
- func: f(str equation, Tensor[] tensors, *, int n=0) -> Tensor
  dispatch: {CompositeImplicit: f_any}
  varargs: true
  doc: Does it.
- func: g(Tensor[] tensors) -> Tensor
  dispatch: {CompositeImplicit: g_any}
  doc: Does it.
""")
    gen.generate(tmp_path / "reg.yaml", tmp_path / "out")
    src = "".join(p.read_text() for p in (tmp_path / "out" / "python").glob("*.cpp"))
    assert "kParams_f_f_0, 3, false, false,\n    1, kInterned_f_f_0};" in src
    assert "kParams_f_g_0, 1, false, false,\n    -1, kInterned_f_g_0};" in src


def test_cuda_kernels_are_referenced_only_in_cuda_builds(tmp_path):
    (tmp_path / "reg.yaml").write_text(HEADER + "- func: f(Tensor self) -> Tensor\n"
                                       "  dispatch: {CPU: f_cpu, CUDA: f_cuda}\n  doc: Does it.\n")
    gen.generate(tmp_path / "reg.yaml", tmp_path / "cpu")
    gen.generate(tmp_path / "reg.yaml", tmp_path / "cuda", cuda=True)
    cpu = "".join(p.read_text() for p in (tmp_path / "cpu" / "src").glob("ops_*.cpp"))
    cuda = "".join(p.read_text() for p in (tmp_path / "cuda" / "src").glob("ops_*.cpp"))
    assert "native::f_cuda" not in cpu and "&f_missing" in cpu
    assert "native::f_cuda" in cuda


def test_cmake_configure_stops_on_a_malformed_entry(tmp_path):
    # End to end: a copy of the source tree whose registry has a bad type must fail to
    # configure, and CMake must show the file, the line and the reason.
    import shutil

    venv_cmake = Path(sys.executable).parent / "cmake"  # requirements-dev.txt installs it
    cmake = str(venv_cmake) if venv_cmake.exists() else shutil.which("cmake")
    if cmake is None:
        pytest.fail("cmake is not on PATH (tools/setup_env.sh installs it into .venv)")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("CMakeLists.txt", "native_functions.yaml"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "codegen", src / "codegen", ignore=shutil.ignore_patterns("__pycache__"))
    text = (src / "native_functions.yaml").read_text()
    line = text.splitlines().index("- func: mul(Tensor self, Tensor other) -> Tensor") + 1
    (src / "native_functions.yaml").write_text(text.replace("- func: mul(Tensor self, Tensor other)",
                                                            "- func: mul(Tensor self, Tensr other)"))
    dnnl_dir = ROOT / ".venv" / "lib" / "cmake" / "dnnl"
    ninja = Path(sys.executable).parent / "ninja"
    generator = ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja.exists() else []
    result = subprocess.run(
        [cmake, "-S", str(src), "-B", str(tmp_path / "build"), *generator, f"-DPython3_EXECUTABLE={sys.executable}",
         f"-Ddnnl_DIR={dnnl_dir}", "-DKAEL_BUILD_PYTHON=OFF"],
        capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "kael codegen failed" in output
    assert f"native_functions.yaml:{line}: mul: unknown type 'Tensr'" in output


# ============================================================================ formulas compile with their registry line

def compile_syntax_only(source, include):
    """Compiles one generated source with the repository's headers; returns (status, stderr)."""
    import shutil
    import subprocess
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.fail("no C++ compiler on PATH (the build needs one)")
    proc = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", f"-I{ROOT / 'aten/include'}", f"-I{include}",
                           str(source)], capture_output=True, text=True)
    return proc.returncode, proc.stderr


def test_pointwise_formula_with_an_unknown_function_fails_at_its_registry_line(tmp_path):
    # The C library has a `y0` (a Bessel function of doubles): an unqualified call would bind to
    # it silently. Codegen rejects a name kael's math namespace does not define, with the line.
    text = HEADER + pointwise("good(Tensor self) -> Tensor", "exp(a) + sgn(a)") + "\n" + \
        pointwise("bad(Tensor self) -> Tensor", "y0(a) + T(1)")
    (tmp_path / "t.yaml").write_text(text)
    line = text.splitlines().index("  pointwise: y0(a) + T(1)") + 1
    with pytest.raises(CodegenError) as info:
        gen.generate(tmp_path / "t.yaml", tmp_path / "out")
    assert str(info.value) == (f"t.yaml:{line}: bad: the formula calls 'y0', which kael's math namespace does "
                               "not define (aten/include/kael/native/math.h)")
    # What passes the check is compiled qualified, so it can only bind to kael's math functions.
    # (exp computes in floats, like the registry's exp: integer formulas wrap and have no exp)
    (tmp_path / "t.yaml").write_text(HEADER + pointwise("good(Tensor self) -> Tensor", "exp(a) + sgn(a)",
                                                        "  promotion: int_to_float\n  dtypes: [float32, float64]\n"))
    gen.generate(tmp_path / "t.yaml", tmp_path / "out")
    good = (tmp_path / "out/src/pointwise/good.cpp").read_text()
    assert "math::exp(a) + math::sgn(a)" in good and "#line" not in good
    status, err = compile_syntax_only(tmp_path / "out/src/pointwise/good.cpp", tmp_path / "out/include")
    assert status == 0, err


def test_math_functions_are_read_from_math_h():
    names = gen.math_functions()
    assert {"exp", "log1p", "rsqrt", "sigmoid", "relu", "maximum", "minimum", "pow", "sgn"} <= names
    assert "y0" not in names and "printf" not in names


def test_inserting_an_entry_rewrites_no_other_kernel(tmp_path):
    first = pointwise("f(Tensor self) -> Tensor", "exp(a)")
    last = pointwise("g(Tensor self) -> Tensor", "sgn(a)")
    (tmp_path / "t.yaml").write_text(HEADER + first + "\n" + last)
    gen.generate(tmp_path / "t.yaml", tmp_path / "out")
    before = (tmp_path / "out/src/pointwise/g.cpp").read_text()
    (tmp_path / "t.yaml").write_text(HEADER + first + "\n" + pointwise("h(Tensor self) -> Tensor", "-a") + "\n" + last)
    gen.generate(tmp_path / "t.yaml", tmp_path / "out")
    assert (tmp_path / "out/src/pointwise/g.cpp").read_text() == before


def test_derivative_formulas_compile_and_an_unknown_name_fails_naming_its_entry(tmp_path):
    entry = ("- func: f(Tensor self, Tensor other) -> Tensor\n  variants: [function, method]\n"
             "  dispatch: {CPU: f_cpu}\n  derivatives:\n    self: grad.f(other)\n    other: {formula}\n"
             "  doc: Does it.\n")
    good = HEADER + entry.replace("{formula}", "maybe_multiply(grad, 2).f(self)")
    bad = HEADER + entry.replace("{formula}", "frobnicate(grad)")
    for name, text, ok in (("good", good, True), ("bad", bad, False)):
        (tmp_path / f"{name}.yaml").write_text(text)
        gen.generate(tmp_path / f"{name}.yaml", tmp_path / name)
        status, err = compile_syntax_only(tmp_path / name / f"src/autograd/formulas_{gen.shard_of('f')}.cpp",
                                          tmp_path / name / "include")
        if ok:
            assert status == 0, err
        else:
            assert status != 0 and "bad.yaml: f, derivative for other:1:" in err and "frobnicate" in err, err


def test_a_device_argument_picks_the_dispatch_key(tmp_path):
    (tmp_path / "reg.yaml").write_text(
        HEADER + "- func: f_like(Tensor self, *, Device? device=None) -> Tensor\n  dispatch: {CPU: f_cpu}\n"
        "  doc: D.\n\n- func: g(Tensor self, Tensor other) -> Tensor\n  dispatch: {CPU: g_cpu}\n  doc: D.\n\n"
        "- func: h(int[] size, *, Device? device=None) -> Tensor\n  dispatch: {CPU: h_cpu}\n  doc: D.\n")
    fs = {f.name: f for f in parse_registry((tmp_path / "reg.yaml").read_text(), "reg.yaml")}
    assert gen.key_expr(fs["f_like"]) == "dispatch::on_device(dispatch::key_set_of(self), device)"
    assert gen.key_expr(fs["g"]) == "dispatch::key_set_of(self) | dispatch::key_set_of(other)"
    assert gen.key_expr(fs["h"]) == "dispatch::key_set_of(device)"
    gen.generate(tmp_path / "reg.yaml", tmp_path / "out")
    ops = "".join(p.read_text() for p in (tmp_path / "out" / "src").glob("ops_*.cpp"))
    assert "const DispatchKeySet keys = dispatch::on_device(dispatch::key_set_of(self), device);" in ops


# ---- CUDA kernels from the same `pointwise:` formulas (Note [Pointwise backends])

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc (the CUDA compiler) is not installed; the generated "
                                                     "CUDA kernels cannot be compiled here")


# As CMakeLists.txt: warnings are errors, except nvcc's "pointless comparison of unsigned
# integer with zero" (186), which generic math (relu, sgn) instantiated for uint8 triggers.
NVCC_WARNINGS = ["--Werror", "all-warnings", "-diag-suppress", "186"]


def nvcc_compile(sources, include, out, timeout=900):
    """Compiles .cu files as one translation unit (host and device code, no GPU needed)."""
    unity = out.with_suffix(".cu")
    unity.write_text("".join(f'#include "{s}"\n' for s in sources))
    cmd = [NVCC, "-std=c++20", "-x", "cu", "-c", *NVCC_WARNINGS, "-Xcompiler", "-fopenmp,-Wall,-Wextra",
           "-I", str(include), "-I", str(ROOT / "aten" / "include"), str(unity), "-o", str(out)]
    # (without the sanitizer runtimes tools/run_sanitizers.sh preloads into Python: nvcc crashes with them)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def test_every_pointwise_entry_gets_a_cuda_kernel_source(tmp_path):
    gen.generate(ROOT / "native_functions.yaml", tmp_path)
    pointwise = {f.name for f in parse_registry((ROOT / "native_functions.yaml").read_text(), "native_functions.yaml")
                 if f.is_pointwise}
    sources = {p.stem: p.read_text() for p in (tmp_path / "cuda" / "pointwise").glob("*.cu")}
    assert set(sources) == pointwise and pointwise
    add = sources["add"]
    assert "__host__ __device__ auto operator()(T a, T b) const" in add and "return a + alpha * b;" in add
    assert "Tensor add_cuda_generated(" in add and "add__cuda_generated(" in add and "add_out_cuda_generated(" in add
    listed = (tmp_path / "sources.cmake").read_text().split("set(KAEL_GENERATED_CUDA_SOURCES")[1]
    assert all(str(tmp_path / "cuda" / "pointwise" / f"{n}.cu") in listed for n in pointwise)


@needs_nvcc
def test_generated_cuda_kernels_compile_with_nvcc(tmp_path):
    gen.generate(ROOT / "native_functions.yaml", tmp_path / "gen")
    sources = sorted((tmp_path / "gen" / "cuda" / "pointwise").glob("*.cu"))
    r = nvcc_compile(sources, tmp_path / "gen" / "include", tmp_path / "kernels.o")
    assert r.returncode == 0, r.stdout + r.stderr
    symbols = subprocess.run(["nm", "-C", str(tmp_path / "kernels.o")], capture_output=True, text=True).stdout
    for s in sources:
        for variant in ("", "_out"):
            assert f" T kael::native::{s.stem}{variant}_cuda_generated(" in symbols, s.stem
    assert "elementwise_kernel" in symbols  # device code was generated, not only the host stubs


@needs_nvcc
def test_cuda_formulas_must_use_host_device_math(tmp_path):
    # The test of the test above: math functions without __host__ __device__ cannot be called
    # from a kernel, and the compile fails.
    include = tmp_path / "aten_include"
    shutil.copytree(ROOT / "aten" / "include", include)
    math_h = include / "kael" / "native" / "math.h"
    text = math_h.read_text()
    assert "#define KAEL_HOST_DEVICE __host__ __device__" in text
    math_h.write_text(text.replace("#define KAEL_HOST_DEVICE __host__ __device__", "#define KAEL_HOST_DEVICE"))
    gen.generate(ROOT / "native_functions.yaml", tmp_path / "gen")
    src = tmp_path / "gen" / "cuda" / "pointwise" / "rsqrt.cu"
    unity = tmp_path / "rsqrt_all.cu"
    unity.write_text(f'#include "{src}"\n')
    cmd = [NVCC, "-std=c++20", "-x", "cu", "-c", *NVCC_WARNINGS, "-Xcompiler", "-fopenmp",
           "-I", str(tmp_path / "gen" / "include"), "-I", str(include), str(unity), "-o", str(tmp_path / "r.o")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    assert r.returncode != 0
    assert "__host__" in r.stdout + r.stderr and "rsqrt" in r.stdout + r.stderr


def test_unnamed_tuple_returns():
    """`(Tensor, Tensor)` is a plain tuple in Python: no kael.return_types entry; formulas need
    names, so an op with derivatives must name its results; overloads agree on the names."""
    fs = parse(hand_written("m(Tensor self) -> (Tensor, Tensor)") +
               hand_written("m.dim(Tensor self, int dim) -> (Tensor, Tensor)") +
               hand_written("n(Tensor self) -> (Tensor values, Tensor indices)"))
    assert [f.name for f in gen.tuple_returns(fs)] == ["n"]
    assert gen.cpp_return(fs[0]) == "std::tuple<Tensor, Tensor>" and gen.pyi_return(fs[0]) == "tuple[Tensor, Tensor]"
    mixed = parse(hand_written("m(Tensor self) -> (Tensor, Tensor)") +
                  hand_written("m.dim(Tensor self, int dim) -> (Tensor values, Tensor indices)"))
    with pytest.raises(CodegenError, match="overloads of 'm' with tuple returns must name the same results"):
        gen.tuple_returns(mixed)
    derived = parse(hand_written("m(Tensor self) -> (Tensor, Tensor)", "  derivatives:\n    self: grad\n"))
    with pytest.raises(CodegenError, match="an op with derivatives names its results"):
        gen.check_return_names(derived, "t.yaml")


def test_nothing_returned(tmp_path):
    """`-> ()` (_adam_step_): an op that writes its Tensor(a!)[] arguments; void in C++, nothing on
    a boxed stack, None in Python."""
    func = "s_(Tensor(a!)[] self, Tensor[] g, *, float lr) -> ()"
    f = parse_one(hand_written(func))
    assert f.schema.returns_nothing and not f.schema.returns_tensor and not f.schema.mutating
    assert f.schema.returns == () and f.schema.returns_text == "()"
    assert gen.cpp_return(f) == "void" and gen.py_return(f) == "void" and gen.pyi_return(f) == "None"
    assert error(hand_written("s(Tensor(a!)[] self) -> ()")) == \
        "t.yaml:3: s: 's' returns nothing, so it writes a Tensor(a!)[] argument and its name ends in '_'"
    assert error(hand_written("s_(Tensor[] self) -> ()")) == \
        "t.yaml:3: s_: 's_' returns nothing, so it writes a Tensor(a!)[] argument and its name ends in '_'"
    assert error(hand_written(func, "  derivatives:\n    g: grad\n")) == \
        "t.yaml:3: s_: an op returning () has no derivatives and no pointwise formula"
    assert "out" in error(hand_written(func, "  out: exact\n"))
    yaml_path = tmp_path / "reg.yaml"
    yaml_path.write_text(HEADER + hand_written(func))
    gen.generate(yaml_path, tmp_path / "out")
    shard = "".join(p.read_text() for p in sorted((tmp_path / "out/src").glob("ops_*.cpp")))
    assert "void s_(TensorList self, TensorList g, double lr) {" in shard
    boxed = shard[shard.index("void s__boxed("):]
    boxed = boxed[:boxed.index("\n}\n")]
    assert "push_result" not in boxed and "dispatch::drop(stack, 3);" in boxed  # nothing left on the stack
    boxing = shard[shard.index("void s__boxing("):]
    boxing = boxing[:boxing.index("\n}\n")]
    assert "pop_result" not in boxing and "return" not in boxing
    pyi = (tmp_path / "out/kael/_C.pyi").read_text()
    assert re.search(r"def s_\(input: Sequence\[Tensor\], g: Sequence\[Tensor\], \*, lr: float\) -> None:", pyi), pyi


def test_bool_and_int_returns():
    """`-> bool` and `-> int` (is_nonzero, numel): a C++ bool or std::int64_t, a Python bool or int
    through ValueResult (guarded() hands integral results back as they are); no derivatives, and
    no Var method (kael::Tensor has numel() of its own)."""
    b = parse_one(hand_written("b(Tensor self) -> bool"))
    i = parse_one(hand_written("i(Tensor self) -> int"))
    assert b.schema.returns_value and not b.schema.returns_tensor and gen.cpp_return(b) == "bool"
    assert gen.cpp_return(i) == "std::int64_t" and gen.py_return(i) == "ValueResult<std::int64_t>"
    assert gen.pyi_return(b) == "bool" and gen.pyi_return(i) == "int"
    assert error(hand_written("f(Tensor self) -> bool", "  derivatives:\n    self: grad\n")) == \
        "t.yaml:3: f: an op returning bool has no derivatives"
    for bad in ("bool?", "float", "int[]", "(Tensor a, bool b)"):
        assert "cannot parse return" in error(hand_written(f"f(Tensor self) -> {bad}")) or \
            "unknown return type" in error(hand_written(f"f(Tensor self) -> {bad}"))
