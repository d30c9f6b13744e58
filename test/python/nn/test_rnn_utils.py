"""kael.nn.utils.rnn against torch.nn.utils.rnn: pad_sequence (batch_first, padding_value,
padding_side), pack_padded_sequence (enforce_sorted, indices), pad_packed_sequence (total_length),
pack_sequence, unpad/unpack_sequence, PackedSequence; values, dtypes, gradients and errors."""
import numpy as np
import pytest
import torch

import kael
from kael.nn.utils import rnn as krnn
from torch.nn.utils import rnn as trnn


def tk(t, requires_grad=False):
    out = kael.tensor(t.detach().numpy().copy())
    if requires_grad:
        out.requires_grad_(True)
    return out


def npy(t):
    return np.asarray(t.detach().tolist()) if isinstance(t, kael.Tensor) else t.detach().numpy()


def seqs(lengths, feat=(3,), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, *feat, dtype=torch.float64, generator=g) for n in lengths]


def same_packed(pk, pt):
    np.testing.assert_allclose(npy(pk.data), npy(pt.data))
    np.testing.assert_array_equal(npy(pk.batch_sizes), pt.batch_sizes.numpy())
    assert pk.batch_sizes.dtype == kael.int64
    for a, b in ((pk.sorted_indices, pt.sorted_indices), (pk.unsorted_indices, pt.unsorted_indices)):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(npy(a), b.numpy())


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_value", [0.0, -1.5])
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("feat", [(), (3,), (2, 2)])
def test_pad_sequence(batch_first, padding_value, padding_side, feat):
    ts = [s.requires_grad_(True) for s in seqs([3, 5, 1], feat)]
    ks = [tk(s, True) for s in ts]
    pt = trnn.pad_sequence(ts, batch_first=batch_first, padding_value=padding_value, padding_side=padding_side)
    pk = krnn.pad_sequence(ks, batch_first=batch_first, padding_value=padding_value, padding_side=padding_side)
    assert tuple(pk.shape) == tuple(pt.shape)
    np.testing.assert_array_equal(npy(pk), npy(pt))
    w = torch.arange(pt.numel(), dtype=torch.float64).reshape(pt.shape)
    (pt * w).sum().backward()
    (pk * tk(w)).sum().backward()
    for a, b in zip(ks, ts):
        np.testing.assert_array_equal(npy(a.grad), npy(b.grad))


def test_pad_sequence_errors_and_tensor_input():
    with pytest.raises(RuntimeError) as et:
        trnn.pad_sequence([torch.zeros(2)], padding_side="middle")
    with pytest.raises(RuntimeError) as ek:
        krnn.pad_sequence([kael.zeros(2)], padding_side="middle")
    assert str(ek.value) == "pad_sequence: " + str(et.value)
    t = torch.randn(3, 4, 2)
    np.testing.assert_array_equal(npy(krnn.pad_sequence(tk(t))), trnn.pad_sequence(t).numpy())
    ints = [torch.tensor([1, 2, 3]), torch.tensor([4])]
    pk = krnn.pad_sequence([tk(s) for s in ints], batch_first=True, padding_value=7)
    assert pk.dtype == kael.int64
    np.testing.assert_array_equal(npy(pk), trnn.pad_sequence(ints, batch_first=True, padding_value=7).numpy())


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths,enforce_sorted", [([5, 3, 3, 1], True), ([2, 5, 1, 4], False),
                                                    ([5, 3, 3, 1], False), ([4, 4], False)])
