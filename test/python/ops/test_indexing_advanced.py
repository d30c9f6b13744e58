"""Indexing beyond basic keys, against torch: bool masks, integer index tensors (several, with
broadcasting, adjacent or not), lists, 0-d bools, and assignment through all of them."""
import pytest
import torch

import kael

SHAPE = (4, 5, 6)


def pair(shape=SHAPE, dtype="float32"):
    base = torch.arange(int(torch.tensor(shape).prod())).reshape(shape).to(getattr(torch, dtype))
    return kael.tensor(base.tolist(), dtype=getattr(kael, dtype)), base


def convert(key, lib):
    """The key with torch tensors replaced by lib tensors."""
    if isinstance(key, tuple):
        return tuple(convert(k, lib) for k in key)
    if isinstance(key, torch.Tensor):
        return key if lib is torch else kael.tensor(key.tolist(), dtype=getattr(kael, str(key.dtype)[6:]))
    return key


KEYS = [
    torch.tensor([0, 2, -1]),
    torch.tensor([[0, 1], [3, 2]]),
    (slice(None), torch.tensor([4, 0])),
    (torch.tensor([0, 1]), torch.tensor([1, 2])),
    (torch.tensor([[0], [1]]), torch.tensor([1, 2, 3])),  # broadcast to [2, 3]
    (torch.tensor([0, 1]), slice(1, 3), torch.tensor([2, 3])),  # not adjacent: index dims go first
    (slice(None), torch.tensor([0, 1]), torch.tensor([2, 3])),  # adjacent: index dims stay in place
    (0, torch.tensor([1, 1, 2])),
    (Ellipsis, torch.tensor([5, 0])),
    (None, torch.tensor([1, 3]), None),
    [0, 2],
    ([0, 2], slice(None), [1, 1]),
    ([[0, 1], [2, 3]],),
    torch.tensor([True, False, True, True]),
    (slice(None), torch.tensor([True, False, False, True, True])),
    torch.tensor([], dtype=torch.int64),
    (torch.tensor(1), torch.tensor([2])),
    True,
    False,
    (1, None, False),
]


def key_id(key):
    return repr(key).replace("\n", "")[:60]


@pytest.mark.parametrize("key", KEYS, ids=key_id)
def test_getitem_matches_torch(key):
    ours, theirs = pair()
    expected = theirs[convert(key, torch)]
    got = ours[convert(key, kael)]
    assert got.shape == expected.shape
    assert got.tolist() == expected.tolist()


def test_bool_mask_of_the_whole_tensor():
    ours, theirs = pair()
    assert ours[ours > 50].tolist() == theirs[theirs > 50].tolist()
    assert ours[ours > 1e9].shape == theirs[theirs > 1e9].shape == (0,)
    x = kael.tensor([1, 5, 2, 7])
    assert x[x > 2].tolist() == [5, 7]


@pytest.mark.parametrize("key", KEYS, ids=key_id)
@pytest.mark.parametrize("value", ["scalar", "tensor"])
def test_setitem_matches_torch(key, value):
    ours, theirs = pair()
    result_shape = theirs[convert(key, torch)].shape
    if value == "scalar":
        v_ours, v_theirs = -7, -7
    else:
        v_theirs = -torch.arange(result_shape[-1] if result_shape else 1, dtype=torch.float32) - 1
        v_ours = kael.tensor(v_theirs.tolist())
    theirs[convert(key, torch)] = v_theirs
    ours[convert(key, kael)] = v_ours
    assert ours.tolist() == theirs.tolist()


def test_setitem_broadcasts_converts_and_reads_values_that_overlap():
    ours, theirs = pair((5,), "int64")
    idx = [4, 0, 2]
    for lib, t in ((kael, ours), (torch, theirs)):  # index_put_ takes a value of the target's dtype only
        with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
            t[lib.tensor(idx)] = lib.tensor([1.9, 2.2, 3.7])
    ours[kael.tensor(idx)] = kael.tensor([1.9, 2.2, 3.7]).long()
    theirs[torch.tensor(idx)] = torch.tensor([1.9, 2.2, 3.7]).long()
    ours[kael.tensor(idx)] = 7.9  # a number is converted
    theirs[torch.tensor(idx)] = 7.9
    assert ours.tolist() == theirs.tolist()
    ours, theirs = pair((5,))
    ours[kael.tensor([0, 1])] = ours[3:5]  # the value is a view of the target
    theirs[torch.tensor([0, 1])] = theirs[3:5].clone()
    assert ours.tolist() == theirs.tolist()


def test_index_put_op_against_torch():
    ours, theirs = pair((3, 4))
    i, j = [0, 2, 0], [1, 3, 1]
    got = ours.index_put((kael.tensor(i), kael.tensor(j)), kael.tensor([1.0, 2.0, 3.0]), accumulate=True)
    expected = theirs.index_put((torch.tensor(i), torch.tensor(j)), torch.tensor([1.0, 2.0, 3.0]), accumulate=True)
    assert got.tolist() == expected.tolist()
    assert ours.tolist() == theirs.tolist()  # the functional form leaves self alone
    assert ours.index_put_([kael.tensor([1])], kael.tensor(5.0)) is ours
    assert ours[1].tolist() == [5.0] * 4
    assert "index_put_" in kael._C._registered_ops() and "_index" in kael._C._registered_ops()


