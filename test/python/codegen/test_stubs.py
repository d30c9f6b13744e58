"""The hand-written part of kael/_C.pyi agrees with what the runtime accepts.

kael/_C.pyi is rendered from codegen/templates/_C.pyi.j2: the registry's ops are generated
(and checked with the registry in test_registry.py); everything else is written by hand for
what csrc/ binds by hand: kael.tensor, the runtime controls, Tensor's methods, properties and
operators, dtype. Here, for each of those:

- names: every hand-written function, method and property of the runtime has a stub, and
  every hand-written stub exists at runtime;
- signatures: the stub's parameters (names, positional-only / positional-or-keyword /
  keyword-only, defaults) equal the runtime's signature. Hand-written C functions declare it in
  the first lines of their docstrings ("size($self, dim=None)\\n--\\n\\n"), which CPython turns
  into __text_signature__ (so inspect.signature and help() show it too); slot methods such as
  __add__ have CPython's own;
- behaviour: the runtime accepts exactly what that signature says: each parameter by position
  and/or keyword as its kind allows, required ones required, no extra positional argument, no
  unknown keyword;
- properties are read-only in both, or writable in both.

The last tests feed the checks a drifted stub and a lying signature, and see them fail.
"""
import ast
import os
import inspect
import sys
from pathlib import Path

import pytest

import kael

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codegen.model import parse_registry  # noqa: E402

P = inspect.Parameter
REGISTRY = parse_registry((ROOT / "native_functions.yaml").read_text(), "native_functions.yaml")
GENERATED_FUNCTIONS = {f.name for f in REGISTRY if "function" in f.variants}
GENERATED_METHODS = ({f.name for f in REGISTRY if "method" in f.variants}
                     | {f.name + "_" for f in REGISTRY if f.is_pointwise and f.inplace and "method" in f.variants})
# torch's other names of generated methods (Tensor.multiply is Tensor.mul: kael/_composites.py)
GENERATED_METHODS |= {n for n in kael._composites.ALIAS_MEMBERS if n in vars(kael.Tensor)}

# Members every object has, whose signatures kael does not change: they need no stub.
OBJECT_PROTOCOL = {"__new__", "__repr__", "__str__", "__hash__", "__doc__", "__reduce__"}
# Tensor.__delitem__ exists because one C slot serves item assignment and deletion; deletion
# raises TypeError (test_item_deletion_raises), so the stub leaves it out.
NOT_IN_STUB = {"Tensor": OBJECT_PROTOCOL | {"__delitem__"}, "dtype": OBJECT_PROTOCOL, "Generator": OBJECT_PROTOCOL,
               "BpeTokenizer": OBJECT_PROTOCOL}
MODULE_DUNDERS = {"__name__", "__doc__", "__package__", "__loader__", "__spec__", "__file__"}
# The dtype aliases kael.int and kael.float would shadow the builtins the stub's annotations
# name, so _C.pyi leaves them out (see the template).
NOT_IN_MODULE_STUB = {"int", "float"}

_SCRATCH = []


def _scratch_file(name, write=False):
    """A path in a directory of this module's own (a valid safetensors file when `write`)."""
    import tempfile
    if not _SCRATCH:
        _SCRATCH.append(tempfile.TemporaryDirectory(prefix="kael-stubs-"))
    path = Path(_SCRATCH[0].name) / name
    if write:
        kael.save_safetensors({"w": kael.ones(2)}, path)
    return str(path)


# A valid value for each parameter of a hand-written callable, for calling it every way its
# signature allows (callables give fresh values).
class _Overrides:
    """An argument with a __kael_function__ override (a sample for _handle_kael_function)."""

    @classmethod
    def __kael_function__(cls, func, types, args=(), kwargs=None):
        return "handled"


_GPT_CONFIG = (11, 4, 1, 2, 4, 0.0, True, 1e-5)  # vocab, block, layers, heads, width, dropout, bias, eps

