"""torch's namespaces in kael: every module path PyTorch programs import from exists in kael and
serves the same objects as kael's top-level namespace, as torch's paths serve torch's; the
backend switches, the float32 matmul precision, the deterministic flags and kael.cuda answer
as torch's CPU-only build answers (docs/decisions/namespaces.md)."""
import collections
import importlib
import warnings

import pytest
import torch

import kael

# (path under torch / kael, the namespace its names are re-exported from)
PATHS = [
    ("nn.functional", "nn.functional"), ("nn.init", "nn.init"), ("nn.parameter", "nn"),
    ("nn.utils", "nn.utils"), ("nn.utils.clip_grad", "nn.utils"),
    ("nn.utils.convert_parameters", "nn.utils"), ("nn.modules", "nn"), ("nn.modules.module", "nn"),
    ("nn.modules.container", "nn"), ("nn.modules.activation", "nn"), ("nn.modules.loss", "nn"),
    ("nn.modules.transformer", "nn"), ("nn.modules.linear", "nn"), ("nn.modules.sparse", "nn"),
    ("nn.modules.dropout", "nn"), ("nn.modules.flatten", "nn"), ("nn.modules.normalization", "nn"),
    ("nn.modules.batchnorm", "nn"), ("nn.modules.padding", "nn"), ("nn.modules.distance", "nn"),
    ("nn.modules.upsampling", "nn"), ("nn.modules.fold", "nn"),
    ("nn.modules.utils", "nn.modules.utils"), ("nn.parallel", "nn.parallel"),
    ("optim", "optim"), ("optim.optimizer", "optim"), ("optim.lr_scheduler", "optim.lr_scheduler"),
    ("optim.sgd", "optim"), ("optim.adam", "optim"), ("optim.adamw", "optim"), ("optim.rmsprop", "optim"),
    ("optim.adagrad", "optim"), ("optim.adadelta", "optim"), ("optim.adamax", "optim"), ("optim.nadam", "optim"),
    ("optim.radam", "optim"), ("optim.rprop", "optim"), ("optim.asgd", "optim"), ("optim.lbfgs", "optim"),
    ("utils.data", "utils.data"), ("utils.data.dataset", "utils.data"), ("utils.data.sampler", "utils.data"),
    ("utils.data.dataloader", "utils.data"), ("utils.data.distributed", "utils.data"),
    ("autograd", "autograd"), ("autograd.function", "autograd"), ("autograd.grad_mode", "autograd"),
    ("autograd.variable", "autograd"), ("autograd.anomaly_mode", "autograd"),
    ("backends", "backends"), ("backends.cuda", "backends.cuda"), ("backends.mps", "backends.mps"),
    ("backends.cpu", "backends.cpu"),
    ("cuda", "cuda"), ("cuda.amp", "cuda.amp"), ("amp", "amp"), ("amp.grad_scaler", "amp"), ("cpu", "cpu"),
    ("cpu.amp", "cpu.amp"),
]

# torch.nn.modules' files whose classes kael may define later: the path must exist in kael as
# soon as kael.nn has one of its classes
LATER = ["nn.modules.conv", "nn.modules.pooling", "nn.modules.rnn", "nn.modules.pixelshuffle",
         "nn.modules.instancenorm", "nn.modules.channelshuffle", "nn.modules.adaptive"]


def _public(module) -> list:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return list(names)


def _shared_names(path: str, home: str) -> list:
    """The names torch's `path` re-exports from torch's `home` that kael's `home` has too."""
    tmod = importlib.import_module("torch." + path)
    thome = importlib.import_module("torch." + home)
    khome = importlib.import_module("kael." + home)
    return [n for n in _public(tmod) if hasattr(thome, n) and getattr(thome, n) is getattr(tmod, n) and hasattr(khome, n)]