@pytest.mark.parametrize("key,exc", [
    (torch.tensor([0, 9]), IndexError),
    ((torch.tensor([0, 1]), torch.tensor([0, 1, 2])), (IndexError, ValueError)),
    (torch.tensor([1.0]), IndexError),
    (torch.tensor([True, False]), IndexError),
    ([0, 1, 2, 3, 4, 5, 6][::-1][:1] + [10], IndexError),
])
def test_bad_index_tensors_raise_before_any_write(key, exc):
    ours, _ = pair()
    before = ours.tolist()
    with pytest.raises(exc):
        ours[convert(key, kael)]
    with pytest.raises(exc):
        ours[convert(key, kael)] = 1.0
    assert ours.tolist() == before


def test_out_of_range_error_names_the_index():
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 4"):
        kael.zeros(4)[kael.tensor([1, 9])]
    with pytest.raises(IndexError, match="out of range"):
        kael.zeros(2)[5]


def test_negative_step_is_a_value_error_like_torch():
    with pytest.raises(ValueError, match="step must be greater than zero"):
        kael.zeros(4)[::-1]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        torch.zeros(4)[::-1]


def test_basic_indexing_returns_views_and_advanced_returns_copies():
    t = kael.zeros(3, 4)
    t[1:, 2] = 5
    assert t[1, 2].item() == 5.0
    view = t[0]
    view.fill_(1)
    assert t[0].tolist() == [1.0] * 4
    copy = t[kael.tensor([0])]
    copy.fill_(9)
    assert t[0].tolist() == [1.0] * 4
    assert t[0, ..., None, 1:3].shape == (1, 2)
    assert kael.zeros(2, 3, 4)[0, ..., None, 1:3].shape == (3, 1, 2)


