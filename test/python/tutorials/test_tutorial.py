"""The statements of PyTorch's tensor tutorial (beginner_source/basics/tensorqs_tutorial.py in
pytorch/tutorials), run with torch renamed to kael: every statement runs, and what it prints is
what torch prints. Random values differ between the two generators, so the output of the
statements that print random tensors is compared with its numbers masked.

Only the GPU move is left out of the comparison's effect: it runs (in its older torch.cuda form
and its current torch.accelerator one), and on a build without CUDA both libraries skip the move
(kael.cuda.is_available() is False)."""
import contextlib
import io
import re

import numpy as np
import pytest
import torch

import kael

# The tutorial's statements in order, grouped as its sections are; each group is one exec.
# (name, source, whether the output holds random numbers)
SECTIONS = [
    ("directly_from_data", """
data = [[1, 2],[3, 4]]
x_data = lib.tensor(data)
print(x_data)
""", False),
    ("from_numpy", """
np_array = np.array(data)
x_np = lib.from_numpy(np_array)
print(x_np)
""", False),
    ("from_another_tensor", """
x_ones = lib.ones_like(x_data)
print(f"Ones Tensor: \\n {x_ones} \\n")
x_rand = lib.rand_like(x_data, dtype=lib.float)
print(f"Random Tensor: \\n {x_rand} \\n")
""", True),
    ("constant_values", """
shape = (2,3,)
rand_tensor = lib.rand(shape)
ones_tensor = lib.ones(shape)
zeros_tensor = lib.zeros(shape)
print(f"Random Tensor: \\n {rand_tensor} \\n")
print(f"Ones Tensor: \\n {ones_tensor} \\n")
print(f"Zeros Tensor: \\n {zeros_tensor}")
""", True),
    ("attributes", """
tensor = lib.rand(3,4)
print(f"Shape of tensor: {tensor.shape}")
print(f"Datatype of tensor: {tensor.dtype}")
print(f"Device tensor is stored on: {tensor.device}")
""", False),
    ("to_gpu", """
if lib.cuda.is_available() & (lib.device('cuda').index is not None):
    tensor = tensor.to('cuda')
print(lib.cuda.is_available(), lib.device('cuda').index, lib.cuda.device_count())
""", False),
    # the tutorial's current form of the move
    ("to_accelerator", """
if lib.accelerator.is_available():
    tensor = tensor.to(lib.accelerator.current_accelerator())
print(f"Device tensor is stored on: {tensor.device}")
""", False),
    ("indexing", """
tensor = lib.ones(4, 4)
print('First row: ', tensor[0])
print('First column: ', tensor[:, 0])
print('Last column:', tensor[..., -1])
tensor[:,1] = 0
print(tensor)
""", False),
    ("joining", """
t1 = lib.cat([tensor, tensor, tensor], dim=1)
print(t1)
""", False),
    ("arithmetic", """
y1 = tensor @ tensor.T
y2 = tensor.matmul(tensor.T)
y3 = lib.rand_like(tensor)
lib.matmul(tensor, tensor.T, out=y3)
z1 = tensor * tensor
z2 = tensor.mul(tensor)
z3 = lib.rand_like(tensor)
lib.mul(tensor, tensor, out=z3)
print(y1, y2, y3, z1, z2, z3)
""", False),
    ("single_element", """
agg = tensor.sum()
agg_item = agg.item()
print(agg_item, type(agg_item))
""", False),
    ("in_place", """
print(tensor, "\\n")
tensor.add_(5)
print(tensor)
""", False),
    ("tensor_to_numpy", """
t = lib.ones(5)
print(f"t: {t}")
n = t.numpy()
print(f"n: {n}")
t.add_(1)
print(f"t: {t}")
print(f"n: {n}")
""", False),
    ("numpy_to_tensor", """
n = np.ones(5)
t = lib.from_numpy(n)
np.add(n, 1, out=n)
print(f"t: {t}")
print(f"n: {n}")
""", False),
]


def _run(lib, name):
    namespace = {"lib": lib, "np": np}
    outputs = {}
    for section, source, _ in SECTIONS:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(compile(source, f"<{section}>", "exec"), namespace)
        outputs[section] = buffer.getvalue().replace(name, "LIB")
    return outputs


def _mask(text):
    return re.sub(r"\d+\.\d*(e[+-]\d+)?", "#", text)


@pytest.fixture(scope="module")
def outputs():
    return _run(kael, "kael"), _run(torch, "torch")


@pytest.mark.parametrize("section", [s[0] for s in SECTIONS])
def test_tutorial_section_prints_what_torch_prints(outputs, section):
    ours, theirs = outputs
    random_numbers = dict((s[0], s[2]) for s in SECTIONS)[section]
    if random_numbers:
        assert _mask(ours[section]) == _mask(theirs[section])
    else:
        assert ours[section] == theirs[section]