@pytest.mark.parametrize("path,home", PATHS, ids=[p for p, _ in PATHS])
def test_path_serves_the_same_objects_as_torch(path, home):
    kmod = importlib.import_module("kael." + path)
    khome = importlib.import_module("kael." + home)
    names = _shared_names(path, home)
    assert names, f"kael.{path}: none of torch.{path}'s names is implemented"
    for name in names:
        assert hasattr(kmod, name), f"kael.{path} lacks {name}, which kael.{home} has"
        if not name.startswith("_"):
            assert getattr(kmod, name) is getattr(khome, name), f"kael.{path}.{name} is not kael.{home}.{name}"
    # from-import works for each name
    for name in names:
        exec(f"from kael.{path} import {name}", {})


@pytest.mark.parametrize("path", LATER)
def test_later_nn_module_paths_exist_once_kael_has_their_classes(path):
    tmod = importlib.import_module("torch." + path)
    implemented = [n for n in _public(tmod) if hasattr(kael.nn, n)]
    if not implemented:
        return  # kael has none of its classes yet: nothing for the path to serve
    kmod = importlib.import_module("kael." + path)
    for name in implemented:
        assert getattr(kmod, name) is getattr(kael.nn, name), f"kael.{path}.{name}"


def test_base_classes_programs_subclass_or_test_against():
    pairs = [("nn.modules.loss", "_Loss", "L1Loss"), ("nn.modules.loss", "_WeightedLoss", "NLLLoss"),
             ("nn.modules.batchnorm", "_BatchNorm", "BatchNorm1d")]
    for path, base, leaf in pairs:
        for lib in (torch, kael):
            module = importlib.import_module(f"{lib.__name__}.{path}")
            assert issubclass(getattr(lib.nn, leaf), getattr(module, base)), (lib.__name__, path, base)
    for lib in (torch, kael):
        from_path = importlib.import_module(f"{lib.__name__}.optim.lr_scheduler")
        w = lib.nn.Parameter(lib.ones(1))
        opt = lib.optim.SGD([w], lr=1.0)

        class Halving(from_path._LRScheduler):
            def get_lr(self):
                return [group["lr"] * 0.5 for group in self.optimizer.param_groups] if self.last_epoch else \
                    [group["lr"] for group in self.optimizer.param_groups]

        sched = Halving(opt)
        opt.step()
        sched.step()
        assert opt.param_groups[0]["lr"] == 0.5
        assert issubclass(from_path._LRScheduler, from_path.LRScheduler)
        assert not isinstance(from_path.StepLR(opt, 1), from_path._LRScheduler)


def test_submodules_are_attributes_after_import_kael():
    # torch programs reach these without importing them: torch.nn.utils.rnn, torch.backends.cudnn, ...
    for path in ["nn.functional", "nn.init", "nn.utils", "nn.utils.rnn", "nn.utils.clip_grad", "nn.modules",
                 "optim.lr_scheduler", "utils.data", "autograd", "backends.cuda", "backends.cudnn", "backends.mps",
                 "backends.mkldnn", "cuda", "cuda.amp", "amp", "cpu", "cpu.amp"]:
        kobj, tobj = kael, torch
        for part in path.split("."):
            tobj = getattr(tobj, part)  # torch has it
            kobj = getattr(kobj, part)
        assert kobj.__name__ == "kael." + path


def test_nn_modules_utils_helpers_match_torch():
    from torch.nn.modules import utils as tu

    from kael.nn.modules import utils as ku

    for name in ["_single", "_pair", "_triple", "_quadruple"]:
        for value in [3, (1, 2), [4, 5, 6], "ab", 2.5]:
            assert getattr(ku, name)(value) == getattr(tu, name)(value)
    assert ku._reverse_repeat_tuple((1, 2, 3), 2) == tu._reverse_repeat_tuple((1, 2, 3), 2)
    assert ku._list_with_default([None, 3], [1, 2, 5, 6]) == tu._list_with_default([None, 3], [1, 2, 5, 6])
    assert ku._list_with_default(7, [1, 2]) == tu._list_with_default(7, [1, 2])
    for lib in (ku, tu):
        with pytest.raises(ValueError):
            lib._list_with_default([None, 3], [1, 2])
    for with_metadata in (False, True):
        ksd, tsd = collections.OrderedDict(), collections.OrderedDict()
        for sd in (ksd, tsd):
            sd.update({"module.a": 1, "b": 2, "module.c.d": 3})
            if with_metadata:
                sd._metadata = {"": {}, "module": {"v": 1}, "module.c": {"v": 2}}
        ku.consume_prefix_in_state_dict_if_present(ksd, "module.")
        tu.consume_prefix_in_state_dict_if_present(tsd, "module.")
        assert list(ksd.items()) == list(tsd.items())
        assert getattr(ksd, "_metadata", None) == getattr(tsd, "_metadata", None)