def test_indexing_goes_through_the_dispatcher():
    x = kael.arange(12.0).reshape(3, 4)
    result, ops = kael._C._trace_dispatch(lambda: x[kael.tensor([0, 2]), 1:])
    assert result.tolist() == [[1.0, 2.0, 3.0], [9.0, 10.0, 11.0]]
    assert "_index" in ops and "slice" in ops
    mask = x > 5

    def assign():
        x[mask] = 0.0
        x[kael.tensor([0]), 0] = kael.tensor(7.0)

    _, ops = kael._C._trace_dispatch(assign)
    assert "nonzero" in ops and ops.count("index_put_") == 2
    assert x.tolist() == [[7.0, 1.0, 2.0, 3.0], [4.0, 5.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]


# ---- NumPy arrays and uint8 tensors as keys

NUMPY_KEYS = [
    lambda np: np.array([0, 2, -1]),
    lambda np: np.array([[0, 1], [3, 2]]),
    lambda np: np.array([1, 3], dtype=np.int32),
    lambda np: np.array([True, False, True, True]),
    lambda np: np.array([], dtype=np.int64),
    lambda np: (slice(None), np.array([4, 0])),
    lambda np: (0, np.array([1, 1, 2]), slice(1, 3)),
    lambda np: (np.array([0, 1]), [1, 2]),
    lambda np: np.array(2),  # 0-d: an integer, the dim is dropped
    lambda np: np.array(True),  # 0-d bool: a new dim of 1, as True
    lambda np: np.array(False),
    lambda np: np.int64(3),  # NumPy scalars: integers through __index__
    lambda np: (np.int32(1), Ellipsis, np.array([0, 5])),
]


@pytest.mark.parametrize("make_key", NUMPY_KEYS)
def test_numpy_arrays_are_index_tensors_as_in_torch(make_key):
    import numpy as np
    ours, theirs = pair()
    key = make_key(np)
    expected = theirs[key]
    got = ours[key]
    assert got.shape == expected.shape
    assert got.tolist() == expected.tolist()
    theirs[key] = -3.5
    ours[key] = -3.5
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("make_key", [lambda np: np.bool_(True), lambda np: np.float64(1.0),
                                      lambda np: np.array([[True, False]])])
def test_numpy_keys_torch_refuses(make_key):
    # NumPy scalars that are not integers are no index (IndexError), and a mask's shape must match.
    import numpy as np
    ours, theirs = pair()
    with pytest.raises(IndexError):
        theirs[make_key(np)]
    with pytest.raises(IndexError):
        ours[make_key(np)]


@pytest.mark.parametrize("key", [torch.tensor([1, 0, 2, 0], dtype=torch.uint8),
                                 (slice(None), torch.tensor([0, 1, 1, 0, 1], dtype=torch.uint8)),
                                 torch.tensor(1, dtype=torch.uint8), torch.tensor(0, dtype=torch.uint8)],
                         ids=key_id)
def test_uint8_tensor_keys_are_deprecated_masks_as_in_torch(key):
    import warnings
    ours, theirs = pair()
    messages = []
    for lib, t in ((torch, theirs), (kael, ours)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = t[convert(key, lib)]
        messages.append([str(w.message).replace("torch.", "kael.").split(" (Triggered")[0] for w in caught])
        if lib is torch:
            expected = r
        else:
            got = r
    assert messages[0] == messages[1]  # a warning where the mask has dims, none for a 0-d one
    assert got.shape == expected.shape
    assert got.tolist() == expected.tolist()
    mask = key[-1] if isinstance(key, tuple) else key
    if mask.dim() > 0:  # torch's one-value shortcut refuses a uint8 mask; a full value goes through index_put_
        value = torch.arange(expected.numel(), dtype=torch.float32).reshape(expected.shape) - 9
        with pytest.warns(UserWarning):
            theirs[key] = value
        with pytest.warns(UserWarning):
            ours[convert(key, kael)] = kael.tensor(value.tolist())
        assert ours.tolist() == theirs.tolist()
    with pytest.raises(IndexError):  # a mask of the wrong length, as torch
        theirs[torch.tensor([1, 0, 1], dtype=torch.uint8)]
    with pytest.raises(IndexError), pytest.warns(UserWarning):
        ours[kael.tensor([1, 0, 1], dtype=kael.uint8)]


@pytest.mark.parametrize("make_key", [
    lambda lib: [[0, 1], [1, 0]],
    lambda lib: [[1]],
    lambda lib: [0, slice(None)],
    lambda lib: [0, None],
    lambda lib: [0, Ellipsis],
    lambda lib: [lib.tensor([0, 1]), lib.tensor([2, 0])],
    lambda lib: [[0, 1], slice(1, 3)],
], ids=["lists", "one-list", "slice", "none", "ellipsis", "tensors", "list-and-slice"])
def test_a_list_holding_sequences_or_slices_is_a_tuple_key_as_in_torch(make_key):
    # torch 2.13 (and NumPy before 1.23) reads such a list as the tuple of its items, warning
    theirs, ours = torch.arange(12).reshape(3, 4), kael.arange(12).reshape(3, 4)
    with pytest.warns(UserWarning, match="non-tuple sequence for multidimensional indexing"):
        expected = theirs[make_key(torch)]
    with pytest.warns(UserWarning, match="non-tuple sequence for multidimensional indexing"):
        got = ours[make_key(kael)]
    assert list(got.shape) == list(expected.shape) and got.tolist() == expected.tolist()
    with pytest.warns(UserWarning):
        theirs[make_key(torch)] = -1
    with pytest.warns(UserWarning):
        ours[make_key(kael)] = -1
    assert ours.tolist() == theirs.tolist()


def test_a_list_of_ints_or_32_items_stays_one_index_tensor():
    theirs, ours = torch.arange(40), kael.arange(40)
    key = [[i] for i in range(32)]  # 32 items: an index tensor of shape (32, 1) in both
    assert ours[key].tolist() == theirs[key].tolist()
    with pytest.raises(IndexError):
        kael.arange(6)[[[0, 1], [1, 0]]]  # read as two indices into one dim
    with pytest.raises(IndexError):
        torch.arange(6)[[[0, 1], [1, 0]]]


def test_a_list_key_is_read_from_a_snapshot_of_its_items():
    # an item's __index__ that empties the list cannot make the walk read freed items
    key = []

    class Evil:
        def __index__(self):
            key.clear()
            return 1

    key.extend([Evil(), slice(None)])
    x = kael.arange(12).reshape(3, 4)
    with pytest.warns(UserWarning):
        assert x[key].tolist() == [4, 5, 6, 7]


def test_indices_that_do_not_broadcast_raise_index_error_as_torch():
    with pytest.raises(IndexError, match="shape mismatch"):
        torch.arange(6).reshape(2, 3)[[0, 1], [0, 1, 2]]
    x = kael.arange(6).reshape(2, 3)
    with pytest.raises(IndexError, match=r"index: shape mismatch: .* with shapes \[2\], \[3\]"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="shape mismatch"):
        x[[0, 1], [0, 1, 2]] = 5
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.filterwarnings("ignore:indexing with dtype")
@pytest.mark.parametrize("value", [9, 2.0, "tensor"])
def test_a_one_element_write_through_a_uint8_mask_is_refused_as_torch(value):
    for lib in (torch, kael):
        x = lib.arange(3)
        v = lib.tensor(9) if value == "tensor" else value
        with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks"):
            x[lib.tensor([1, 0, 1], dtype=lib.uint8)] = v
        assert x.tolist() == [0, 1, 2]
        # more than one value goes through index_put_, which takes the uint8 mask
        x[lib.tensor([1, 0, 1], dtype=lib.uint8)] = lib.tensor([7, 8])
        assert x.tolist() == [7, 1, 8]