def test_pack_and_pad_round_trip(batch_first, lengths, enforce_sorted):
    padded_t = trnn.pad_sequence(seqs(lengths, seed=1), batch_first=batch_first).requires_grad_(True)
    padded_k = tk(padded_t, True)
    pt = trnn.pack_padded_sequence(padded_t, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    pk = krnn.pack_padded_sequence(padded_k, kael.tensor(lengths), batch_first=batch_first,
                                   enforce_sorted=enforce_sorted)
    assert isinstance(pk, krnn.PackedSequence) and isinstance(pk, tuple)
    same_packed(pk, pt)
    for total in (None, 7):
        ot, lt = trnn.pad_packed_sequence(pt, batch_first=batch_first, padding_value=-2.0, total_length=total)
        ok, lk = krnn.pad_packed_sequence(pk, batch_first=batch_first, padding_value=-2.0, total_length=total)
        assert tuple(ok.shape) == tuple(ot.shape)
        np.testing.assert_array_equal(npy(ok), npy(ot))
        np.testing.assert_array_equal(npy(lk), lt.numpy())
        assert lk.dtype == kael.int64
    w = torch.arange(ot.numel(), dtype=torch.float64).reshape(ot.shape)
    (ot * w).sum().backward()
    (ok * tk(w)).sum().backward()
    np.testing.assert_array_equal(npy(padded_k.grad), npy(padded_t.grad))


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_sequence_and_unpack(enforce_sorted):
    lengths = [4, 2, 1] if enforce_sorted else [1, 4, 2]
    ts = seqs(lengths, (2,), seed=2)
    pt = trnn.pack_sequence(ts, enforce_sorted=enforce_sorted)
    pk = krnn.pack_sequence([tk(s) for s in ts], enforce_sorted=enforce_sorted)
    same_packed(pk, pt)
    for a, b in zip(krnn.unpack_sequence(pk), trnn.unpack_sequence(pt)):
        np.testing.assert_array_equal(npy(a), b.numpy())
    padded = trnn.pad_sequence(ts)
    for a, b in zip(krnn.unpad_sequence(tk(padded), kael.tensor(lengths)), trnn.unpad_sequence(padded,
                                                                                               torch.tensor(lengths))):
        np.testing.assert_array_equal(npy(a), b.numpy())


def test_packed_sequence_object():
    pk = krnn.pack_sequence([kael.ones(3, 2), kael.ones(1, 2)], enforce_sorted=False)
    data, batch_sizes, si, ui = pk
    assert pk._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")
    d = pk.to(kael.float64)
    assert isinstance(d, krnn.PackedSequence) and d.data.dtype == kael.float64
    assert pk.double().data.dtype == kael.float64 and pk.float() is pk
    assert pk.to("cpu") is pk and not pk.is_cuda
    np.testing.assert_array_equal(npy(krnn.invert_permutation(kael.tensor([2, 0, 1]))),
                                  trnn.invert_permutation(torch.tensor([2, 0, 1])).numpy())
    assert krnn.invert_permutation(None) is None
    p2 = krnn.PackedSequence(data, batch_sizes, si)
    np.testing.assert_array_equal(npy(p2.unsorted_indices), npy(ui))


def test_pack_errors_as_torch():
    x = torch.zeros(4, 3, 2)
    cases = [
        ([3, 4, 1], True),   # not sorted
        ([4, 3], True),      # wrong count
        ([4, 3, 0], True),   # a zero length
    ]
    for lengths, enforce in cases:
        with pytest.raises(Exception) as et:
            trnn.pack_padded_sequence(x, lengths, enforce_sorted=enforce)
        with pytest.raises(Exception) as ek:
            krnn.pack_padded_sequence(tk(x), lengths, enforce_sorted=enforce)
        assert type(ek.value) is type(et.value)
        assert str(ek.value).startswith("pack_padded_sequence: ")
    pt = trnn.pack_sequence([torch.zeros(3), torch.zeros(2)])
    pk = krnn.pack_sequence([kael.zeros(3), kael.zeros(2)])
    with pytest.raises(ValueError) as et:
        trnn.pad_packed_sequence(pt, total_length=2)
    with pytest.raises(ValueError) as ek:
        krnn.pad_packed_sequence(pk, total_length=2)
    assert str(ek.value) == "pad_packed_sequence: " + str(et.value)