# ---------------------------------------------------------------- backends

@pytest.fixture
def restore_flags():
    saved_t = (torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled(),
               torch.is_deterministic_algorithms_warn_only_enabled(),
               torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
               torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)
    saved_k = (kael.get_float32_matmul_precision(), kael.are_deterministic_algorithms_enabled(),
               kael.is_deterministic_algorithms_warn_only_enabled(),
               kael.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
               kael.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)
    cudnn = ["enabled", "benchmark", "deterministic", "allow_tf32", "benchmark_limit"]
    saved_cudnn = [(getattr(torch.backends.cudnn, n), getattr(kael.backends.cudnn, n)) for n in cudnn]
    sdp = ["flash", "mem_efficient", "math", "cudnn"]
    saved_sdp = [(getattr(torch.backends.cuda, f"{n}_sdp_enabled")(), getattr(kael.backends.cuda, f"{n}_sdp_enabled")())
                 for n in sdp]
    yield
    for lib, saved in ((torch, saved_t), (kael, saved_k)):
        lib.set_float32_matmul_precision(saved[0])
        lib.use_deterministic_algorithms(saved[1], warn_only=saved[2])
        lib.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = saved[3]
        lib.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = saved[4]
    for name, (tv, kv) in zip(cudnn, saved_cudnn):
        setattr(torch.backends.cudnn, name, tv)
        setattr(kael.backends.cudnn, name, kv)
    for name, (tv, kv) in zip(sdp, saved_sdp):
        getattr(torch.backends.cuda, f"enable_{name}_sdp")(tv)
        getattr(kael.backends.cuda, f"enable_{name}_sdp")(kv)


def _outcome(fn):
    """What a call gives: ('ok', value) or ('raise', exception class)."""
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001  (the class is what is compared)
        return "raise", type(e)


def test_backend_defaults_match_torch(restore_flags):
    tb, kb = torch.backends, kael.backends
    for name in ["allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"]:
        assert getattr(kb.cuda.matmul, name) == getattr(tb.cuda.matmul, name), name
    for name in ["enabled", "benchmark", "deterministic", "allow_tf32", "benchmark_limit"]:
        assert getattr(kb.cudnn, name) == getattr(tb.cudnn, name), name
    assert kb.cudnn.is_available() == tb.cudnn.is_available() is False
    assert kb.cudnn.version() == tb.cudnn.version() is None
    assert kb.cudnn.is_acceptable(kael.ones(1)) == tb.cudnn.is_acceptable(torch.ones(1))
    assert kb.mps.is_available() == tb.mps.is_available() is False
    assert kb.mps.is_built() == tb.mps.is_built()
    assert kb.cuda.is_built() == tb.cuda.is_built() is False
    assert kb.mkldnn.is_available() == tb.mkldnn.is_available()
    assert (kb.mkldnn.enabled, kb.mkldnn.deterministic) == (tb.mkldnn.enabled, tb.mkldnn.deterministic)
    assert kb.opt_einsum.is_available() == tb.opt_einsum.is_available()
    assert kb.opt_einsum.enabled == tb.opt_einsum.enabled
    assert kb.opt_einsum.strategy == tb.opt_einsum.strategy
    assert (kb.opt_einsum.get_opt_einsum() is None) == (tb.opt_einsum.get_opt_einsum() is None)
    assert kb.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")
    for kind in ["flash", "mem_efficient", "math", "cudnn"]:
        assert getattr(kb.cuda, f"{kind}_sdp_enabled")() == getattr(tb.cuda, f"{kind}_sdp_enabled")()
    assert kael.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
    assert kael.are_deterministic_algorithms_enabled() == torch.are_deterministic_algorithms_enabled()
    assert kael.get_deterministic_debug_mode() == torch.get_deterministic_debug_mode()