SAMPLES = {
    ("tensor", "data"): [1.0],
    ("_autocast_is_enabled", "device"): 0,
    ("_autocast_get_dtype", "device"): 0,
    ("_autocast_cast", "tensor"): lambda: kael.ones(1),
    ("_autocast_cast", "device"): 0,
    ("_autocast_cast", "dtype"): kael.bfloat16,
    ("tensor", "dtype"): kael.float32,
    ("tensor", "device"): "cpu",
    ("allocator_stats", "device"): "cpu",
    ("empty_cache", "device"): "cpu",
    ("frombuffer", "buffer"): lambda: bytearray(8),
    ("frombuffer", "dtype"): kael.float32,
    ("frombuffer", "count"): -1,
    ("frombuffer", "offset"): 0,
    ("save_safetensors", "tensors"): lambda: {"w": kael.ones(2)},
    ("save_safetensors", "path"): lambda: _scratch_file("saved.safetensors"),
    ("save_safetensors", "metadata"): None,
    ("load_safetensors", "path"): lambda: _scratch_file("loaded.safetensors", write=True),
    ("load_safetensors", "mmap"): False,
    ("read_safetensors_metadata", "path"): lambda: _scratch_file("metadata.safetensors", write=True),
    ("_native_ref", "tensor"): lambda: kael.ones(1),
    ("_drop_native_ref", "capsule"): lambda: kael._C._native_ref(kael.ones(1)),
    ("_drop_native_ref", "on_new_thread"): False,
    ("set_num_threads", "n"): lambda: kael.get_num_threads(),
    ("set_default_dtype", "d"): lambda: kael.get_default_dtype(),  # (the probes change no setting)
    ("_set_printoptions", "precision"): lambda: kael._C._get_printoptions()[0],
    ("_set_printoptions", "threshold"): lambda: kael._C._get_printoptions()[1],
    ("_set_printoptions", "edgeitems"): lambda: kael._C._get_printoptions()[2],
    ("_set_printoptions", "linewidth"): lambda: kael._C._get_printoptions()[3],
    ("_set_printoptions", "sci_mode"): lambda: kael._C._get_printoptions()[4],
    ("_trace_dispatch", "fn"): lambda: (lambda: None),
    ("_parallel_for_test", "n"): 10,
    ("_parallel_for_test", "grain"): 4,
    ("_parallel_for_test", "fail_at"): (),
    ("_parallel_for_stall_test", "n"): 10,
    ("_parallel_for_stall_test", "grain"): 4,
    ("_parallel_for_stall_test", "on_caller"): True,
    ("_parallel_for_stall_test", "timeout_s"): 1.0,
    ("promote_types", "type1"): kael.float32,
    ("promote_types", "type2"): kael.int64,
    ("can_cast", "from_"): kael.int64,
    ("can_cast", "to"): kael.float32,
    ("result_type", "tensor1"): lambda: kael.ones(1),
    ("result_type", "tensor2"): 2.5,
    ("Tensor", "data"): lambda: kael.ones(1),
    ("Tensor.size", "dim"): 0,
    ("Tensor.stride", "dim"): 0,
    ("Tensor.allclose", "other"): lambda: kael.ones(1),
    ("Tensor.allclose", "rtol"): 1e-5,
    ("Tensor.allclose", "atol"): 1e-8,
    ("Tensor.allclose", "equal_nan"): False,
    ("Tensor.equal", "other"): lambda: kael.ones(1),
    ("Tensor.nonzero", "as_tuple"): True,
    ("Tensor.unique", "sorted"): True,
    ("Tensor.unique", "return_inverse"): True,
    ("Tensor.unique", "return_counts"): False,
    ("Tensor.unique", "dim"): 0,
    ("Generator", "device"): "cpu",
    ("_register_device_class", "cls"): kael.device,
    ("_tensor_extend", "mapping"): lambda: {},
    ("_from_pointer", "owner"): lambda: bytearray(8),
    ("_from_pointer", "address"): 0,
    ("_from_pointer", "nbytes"): 0,
    ("_from_pointer", "dtype"): kael.float32,
    ("_from_pointer", "sizes"): (0,),
    ("_from_pointer", "strides"): (1,),
    ("_from_pointer", "offset"): 0,
    ("_storage_ref", "tensor"): lambda: kael.ones(1),
    ("_parse_device", "name"): "cpu",
    ("_kael_function_enabled", "enabled"): True,
    ("_has_kael_function", "args"): (),
    ("_has_kael_function", "kwargs"): None,
    ("_handle_kael_function", "func"): lambda: len,
    ("_handle_kael_function", "args"): lambda: (_Overrides(),),
    ("_handle_kael_function", "kwargs"): None,
    ("Tensor._set_data", "other"): lambda: kael.ones(1, 1),
    ("Tensor.as_subclass", "cls"): kael.Tensor,
    ("Generator.manual_seed", "seed"): 0,
    ("Generator.set_state", "new_state"): lambda: kael.Generator().get_state(),
    ("BpeTokenizer", "mergeable_ranks"): lambda: {bytes([b]): b for b in range(256)},
    ("BpeTokenizer", "special_tokens"): lambda: {"<|end|>": 256},
    ("BpeTokenizer", "pattern"): None,
    ("BpeTokenizer.encode", "text"): "hello",
    ("BpeTokenizer.encode", "allowed_special"): "all",
    ("BpeTokenizer.encode", "disallowed_special"): (),
    ("BpeTokenizer.encode_ordinary", "text"): "hello",
    ("BpeTokenizer.encode_batch", "texts"): lambda: ["hello", "world"],
    ("BpeTokenizer.encode_batch", "num_threads"): 2,
    ("BpeTokenizer.encode_batch", "allowed_special"): "all",
    ("BpeTokenizer.encode_batch", "disallowed_special"): (),
    ("BpeTokenizer.pretokenize", "text"): "hello world",
    ("BpeTokenizer.decode", "ids"): lambda: [104, 105],
    ("BpeTokenizer.decode", "errors"): "strict",
    ("BpeTokenizer.decode_bytes", "ids"): lambda: [104, 105],
    ("BpeTokenizer.id_to_token", "id"): 104,
    ("BpeTokenizer.token_to_id", "token"): b"h",
    ("BpeTokenizer.save", "path"): os.devnull,
    ("tensor", "requires_grad"): False,
    # autograd: values that leave the thread's modes as they are
    ("_set_grad_enabled", "mode"): True,
    ("_set_inference_mode", "mode"): False,
    ("_set_anomaly_enabled", "mode"): False,
    ("_run_backward", "tensors"): lambda: ((kael.ones(1, requires_grad=True) * 2).sum(),),
    ("_run_backward", "grad_tensors"): (None,),
    ("_run_backward", "retain_graph"): False,
    ("_run_backward", "create_graph"): False,
    ("_run_backward", "inputs"): (),
    ("_grad", "outputs"): lambda: (kael.ones(1),),
    ("_grad", "inputs"): lambda: (kael.ones(1),),
    ("_grad", "grad_outputs"): (None,),
    ("_grad", "retain_graph"): False,
    ("_grad", "create_graph"): False,
    ("_grad", "allow_unused"): False,
    ("_explain", "tensor"): lambda: kael.ones(1),
    ("_graphviz", "tensor"): lambda: kael.ones(1),
    ("_record_function", "name"): "F",
    ("_record_function", "backward"): lambda: (lambda *g: g),
    ("_record_function", "inputs"): (),
    ("_record_function", "outputs"): (),
    ("_record_function", "non_differentiable"): (),
    ("_record_function", "saved"): (),
    ("_record_function", "dirty"): (),
    ("Tensor.requires_grad_", "requires_grad"): False,
    ("Tensor.backward", "gradient"): None,
    ("Tensor.backward", "retain_graph"): None,
    ("Tensor.backward", "create_graph"): False,
    ("Tensor.backward", "inputs"): None,
    ("Tensor.register_hook", "hook"): lambda: (lambda g: None),
    ("Tensor._register_hook", "fn"): lambda: (lambda g: None),
    ("Tensor._remove_hook", "id"): 0,
    # ---- nn and data
    ("_parse_idx", "data"): b"\x00\x00\x08\x01\x00\x00\x00\x01\x07",
    ("_parse_idx", "name"): "sample.idx",
    ("_set_data_", "tensor"): lambda: kael.ones(1),
    ("_set_data_", "other"): lambda: kael.zeros(2),
    ("_queue_callback", "callback"): lambda: (lambda: None),
    ("_profile_ops", "fn"): lambda: (lambda: kael.ones(1) + 1),
    ("_profile_ops", "shapes"): False,
    # ---- the GPT's forward
    ("_gpt_parameters", "config"): _GPT_CONFIG,
    ("_gpt_forward", "config"): _GPT_CONFIG,
    ("_gpt_forward", "params"): lambda: [kael.zeros(*shape) for _, shape in kael._C._gpt_parameters(_GPT_CONFIG)],
    ("_gpt_forward", "idx"): lambda: kael.tensor([[1, 2]]),
    ("_gpt_forward", "targets"): None,
    ("_gpt_forward", "training"): False,
    # ---- the GPT's generation
    ("_gpt_generate", "config"): _GPT_CONFIG,
    ("_gpt_generate", "params"): lambda: [kael.zeros(*shape) for _, shape in kael._C._gpt_parameters(_GPT_CONFIG)],
    ("_gpt_generate", "prompts"): lambda: [[1, 2]],
    ("_gpt_generate", "max_new_tokens"): 1,
    ("_gpt_generate", "temperature"): 0.0,
    ("_gpt_generate", "top_k"): None,
    ("_gpt_generate", "top_p"): None,
    ("_gpt_generate", "seed"): 0,
    ("_gpt_generate", "on_token"): None,
    ("_gpt_generate", "stop_tokens"): None,
}


