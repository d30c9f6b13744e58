"""What a user reads when a kael call fails (Note [Error messages], docs/decisions/errors.md).

str(e) starts with the op name and shows the offending values, as PyTorch's messages carry no
source location; where the failed check is rides along as the exception's note (PEP 678). Each
call is run in kael and in torch: the exception classes must match.
"""
import re
import subprocess
import sys

import pytest
import torch

import kael

LOCATION = re.compile(r"^kael check '.+' failed at (aten|build|csrc)/[\w/.-]+\.(cpp|h):\d+$")

# (id, the call given a module (kael or torch), the op name the message starts with)
CALLS = [
    ("sum_to_size", lambda m: m.ones(2, 3).sum_to_size(4), "sum_to_size"),
    ("view", lambda m: m.ones(2, 3).view(4), "view"),
    ("reshape", lambda m: m.ones(2, 3).reshape(4, 2), "reshape"),
    ("transpose_dim", lambda m: m.ones(2, 3).transpose(0, 5), "transpose"),
    ("add_shapes", lambda m: m.ones(2) + m.ones(3), "add"),
    ("mul_out_shapes", lambda m: m.mul(m.ones(2), m.ones(3)), "mul"),
    ("cat_dims", lambda m: m.cat([m.ones(2), m.ones(2, 2)]), "cat"),
    ("matmul_shapes", lambda m: m.ones(2, 3) @ m.ones(2, 3), "matmul"),
    ("multinomial_negative", lambda m: m.multinomial(m.tensor([1.0, -1.0]), 1), "multinomial"),
    ("index_select_dtype", lambda m: m.ones(3).index_select(0, m.tensor([0.5])), "index_select"),
    ("gather_dim", lambda m: m.ones(2, 2).gather(3, m.zeros(2, 2, dtype=m.int64)), "gather"),
    ("sum_dim", lambda m: m.ones(2).sum(dim=4), "sum"),
    ("expand", lambda m: m.ones(2, 3).expand(4, 3), "expand"),
    ("narrow", lambda m: m.ones(3).narrow(0, 2, 5), "narrow"),
    # a dtype the op has no kernel for: NotImplementedError, as torch's dtype dispatch
    ("abs_bool", lambda m: m.ones(2, dtype=m.bool).abs(), "abs"),
    ("rand_int", lambda m: m.rand(2, dtype=m.int64), "rand"),
    ("lerp_int", lambda m: m.lerp(m.ones(2, dtype=m.int64), m.ones(2, dtype=m.int64), 0.5), "lerp"),
    ("bincount_float", lambda m: m.bincount(m.ones(2)), "bincount"),
    ("logcumsumexp_int", lambda m: m.ones(2, dtype=m.int64).logcumsumexp(0), "logcumsumexp"),
    # shapes and indices: torch's RuntimeError, or IndexError where torch raises it
    ("stack_sizes", lambda m: m.stack([m.ones(2), m.ones(3)]), "stack"),
    ("split_sizes", lambda m: m.ones(3).split_with_sizes([1, 1]), "split_with_sizes"),
    ("scatter_index", lambda m: m.zeros(3).scatter(0, m.tensor([5]), 1.0), "scatter"),
    ("gather_index", lambda m: m.zeros(3).gather(0, m.tensor([5])), "gather"),
    ("index_add_index", lambda m: m.zeros(3).index_add(0, m.tensor([5]), m.ones(1)), "index_add"),
    ("einsum_subscripts", lambda m: m.einsum("ijk", m.ones(2, 3)), "einsum"),
    ("eye_negative", lambda m: m.eye(-1), "eye"),
    ("tensordot_dims", lambda m: m.tensordot(m.ones(2, 3), m.ones(3, 2), ([0, 0], [1, 1])), "tensordot"),
    # torch's own messages where it has one (and RuntimeError before the dtype dispatch)
    ("neg_bool", lambda m: -m.ones(2, dtype=m.bool), "neg"),
    ("relu_bool", lambda m: m.nn.functional.relu(m.ones(2, dtype=m.bool)), "relu"),
    # nll_loss's classes: ValueError for a batch size that does not match, RuntimeError otherwise
    ("cross_entropy_batch", lambda m: m.nn.functional.cross_entropy(m.ones(3, 5), m.zeros(2, dtype=m.int64)),
     "cross_entropy_losses"),
    ("cross_entropy_spatial", lambda m: m.nn.functional.cross_entropy(m.ones(3, 5, 4), m.zeros(3, 5, dtype=m.int64)),
     "cross_entropy_losses"),
    ("cross_entropy_int_probabilities", lambda m: m.nn.functional.cross_entropy(m.ones(3, 5), m.zeros(3, 5, dtype=m.int64)),
     "cross_entropy_losses"),
]


def _raise(fn, module):
    with pytest.raises(Exception) as info:
        fn(module)
    return info.value


@pytest.mark.parametrize("name,call,op", CALLS, ids=[c[0] for c in CALLS])
def test_message_starts_with_the_op_name_and_the_note_says_where(name, call, op):
    error = _raise(call, kael)
    expected = _raise(call, torch)
    assert type(error) is type(expected), (name, error, expected)
    message = str(error)
    assert message.startswith((op + ": ", op + "(): ")), message  # "einsum(): ..." as torch spells some
    assert "kael error" not in message and " failed at " not in message, message
    notes = getattr(error, "__notes__", [])
    assert len(notes) == 1 and LOCATION.match(notes[0]), notes
    assert not re.search(r"(^|\s)/(home|tmp|usr|work|root)/", notes[0]), notes  # no path of the build machine


def test_traceback_prints_the_message_then_the_location():
    code = "import kael\nkael.ones(2, 3).sum_to_size(4)\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    lines = run.stderr.rstrip().splitlines()
    assert lines[-2] == "RuntimeError: sum_to_size: size {4} is not expandable to size {2, 3}.", run.stderr
    assert LOCATION.match(lines[-1]) and "composites.cpp" in lines[-1], run.stderr


def test_errors_kael_raises_outside_a_check_have_no_note():
    # argument parsing raises Python's TypeError itself: its message, no kael note
    with pytest.raises(TypeError) as info:
        kael.ones(2).add("x")
    assert not getattr(info.value, "__notes__", None)
    assert "kael check" not in str(info.value)


def test_note_survives_reraising_and_catching_as_the_base_class():
    try:
        try:
            kael.ones(2, 3).view(4)
        except RuntimeError as inner:
            raise ValueError("wrapped") from inner
    except ValueError as outer:
        cause = outer.__cause__
        assert isinstance(cause, RuntimeError) and str(cause).startswith("view: ")
        assert LOCATION.match(cause.__notes__[0]), cause.__notes__