def test_backend_flags_hold_assigned_values_and_reject_non_bools(restore_flags):
    for lib in (torch, kael):
        b = lib.backends
        for name in ["enabled", "benchmark", "deterministic", "allow_tf32"]:
            for value in (True, False):
                setattr(b.cudnn, name, value)
                assert getattr(b.cudnn, name) is value
        b.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        assert b.cuda.matmul.allow_fp16_reduced_precision_reduction is False
        b.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        assert b.cuda.matmul.allow_bf16_reduced_precision_reduction is False
        b.cuda.enable_flash_sdp(False)
        assert b.cuda.flash_sdp_enabled() is False
    for target in ["cudnn.enabled", "cudnn.benchmark", "cudnn.deterministic", "cuda.matmul.allow_tf32",
                   "cuda.matmul.allow_fp16_reduced_precision_reduction"]:
        outcomes = []
        for lib in (torch, kael):
            *parents, name = target.split(".")
            obj = lib.backends
            for p in parents:
                obj = getattr(obj, p)
            outcomes.append(_outcome(lambda: setattr(obj, name, "yes")))
        assert outcomes[0] == outcomes[1], target
        assert outcomes[0][0] == "raise"
    assert _outcome(lambda: setattr(kael.backends.cuda.matmul, "foo", 1)) == \
        _outcome(lambda: setattr(torch.backends.cuda.matmul, "foo", 1))
    assert _outcome(lambda: kael.backends.cuda.matmul.foo) == _outcome(lambda: torch.backends.cuda.matmul.foo)


def test_cudnn_flags_context_sets_and_restores(restore_flags):
    for lib in (torch, kael):
        with lib.backends.cudnn.flags(enabled=False, benchmark=True, deterministic=True, allow_tf32=False):
            inside = (lib.backends.cudnn.enabled, lib.backends.cudnn.benchmark, lib.backends.cudnn.deterministic,
                      lib.backends.cudnn.allow_tf32)
        assert inside == (False, True, True, False)
        assert (lib.backends.cudnn.enabled, lib.backends.cudnn.benchmark) == (True, False)
    with pytest.warns(FutureWarning):
        with kael.backends.cuda.sdp_kernel(enable_flash=False):
            assert kael.backends.cuda.flash_sdp_enabled() is False
    assert kael.backends.cuda.flash_sdp_enabled() is True


def test_float32_matmul_precision_and_tf32_switch_move_together(restore_flags):
    steps = [("set", "high"), ("set", "medium"), ("set", "highest"), ("tf32", True), ("tf32", False),
             ("set", "medium"), ("set", "bogus")]
    for action, value in steps:
        seen = []
        for lib in (torch, kael):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if action == "set":
                    lib.set_float32_matmul_precision(value)
                else:
                    lib.backends.cuda.matmul.allow_tf32 = value
            seen.append((lib.get_float32_matmul_precision(), lib.backends.cuda.matmul.allow_tf32,
                         [w.category for w in caught]))
        assert seen[0] == seen[1], (action, value)