# ---------------------------------------------------------------- the stub

def _stub_path():
    return Path(kael._C.__file__).with_name("_C.pyi")


def parse_stub(text):
    """{"": module members, "<class>": class members}: name -> list of FunctionDef (several for
    @overload), or "attribute" for annotated names."""
    tree = ast.parse(text)
    scopes = {"": {}}

    def collect(body, scope):
        for node in body:
            if isinstance(node, ast.FunctionDef):
                scope.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                scope[node.target.id] = "attribute"
            elif isinstance(node, ast.ClassDef):
                scopes[node.name] = {}
                scopes[""][node.name] = "class"
                collect(node.body, scopes[node.name])

    collect(tree.body, scopes[""])
    return scopes


@pytest.fixture(scope="module")
def stub():
    path = _stub_path()
    assert path.is_file(), f"{path} is missing: the build copies it next to the extension"
    return parse_stub(path.read_text())


def _decorators(fn):
    return {ast.unparse(d) for d in fn.decorator_list}


def is_property(defs):
    return isinstance(defs, list) and "property" in _decorators(defs[0])


def has_setter(defs, name):
    return isinstance(defs, list) and any(f"{name}.setter" in _decorators(d) for d in defs)


def stub_params(fn, method):
    """[(name, kind, default)] of a stub function, self left out; default is P.empty if none."""
    a = fn.args
    positional = [(p, P.POSITIONAL_ONLY) for p in a.posonlyargs] + [(p, P.POSITIONAL_OR_KEYWORD) for p in a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    items = [(p.arg, kind, d) for (p, kind), d in zip(positional, defaults)]
    if a.vararg:
        items.append((a.vararg.arg, P.VAR_POSITIONAL, None))
    items += [(p.arg, P.KEYWORD_ONLY, d) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        items.append((a.kwarg.arg, P.VAR_KEYWORD, None))
    if method:
        items = items[1:]
    out = []
    for name, kind, d in items:
        if kind == P.POSITIONAL_OR_KEYWORD and name.startswith("__") and not name.endswith("__"):
            kind = P.POSITIONAL_ONLY  # the stub convention for positional-only parameters
        if d is None:
            default = P.empty
        else:
            assert not (isinstance(d, ast.Constant) and d.value is Ellipsis), (
                f"{fn.name}: give the stub the real default of '{name}', not ...")
            default = ast.literal_eval(d)
        out.append((name, kind, default))
    return out


# ---------------------------------------------------------------- the runtime

def runtime_params(obj, method):
    """[(name, kind, default)] of the runtime signature, self left out."""
    try:
        sig = inspect.signature(obj)
    except ValueError:
        raise AssertionError(f"{obj!r} has no signature: start its docstring with "
                             "'name(params)\\n--\\n\\n' (see csrc/module.cpp)") from None
    params = list(sig.parameters.values())
    if method:
        params = params[1:]
    return [(p.name, p.kind, p.default) for p in params]


def compare_params(where, stub, runtime):
    """Problems between a stub's parameters and the runtime's (empty when they agree)."""
    problems = []
    if len(stub) != len(runtime):
        return [f"{where}: stub has {_show(stub)}, runtime has {_show(runtime)}"]
    for (sn, sk, sd), (rn, rk, rd) in zip(stub, runtime):
        if sk != rk:
            problems.append(f"{where}: '{sn}' is {sk.description} in the stub, {rk.description} at runtime")
        elif sn != rn and sk != P.POSITIONAL_ONLY:
            problems.append(f"{where}: parameter '{sn}' in the stub is '{rn}' at runtime")
        if (sd is P.empty) != (rd is P.empty) or (sd is not P.empty and sd != rd):
            problems.append(f"{where}: default of '{sn}' is {_default(sd)} in the stub, {_default(rd)} at runtime")
    return problems


def _default(d):
    return "none" if d is P.empty else repr(d)


def _show(params):
    return "(" + ", ".join(f"{n}: {k.description}{'' if d is P.empty else '=' + repr(d)}" for n, k, d in params) + ")"


# ---------------------------------------------------------------- calling the runtime

def _accepts(fn, args, kwargs):
    """Whether fn binds the arguments: any outcome but a TypeError (cuda() without a device
    raises RuntimeError after accepting them)."""
    try:
        fn(*args, **kwargs)
    except TypeError:
        return False
    except Exception:  # noqa: BLE001 - the arguments were accepted
        return True
    return True


def probe(qualname, fn, params):
    """Problems between what the signature params says and what fn accepts."""
    def sample(name):
        key = (qualname, name)
        assert key in SAMPLES, f"add a valid value for parameter '{name}' of {qualname} to SAMPLES"
        value = SAMPLES[key]
        return value() if callable(value) and not isinstance(value, type) else value

    problems = []

    def expect(ok, args, kwargs, what):
        if _accepts(fn, args, kwargs) != ok:
            shown = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
            problems.append(f"{qualname}({shown}) {'is rejected' if ok else 'is accepted'} ({what})")

    names = [n for n, _, _ in params]
    positional = [n for n, k, _ in params if k in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    var_pos = any(k == P.VAR_POSITIONAL for _, k, _ in params)
    var_kw = any(k == P.VAR_KEYWORD for _, k, _ in params)
    required_pos = [n for n, k, d in params if n in positional and d is P.empty]
    required_kw = {n: None for n, k, d in params if k == P.KEYWORD_ONLY and d is P.empty}

    def base_kw():
        return {n: sample(n) for n in required_kw}

    expect(True, [sample(n) for n in required_pos], base_kw(), "the required arguments")
    expect(True, [sample(n) for n in positional], base_kw(), "every positional parameter by position")
    if not var_pos:
        expect(False, [sample(n) for n in positional] + [0], base_kw(), "one positional argument too many")
    if not var_kw:
        expect(False, [sample(n) for n in required_pos], {**base_kw(), "no_such_parameter": 0}, "an unknown keyword")
    for name, kind, default in params:
        if kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            continue
        before = positional[:positional.index(name)] if name in positional else required_pos
        args = [sample(n) for n in before]
        kwargs = {**base_kw(), name: sample(name)}
        if kind == P.POSITIONAL_OR_KEYWORD:  # the required ones after it go by keyword too
            kwargs.update({n: sample(n) for n, k, d in params
                           if n in required_pos and n not in before and n != name and k == P.POSITIONAL_OR_KEYWORD})
        if kind == P.POSITIONAL_ONLY:
            if not var_kw:
                expect(False, args, kwargs, f"'{name}' is positional-only")
        else:
            expect(True, args, kwargs, f"'{name}' by keyword")
        if default is P.empty:
            if name in positional:
                expect(False, [sample(n) for n in before], base_kw(), f"'{name}' is required")
            else:
                expect(False, [sample(n) for n in required_pos],
                       {n: sample(n) for n in required_kw if n != name}, f"'{name}' is required")
    assert len(set(names)) == len(names)
    return problems


# ---------------------------------------------------------------- what is hand-written

def runtime_functions():
    return sorted(n for n, v in vars(kael._C).items()
                  if callable(v) and not isinstance(v, type) and n not in GENERATED_FUNCTIONS)


def runtime_members(cls):
    skip = NOT_IN_STUB[cls.__name__] | (GENERATED_METHODS if cls is kael.Tensor else set())
    return sorted(n for n in vars(cls) if n not in skip)


def stub_functions(stub):
    return sorted(n for n, v in stub[""].items() if isinstance(v, list) and n not in GENERATED_FUNCTIONS)


def stub_members(stub, cls):
    skip = GENERATED_METHODS if cls is kael.Tensor else set()
    return sorted(n for n in stub[cls.__name__] if n not in skip)


# ---------------------------------------------------------------- the tests

def _no_problems(problems):
    assert not problems, "\n".join(problems)


def _same_names(stub, runtime, what):
    missing, extra = sorted(set(runtime) - set(stub)), sorted(set(stub) - set(runtime))
    assert not missing and not extra, (f"{what}: at runtime but not in _C.pyi: {missing}; "
                                       f"in _C.pyi but not at runtime: {extra}")


def test_every_hand_written_function_has_a_stub_and_every_stub_a_function(stub):
    _same_names(stub_functions(stub), runtime_functions(), "hand-written functions")


def test_module_attributes_and_classes(stub):
    runtime = sorted(n for n, v in vars(kael._C).items()
                     if n not in MODULE_DUNDERS | NOT_IN_MODULE_STUB and (isinstance(v, type) or not callable(v)))
    assert all(isinstance(getattr(kael._C, n), kael.dtype) for n in NOT_IN_MODULE_STUB)
    _same_names(sorted(n for n, v in stub[""].items() if v in ("attribute", "class")), runtime, "module attributes")
    assert sorted(n for n, v in stub[""].items() if v == "class") == ["BpeTokenizer", "Generator", "Size", "Tensor",
                                                                           "_GptDecoder", "_Node", "dtype"]


@pytest.mark.parametrize("cls", [kael.Tensor, kael.dtype, kael.Generator, kael.BpeTokenizer], ids=lambda c: c.__name__)
def test_every_hand_written_member_has_a_stub_and_every_stub_a_member(stub, cls):
    _same_names(stub_members(stub, cls), runtime_members(cls), f"hand-written members of {cls.__name__}")


def _function_cases():
    return [pytest.param(n, id=n) for n in runtime_functions()]


# kael.distributed's bindings act on MPI's process state (calling them here would initialise, abort
# or finalise MPI in the test process): their signatures are compared with the stub here, and each
# is called under mpirun by test/python/distributed/.
NOT_PROBED = {n for n in dir(kael._C) if n.startswith("_dist_")}
# the autocast setters change the thread's state for the tests after them
NOT_PROBED |= {"_autocast_set_enabled", "_autocast_set_dtype", "_autocast_set_cache_enabled"}


@pytest.mark.parametrize("name", _function_cases())
def test_function_signature(stub, name):
    defs = stub[""].get(name)
    assert isinstance(defs, list) and len(defs) == 1, f"one stub for {name}"
    fn = getattr(kael._C, name)
    params = runtime_params(fn, method=False)
    _no_problems(compare_params(name, stub_params(defs[0], method=False), params))
    if name not in NOT_PROBED:
        _no_problems(probe(name, fn, params))


def _member_cases():
    out = []
    for cls in (kael.Tensor, kael.dtype, kael.Generator, kael.BpeTokenizer):
        for name in runtime_members(cls):
            out.append(pytest.param(cls, name, id=f"{cls.__name__}.{name}"))
    return out


@pytest.mark.parametrize("cls,name", _member_cases())
def test_member_signature(stub, cls, name):
    defs = stub[cls.__name__].get(name)
    runtime = vars(cls)[name]
    qualname = f"{cls.__name__}.{name}"
    if runtime is None:  # a plain class attribute (Tensor.__array_ufunc__ = None)
        assert defs == "attribute", f"{qualname} is an attribute at runtime: annotate it in the stub"
        return
    assert isinstance(defs, list) and (len(defs) == 1 or (len(defs) == 2 and has_setter(defs, name))), \
        f"one stub for {qualname} (two for a property with a setter)"
    instance = {kael.Tensor: lambda: kael.ones(1, 1), kael.dtype: lambda: kael.float32, kael.Generator: kael.Generator,
                kael.BpeTokenizer: lambda: kael.BpeTokenizer.train("hello world", 260)}[cls]()
    if isinstance(runtime, classmethod):  # __kael_function__ (kael/_tensor.py)
        assert "classmethod" in _decorators(defs[0]), f"{qualname} is a classmethod at runtime"
        params = runtime_params(runtime.__get__(None, cls), method=False)
        _no_problems(compare_params(qualname, stub_params(defs[0], method=True), params))
        return
    if inspect.isgetsetdescriptor(runtime) or inspect.ismemberdescriptor(runtime) or isinstance(runtime, property):
        assert is_property(defs), f"{qualname} is a property at runtime: declare it with @property"
        try:
            setattr(instance, name, getattr(instance, name))
            writable = True
        except AttributeError:
            writable = False
        assert has_setter(defs, name) == writable, f"{qualname}: writable at runtime: {writable}"
        return
    assert not is_property(defs), f"{qualname} is a method at runtime, not a property"
    if name == "__init__":
        # tp_init takes anything; what the constructor accepts is the class's signature
        params = runtime_params(cls, method=False)
        _no_problems(compare_params(qualname, stub_params(defs[0], method=True), params))
        _no_problems(probe(cls.__name__, cls, params))
        return
    params = runtime_params(runtime, method=True)
    _no_problems(compare_params(qualname, stub_params(defs[0], method=True), params))
    if isinstance(runtime, type(kael.Tensor.dim)):  # a hand-written C method (not a slot)
        _no_problems(probe(qualname, getattr(instance, name), params))


def test_item_deletion_raises():
    t = kael.ones(3)
    with pytest.raises(TypeError, match="deletion"):
        del t[0]


def test_signatures_show_in_help_and_docstrings_keep_their_text():
    assert str(inspect.signature(kael.tensor)) == "(data, *, dtype=None, device=None, requires_grad=False)"
    assert kael.tensor.__doc__.startswith("A new tensor")
    assert str(inspect.signature(kael.ones(1).size)) == "(dim=None)"
    assert kael.Tensor.__doc__.startswith("A multi-dimensional array")


def test_size_and_stride_take_dim_by_keyword_as_torch_does():
    import torch
    for lib in (kael, torch):
        t = lib.ones(2, 3)
        assert (t.size(dim=1), t.stride(dim=0), t.size(-1), tuple(t.size()), t.stride()) == (3, 3, 3, (2, 3), (3, 1))
        with pytest.raises(TypeError):
            t.size(dim=0, other=1)


# ---------------------------------------------------------------- the tests of the tests

DRIFTED = '''
def tensor(data: Any, dtype: dtype | str | None = None, device: str | None = None, *,
           requires_grad: bool = False) -> Tensor: ...
def allocator_stats() -> dict[str, int]: ...
def set_num_threads(n: int) -> None: ...
class Tensor:
    def size(self, dim: int | None = ...) -> Any: ...
'''


def test_a_drifted_stub_is_reported():
    drifted = parse_stub(DRIFTED)
    tensor = compare_params("tensor", stub_params(drifted[""]["tensor"][0], False), runtime_params(kael.tensor, False))
    assert tensor == ["tensor: 'dtype' is positional or keyword in the stub, keyword-only at runtime",
                      "tensor: 'device' is positional or keyword in the stub, keyword-only at runtime"]
    stats = compare_params("allocator_stats", stub_params(drifted[""]["allocator_stats"][0], False),
                           runtime_params(kael.allocator_stats, False))
    assert stats == ["allocator_stats: stub has (), runtime has (device: positional or keyword='cpu')"]
    threads = compare_params("set_num_threads", stub_params(drifted[""]["set_num_threads"][0], False),
                             runtime_params(kael.set_num_threads, False))
    assert threads == ["set_num_threads: 'n' is positional or keyword in the stub, positional-only at runtime"]
    with pytest.raises(AssertionError, match="real default"):
        stub_params(drifted["Tensor"]["size"][0], True)


def test_a_signature_the_runtime_does_not_keep_is_reported():
    def tensor(data, dtype=None, *, device=None):  # takes dtype by position, requires nothing else
        return None
    claimed = [("data", P.POSITIONAL_OR_KEYWORD, P.empty), ("dtype", P.KEYWORD_ONLY, None),
               ("device", P.KEYWORD_ONLY, None)]
    assert probe("tensor", tensor, claimed) == [
        "tensor([1.0], 0) is accepted (one positional argument too many)"]

    def size(*args, **kwargs):  # accepts anything
        return None
    assert probe("Tensor.size", size, [("dim", P.POSITIONAL_ONLY, None)]) == [
        "Tensor.size(0, 0) is accepted (one positional argument too many)",
        "Tensor.size(no_such_parameter=0) is accepted (an unknown keyword)",
        "Tensor.size(dim=0) is accepted ('dim' is positional-only)"]
