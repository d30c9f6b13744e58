"""A smoke test of an installed kael (a wheel or an sdist in a fresh environment): run it from a
directory outside the source tree, in that environment. It checks that `import kael` found the
installed package (not a source tree), that the distribution's version is kael.__version__, that
oneDNN was loaded from the environment (the onednn-cpu-gomp wheel) or from the wheel's own
libraries where it is vendored, and runs ops, autograd, nn, safetensors and the tokenizer.
test/python/runtime/test_wheel_install.py and cibuildwheel's test-command (pyproject.toml) run it.

  python -I tools/wheel_smoke.py [--no-compiler]   --no-compiler: also check that no compiler is on PATH
"""
import os
import shutil
import sys
import sysconfig
import tempfile
from importlib.metadata import version

import kael

COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "clang++", "cmake", "ninja")

site = sysconfig.get_paths()["platlib"]
assert kael.__file__ == os.path.join(site, "kael", "__init__.py"), f"kael imported from {kael.__file__}"
assert os.path.dirname(kael._C.__file__) == os.path.join(site, "kael"), kael._C.__file__
if "--no-compiler" in sys.argv:
    found = [c for c in COMPILERS if shutil.which(c)]
    assert not found, f"on PATH: {found}"
assert version("kael-tensor") == kael.__version__ == kael._C.__version__
with open("/proc/self/maps") as maps:
    dnnl = {line.split()[-1] for line in maps if "libdnnl" in line}
allowed = {os.path.realpath(os.path.join(sys.prefix, "lib", "libdnnl.so.3"))}
vendored = os.path.join(site, "kael_tensor.libs")  # where auditwheel grafts it (no oneDNN wheel for the platform)
assert len(dnnl) == 1 and (dnnl <= allowed or next(iter(dnnl)).startswith(vendored)), dnnl

a = kael.arange(6.0).reshape(2, 3)
assert (a @ a.T).tolist() == [[5.0, 14.0], [14.0, 50.0]]
assert (a.sum(dim=0) + kael.tensor([1, 2, 3])).tolist() == [4.0, 7.0, 10.0]
x = kael.tensor([1.0, 2.0, 3.0], requires_grad=True)
(x * x).sum().backward()
assert x.grad.tolist() == [2.0, 4.0, 6.0]
kael.manual_seed(0)
linear = kael.nn.Linear(3, 2)
linear(kael.ones(4, 3)).sum().backward()
assert linear.weight.grad.tolist() == [[4.0] * 3] * 2 and linear.bias.grad.tolist() == [4.0, 4.0]
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "w.safetensors")
    kael.save_safetensors({"w": linear.weight.detach()}, path)
    assert kael.equal(kael.load_safetensors(path)["w"], linear.weight.detach())
tokenizer = kael.BpeTokenizer.train("to be or not to be " * 20, 260)
assert tokenizer.decode(tokenizer.encode("not to be")) == "not to be"
print(kael.__config__.show())
print("smoke test passed")
