"""The ops whose tensors may be given one by one (`varargs: true` in the registry): atleast_1d/2d/3d,
meshgrid, cartesian_prod, block_diag, broadcast_tensors, einsum; and where(condition). Registry
entries in C++ now, each against torch in every calling form: values, dtypes, shapes, result
types (a tensor or a tuple), exception classes, warnings and gradients."""
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import kael


def outcome(lib, call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = call(lib)
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            return ("raise", type(e).__name__), [str(w.message).split(" (Triggered internally at")[0] for w in caught]
    return shape_of(r), [str(w.message).split(" (Triggered internally at")[0] for w in caught]


def shape_of(r):
    if isinstance(r, (tuple, list)):
        return (type(r).__name__, [shape_of(x) for x in r])
    return (str(r.dtype).split(".")[1], tuple(r.shape), np.array(r.tolist(), dtype=np.float64).tolist())


def same(call):
    want, got = outcome(torch, call), outcome(kael, call)
    assert got[0] == want[0], (got[0], want[0])
    assert got[1] == want[1], (got[1], want[1])


CASES = {
    "atleast_1d-one": lambda L: L.atleast_1d(L.tensor(1.5)),
    "atleast_1d-two": lambda L: L.atleast_1d(L.tensor(1.5), L.tensor([1, 2])),
    "atleast_1d-list": lambda L: L.atleast_1d([L.tensor(1.5), L.ones(2, 3)]),
    "atleast_1d-tuple-of-one": lambda L: L.atleast_1d((L.tensor(1.5),)),
    "atleast_1d-none": lambda L: L.atleast_1d(),
    "atleast_2d-forms": lambda L: (L.atleast_2d(L.tensor(2)), L.atleast_2d(L.arange(3), L.ones(2, 2, 2))),
    "atleast_3d-forms": lambda L: (L.atleast_3d(L.arange(3)), L.atleast_3d([L.ones(2, 3), L.tensor(1)])),
    "atleast_1d-not-a-tensor": lambda L: L.atleast_1d(1.5),
    "meshgrid-ij": lambda L: L.meshgrid(L.arange(3), L.tensor([1.0, 2.0]).long(), indexing="ij"),
    "meshgrid-xy": lambda L: L.meshgrid(L.arange(3), L.arange(2), L.arange(4), indexing="xy"),
    "meshgrid-list": lambda L: L.meshgrid([L.arange(3), L.arange(2)], indexing="xy"),
    "meshgrid-one": lambda L: L.meshgrid(L.arange(3), indexing="ij"),
    "meshgrid-0d": lambda L: L.meshgrid(L.tensor(5), L.arange(2), indexing="ij"),
    "meshgrid-bad-indexing": lambda L: L.meshgrid(L.arange(2), indexing="ji"),
    "meshgrid-2d": lambda L: L.meshgrid(L.ones(2, 2), indexing="ij"),
    "meshgrid-dtypes": lambda L: L.meshgrid(L.arange(2), L.ones(2), indexing="ij"),
    "meshgrid-empty": lambda L: L.meshgrid(indexing="ij"),
    "cartesian_prod": lambda L: L.cartesian_prod(L.arange(3), L.tensor([5, 6])),
    "cartesian_prod-three": lambda L: L.cartesian_prod(L.arange(2), L.arange(2), L.arange(3)),
    "cartesian_prod-one": lambda L: L.cartesian_prod(L.arange(3)),
    "cartesian_prod-2d": lambda L: L.cartesian_prod(L.ones(2, 2), L.arange(2)),
    "cartesian_prod-none": lambda L: L.cartesian_prod(),
    "block_diag": lambda L: L.block_diag(L.ones(2, 2), L.tensor(3.0), L.arange(3)),
    "block_diag-dtypes": lambda L: L.block_diag(L.ones(2, 0), L.ones(1, 1, dtype=L.int64), L.tensor([True])),
    "block_diag-none": lambda L: L.block_diag(),
    "block_diag-3d": lambda L: L.block_diag(L.ones(2), L.ones(2, 2, 2)),
    "broadcast_tensors": lambda L: L.broadcast_tensors(L.ones(3, 1), L.arange(4)),
    "broadcast_tensors-one": lambda L: L.broadcast_tensors(L.ones(3, 1)),
    "einsum-varargs": lambda L: L.einsum("ij,jk->ik", L.ones(2, 3), L.arange(6.0).reshape(3, 2)),
    "einsum-list": lambda L: L.einsum("ij,jk", [L.ones(2, 3), L.arange(6.0).reshape(3, 2)]),
    "einsum-one": lambda L: L.einsum("ii", L.arange(9.0).reshape(3, 3)),
    "einsum-tuple": lambda L: L.einsum("i,i->", (L.arange(3.0), L.arange(3.0))),
    "where-condition": lambda L: L.where(L.tensor([[True, False], [False, True]])),
    "where-condition-ints": lambda L: L.where(L.tensor([0, 3, 0, 1])),
    "where-three": lambda L: L.where(L.tensor([True, False]), L.ones(2), L.zeros(2)),
    "where-method": lambda L: L.ones(2).where(L.tensor([True, False]), 5.0),
    # torch's cat and hstack take only a list: no varargs there
    "hstack-varargs": lambda L: L.hstack(L.ones(2), L.ones(2)),
    "cat-varargs": lambda L: L.cat(L.ones(2), L.ones(2)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_against_torch(name):
    same(CASES[name])


def test_block_diag_and_meshgrid_gradients():
    grads = []
    for lib in (torch, kael):
        a = lib.arange(4.0).reshape(2, 2).requires_grad_()
        b = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        w = lib.arange(15.0).reshape(3, 5)
        (lib.block_diag(a, b) * w).sum().backward()
        x, y = lib.tensor([1.0, 2.0], requires_grad=True), lib.tensor([3.0, 4.0, 5.0], requires_grad=True)
        gx, gy = lib.meshgrid(x, y, indexing="xy")
        (gx * gy * lib.arange(6.0).reshape(3, 2)).sum().backward()
        grads.append([g.grad.tolist() for g in (a, b, x, y)])
    assert grads[0] == grads[1]


def test_a_list_is_taken_where_torch_takes_only_separate_tensors():
    # the registry entry takes a Tensor[] (a list or tuple, or the tensors one by one); torch's
    # Python cartesian_prod and block_diag take only separate tensors (codegen/README.md, varargs)
    a, b = kael.arange(2), kael.ones(2, 2)
    assert kael.cartesian_prod([a, a]).tolist() == kael.cartesian_prod(a, a).tolist()
    assert kael.block_diag((b, a)).tolist() == kael.block_diag(b, a).tolist()
    with pytest.raises(TypeError):
        torch.cartesian_prod([torch.arange(2), torch.arange(2)])


def test_shapes_that_do_not_broadcast_are_runtime_errors_as_torch():
    # docs/decisions/errors.md: kael's ValueError where torch raises RuntimeError
    with pytest.raises(RuntimeError):
        torch.broadcast_tensors(torch.ones(3), torch.ones(4))
    with pytest.raises(RuntimeError, match="not broadcastable"):
        kael.broadcast_tensors(kael.ones(3), kael.ones(4))


def test_meshgrid_warns_once_per_process_without_indexing():
    # torch's TORCH_WARN_ONCE: the first call without indexing= warns, later ones do not
    code = ("import warnings, {lib}\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    {lib}.meshgrid({lib}.arange(2), {lib}.arange(3))\n"
            "    {lib}.meshgrid({lib}.arange(2), {lib}.arange(3))\n"
            "    {lib}.meshgrid({lib}.arange(2), indexing='ij')\n"
            "print([str(x.message).split(' (Triggered')[0] for x in w])")
    outs = [subprocess.run([sys.executable, "-c", code.format(lib=lib)], capture_output=True, text=True, timeout=120,
                           cwd=Path(__file__).resolve().parents[3]).stdout.strip() for lib in ("torch", "kael")]
    assert outs[0] == outs[1] == str(["torch.meshgrid: in an upcoming release, it will be required to pass the "
                                      "indexing argument."])


def test_meshgrid_results_are_views():
    x = kael.arange(3)
    gx, gy = kael.meshgrid(x, kael.arange(2), indexing="ij")
    assert gx._base is not None and gx.stride() == (1, 0)
