"""Every public op of kael and kael.Tensor is a registry entry. ALLOWED are the Python
conveniences that are not ops, and the Python fronts that turn torch's argument forms into one
call of one registry op (as torch.functional's); a new Python op must not appear."""
import pytest

from registry_surface import non_registry_names, python_composites

# Conveniences that are not ops and stay in Python.
ALLOWED = {
    "kael": {
        "broadcast_shapes",  # shapes in, a shape out: no tensor
        # Python fronts of one registry op each, as torch.functional's (kael/functional.py): they
        # turn torch's argument forms (a flag that picks a tensor or a tuple, tensordot's dims as an
        # int or a pair of lists) into one call of _unique2/_unique_dim, _unique_consecutive,
        # nonzero/nonzero_numpy or tensordot, which the registry generates.
        "nonzero", "unique", "unique_consecutive", "tensordot",
    },
    "Tensor": set(),
}

# Still written in Python over registered ops: none left. A name added here must come with a plan.
REMAINING: dict = {"kael": set(), "Tensor": set()}


@pytest.mark.parametrize("space", ["kael", "Tensor"])
def test_python_ops_are_only_the_listed_ones(space):
    python = python_composites()[space] - ALLOWED[space]
    new = sorted(python - REMAINING[space])
    assert not new, f"{space}: ops written in Python that no registry entry generates: {new}"
    moved = sorted(REMAINING[space] - python)
    assert not moved, f"{space}: generated now or gone, take them off REMAINING: {moved}"


def test_allowed_names_exist():
    where = non_registry_names()
    for space, names in ALLOWED.items():
        assert names <= set(where[space]), sorted(names - set(where[space]))
