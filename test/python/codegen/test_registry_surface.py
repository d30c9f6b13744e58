"""Every public op of kael and kael.Tensor is to be a registry entry. The functions still written
in Python over registered ops (kael/_composites.py, kael/functional.py) are listed here by
section; a name that moves into the registry must leave the list (the list only shrinks), and a
new Python op must not appear. ALLOWED are the Python conveniences that are not ops."""
import pytest

from registry_surface import non_registry_names, python_composites

# Conveniences that are not ops and stay in Python.
ALLOWED = {
    "kael": {"broadcast_shapes"},  # shapes in, a shape out: no tensor
    "Tensor": set(),
}

# Still written in Python, one group per section of kael/_composites.py (then kael/functional.py).
REMAINING = {
    "kael": {
        # kael/_composites.py: dims an int or a pair of lists
        "tensordot",
        # kael/functional.py: a tensor or a tuple, as a flag says
        "nonzero", "unique", "unique_consecutive",
    },
    "Tensor": set(),
}


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