def test_deterministic_algorithms_flags_match_torch(restore_flags):
    calls = [((True,), {}), ((True,), {"warn_only": True}), ((False,), {"warn_only": True}), ((False,), {}),
             ((1,), {}), ((True,), {"warn_only": 1})]
    for args, kwargs in calls:
        t = _outcome(lambda: torch.use_deterministic_algorithms(*args, **kwargs))
        k = _outcome(lambda: kael.use_deterministic_algorithms(*args, **kwargs))
        assert t == k, (args, kwargs)
        assert kael.are_deterministic_algorithms_enabled() == torch.are_deterministic_algorithms_enabled()
        assert kael.is_deterministic_algorithms_warn_only_enabled() == \
            torch.is_deterministic_algorithms_warn_only_enabled()
        assert kael.get_deterministic_debug_mode() == torch.get_deterministic_debug_mode()
    for mode in [0, 1, 2, "default", "warn", "error", True, 3, "bogus", 1.5]:
        t = _outcome(lambda: torch.set_deterministic_debug_mode(mode))
        k = _outcome(lambda: kael.set_deterministic_debug_mode(mode))
        assert t == k, mode
        assert kael.get_deterministic_debug_mode() == torch.get_deterministic_debug_mode()
        # cuDNN's own switch is separate, as in torch
        assert kael.backends.cudnn.deterministic == torch.backends.cudnn.deterministic


def test_thread_and_dtype_settings_exist():
    for name in ["set_num_threads", "get_num_threads", "set_default_dtype", "get_default_dtype"]:
        assert callable(getattr(kael, name))
    assert kael.get_default_dtype() == kael.float32


# ---------------------------------------------------------------- kael.cuda without CUDA

def _kael_text(message: str) -> str:
    return message.replace("PyTorch", "kael").replace("Torch", "kael").replace("torch.", "kael.")


CUDA_CALLS = [
    ("is_available", ()), ("device_count", ()), ("manual_seed", (3,)), ("manual_seed_all", (3,)), ("seed", ()),
    ("seed_all", ()), ("initial_seed", ()), ("current_device", ()), ("synchronize", ()), ("get_device_name", ()),
    ("get_device_capability", ()), ("get_device_properties", (0,)), ("is_bf16_supported", ()), ("empty_cache", ()),
    ("memory_allocated", ()), ("max_memory_allocated", ()), ("memory_reserved", ()), ("max_memory_reserved", ()),
    ("memory_stats", ()), ("is_initialized", ()), ("init", ()), ("get_rng_state", ()), ("get_rng_state_all", ()),
    ("get_arch_list", ()), ("mem_get_info", ()), ("ipc_collect", ()), ("set_device", (-1,)), ("set_device", ("cpu",)),
    ("is_tf32_supported", ()), ("get_gencode_flags", ()), ("can_device_access_peer", (0, 0)),
    ("current_stream", ()), ("default_stream", ()),
]


@pytest.mark.parametrize("name,args", CUDA_CALLS, ids=[f"{n}{a}" for n, a in CUDA_CALLS])
def test_cuda_call_answers_as_torch_cpu_build(name, args):
    assert not torch.cuda.is_available() and not kael.cuda.is_available()
    results = []
    for lib in (torch, kael):
        try:
            results.append(("ok", getattr(lib.cuda, name)(*args), None))
        except Exception as e:  # noqa: BLE001
            results.append(("raise", type(e), str(e)))
    (t_kind, t_value, t_msg), (k_kind, k_value, k_msg) = results
    assert t_kind == k_kind
    assert t_value == k_value
    if t_kind == "raise":
        assert k_msg.startswith(_kael_text(t_msg)[:30]), (k_msg, t_msg)


def test_cuda_device_context_and_set_rng_state():
    with torch.cuda.device(-1), kael.cuda.device(-1):
        pass
    with pytest.raises(RuntimeError, match="compiled without CUDA support"):
        torch.cuda.device(0).__enter__()
    with pytest.raises(RuntimeError, match="^kael was compiled without CUDA support"):
        kael.cuda.device(0).__enter__()
    # torch records a state it cannot apply; so does kael
    assert torch.cuda.set_rng_state(torch.ByteTensor(16)) is None
    assert kael.cuda.set_rng_state(kael.ByteTensor(16)) is None
    # kael's documented choices where torch's CPU build fails by accident (AttributeError or a
    # comparison with None): the "not compiled" AssertionError, and device(None) as a no-op
    with pytest.raises(AttributeError):
        torch.cuda.set_device(0)
    with pytest.raises(AssertionError, match="^kael not compiled with CUDA enabled"):
        kael.cuda.set_device(0)
    with pytest.raises(AttributeError):
        torch.cuda.reset_peak_memory_stats()
    with pytest.raises(AssertionError, match="^kael not compiled with CUDA enabled"):
        kael.cuda.reset_peak_memory_stats()
    with kael.cuda.device(None):
        pass
    with torch.cuda.stream(None), kael.cuda.stream(None):
        pass
    with torch.cuda.device_of(torch.ones(1)), kael.cuda.device_of(kael.ones(1)):
        pass


