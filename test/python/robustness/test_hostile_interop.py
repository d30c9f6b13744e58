"""Hostile input for the newer entry points of the Tensor object: index_put_ / _index with huge,
negative or mismatched indices, keys whose __index__ changes the key or the tensor, kael.from_dlpack
with producers that lie (bogus capsule metadata, raising, the same capsule twice), and garbage
keyword arguments to __array__ / __dlpack__. Only Python exceptions may come out: the cases
(hostile_interop_cases.py) run in a child process, which must exit normally."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

EXPECTED = {
    "index_put_huge_index": ("raised", "IndexError", "out of bounds"),
    "index_put_negative_beyond_range": ("raised", "IndexError", "index -4 is out of bounds"),
    "index_put_int64_min": ("raised", "IndexError", "out of bounds"),
    "index_put_mismatched_index_shapes": ("raised", "IndexError", "index_put_: shape mismatch: indexing tensors"),
    "index_put_values_do_not_broadcast": ("raised", "RuntimeError", "cannot be broadcast to indexing result of shape [2, 3]"),
    "index_put_float_index": ("raised", "IndexError", "long, int or bool"),
    "index_put_non_tensor_indices": ("raised", "TypeError", "index_put_"),
    "index_put_too_many_indices": ("raised", "IndexError", "too many indices"),
    "index_put_mask_wrong_shape": ("raised", "IndexError", "shape of the mask"),
    "index_put_dtype_mismatch": ("raised", "RuntimeError", "dtypes match"),
    "index_gather_huge_and_negative": ("ok", "all IndexError"),
    "index_registry_op_garbage": ("ok", "all raised"),
    "index_dunder_resizes_the_tensor": ("raised", "IndexError", "too many indices"),
    "index_dunder_resizes_the_tensor_on_assignment": ("raised", "IndexError", "out of range"),
    "index_dunder_raises": ("raised", "KeyError", "from __index__"),
    "index_dunder_returns_huge": ("raised", "IndexError", ""),
    "slice_bound_mutates_the_tensor": ("ok", [0.0]),
    "value_float_mutates_the_tensor": ("raised", "IndexError", "out of bounds"),
    "dlpack_honest_fake_imports": ("ok", [0.0, 1.0, 2.0, 3.0]),
    "dlpack_producer_raises": ("raised", "RuntimeError", "producer failed"),
    "dlpack_producer_returns_garbage": ("raised", "TypeError", "from_dlpack: __dlpack__() must return"),
    "dlpack_capsule_on_another_device": ("raised", "BufferError", "CPU memory only"),
    "dlpack_bogus_dtype": ("raised", "BufferError", "unsupported DLPack dtype (code 99"),
    "dlpack_vector_lanes": ("raised", "BufferError", "lanes 4"),
    "dlpack_negative_ndim": ("raised", "BufferError", "ndim -1"),
    "dlpack_huge_ndim": ("raised", "BufferError", "ndim 1000"),
    "dlpack_null_shape": ("raised", "BufferError", "no shape"),
    "dlpack_negative_size": ("raised", "BufferError", "negative size -3"),
    "dlpack_huge_shape": ("raised", "BufferError", "too large"),
    "dlpack_null_data": ("raised", "BufferError", "no data pointer"),
    "dlpack_negative_strides": ("raised", "ValueError", "negative"),
    "dlpack_unknown_version": ("raised", "BufferError", "version 7.0"),
    "dlpack_bare_capsule_used_twice": ("raised", "BufferError", "imported once"),
}


@pytest.fixture(scope="module")
def results():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(HERE / "hostile_interop_cases.py")], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, f"the child exited with {done.returncode}:\n{done.stderr[-3000:]}"
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_case(results, name):
    got, want = results[name], EXPECTED[name]
    if want[0] == "ok":
        assert got == want
    else:
        assert got[:2] == want[:2] and want[2] in got[2], got


def test_every_case_has_an_expectation_or_only_needs_python_exceptions(results):
    import hostile_interop_cases
    assert set(results) == set(hostile_interop_cases.CASES)
    # the cases without an entry above only have to end in a Python exception or a result
    for name, got in results.items():
        assert got[0] in ("ok", "raised"), (name, got)


def test_a_capsule_imported_twice_is_refused_the_second_time(results):
    got = results["dlpack_same_capsule_twice"]
    assert got[0] == "ok" and got[1].startswith("first [0.0, 1.0, 2.0, 3.0], then BufferError")


def test_export_keywords_garbage_only_raises_python_exceptions(results):
    got = results["export_keyword_garbage"]
    assert got[0] == "ok" and len(got[1]) == 17