def test_cuda_amp_and_accelerator_still_answer():
    assert kael.cuda.amp.amp_definitely_not_available() == torch.cuda.amp.common.amp_definitely_not_available()
    assert kael.accelerator.is_available() is False
    assert kael.accelerator.device_count() == 0


# ---------------------------------------------------------------- the boilerplate of a training script

BOILERPLATE = '''
import warnings
import numpy as np
import LIB
import LIB.nn as nn
import LIB.nn.functional as F
from LIB.autograd import Variable
from LIB.nn.modules.linear import Linear
from LIB.nn.modules.loss import _Loss
from LIB.optim.lr_scheduler import StepLR
from LIB.optim.optimizer import Optimizer
from LIB.utils.data import DataLoader, TensorDataset
from LIB.utils.data.sampler import SequentialSampler

LIB.backends.cudnn.benchmark = True
LIB.backends.cudnn.deterministic = True
LIB.backends.cuda.matmul.allow_tf32 = False
LIB.use_deterministic_algorithms(False)
LIB.manual_seed(0)
LIB.cuda.manual_seed_all(0)
device = LIB.device("cuda" if LIB.cuda.is_available() else "cpu")
use_amp = LIB.cuda.is_available()


class MSE(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


rng = np.random.default_rng(0)
x = LIB.FloatTensor(rng.standard_normal((16, 4)).astype(np.float32))
y = LIB.FloatTensor(rng.standard_normal((16, 2)).astype(np.float32))
model = nn.Sequential(Linear(4, 8), nn.Tanh(), Linear(8, 2)).to(device)
with LIB.no_grad():
    for p in model.parameters():
        p.copy_(LIB.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
opt = LIB.optim.SGD(model.parameters(), lr=0.05)
assert isinstance(opt, Optimizer)
sched = StepLR(opt, step_size=2, gamma=0.5)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    scaler = LIB.cuda.amp.GradScaler(enabled=use_amp)
loader = DataLoader(TensorDataset(x, y), batch_size=4, sampler=SequentialSampler(range(16)))
loss_fn = MSE()
losses = []
for epoch in range(3):
    for xb, yb in loader:
        xb, yb = Variable(xb.to(device)), Variable(yb.to(device))
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    sched.step()
assert isinstance(x, LIB.FloatTensor) and x.type() == "LIB.FloatTensor"
RESULT = losses
'''


def test_training_script_boilerplate_runs_as_in_torch(restore_flags):
    results = []
    for name in ("torch", "kael"):
        scope = {}
        exec(BOILERPLATE.replace("LIB", name), scope)
        results.append(scope["RESULT"])
    assert len(results[1]) == len(results[0]) == 12
    assert results[1] == pytest.approx(results[0], rel=1e-5)


INTEROP = '''
import sys
import LIB
out = [LIB.get_num_interop_threads() == LIB.get_num_threads()]
for value in [0, -1, "x", 2.0, True, 3, 4]:
    try:
        LIB.set_num_interop_threads(value)
        out.append(("ok", LIB.get_num_interop_threads()))
    except Exception as e:
        out.append((type(e).__name__, str(e)))
print(repr(out))
'''


def test_interop_threads_are_set_once_per_process_as_in_torch():
    import subprocess
    import sys

    outputs = [subprocess.run([sys.executable, "-c", INTEROP.replace("LIB", name)], capture_output=True, text=True,
                              check=True).stdout for name in ("torch", "kael")]
    assert outputs[1] == outputs[0]
