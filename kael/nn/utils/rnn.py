"""kael.nn.utils.rnn: sequences of different lengths for the recurrent layers, as torch.nn.utils.rnn.

A PackedSequence holds the steps of a batch of sequences sorted by length (longest first), time
step after time step: `data` has the batch_sizes[0] rows of step 0, then the batch_sizes[1] rows
of step 1, ... The packing and padding here are built from differentiable ops (slices, cat,
stack), so gradients flow through them as in torch.
"""
from collections import namedtuple

import kael

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]

_PackedSequenceBase = namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


def invert_permutation(permutation):
    """The permutation that undoes `permutation` (None stays None)."""
    if permutation is None:
        return None
    output = kael.empty_like(permutation)
    output.scatter_(0, permutation, kael.arange(0, permutation.numel(), dtype=permutation.dtype))
    return output


class PackedSequence(_PackedSequenceBase):
    """data, batch_sizes, sorted_indices, unsorted_indices of a packed batch of sequences."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is not None:
            if batch_sizes.device.type != "cpu":
                raise ValueError(
                    "PackedSequence: batch_sizes should always be on CPU. Instances of PackedSequence should "
                    "never be created manually. They should be instantiated by functions like pack_sequence "
                    "and pack_padded_sequences in nn.utils.rnn. "
                    "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
            return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)
        if not (isinstance(data, (list, tuple)) and len(data) == 2):
            raise TypeError("PackedSequence: expected (data, batch_sizes) or data and batch_sizes")
        return super().__new__(cls, data[0], data[1], sorted_indices, unsorted_indices)

    def _map(self, fn_data, fn_index):
        data = fn_data(self.data)
        if data is self.data:
            return self
        si = fn_index(self.sorted_indices) if self.sorted_indices is not None else None
        ui = fn_index(self.unsorted_indices) if self.unsorted_indices is not None else None
        return type(self)(data, self.batch_sizes, si, ui)

    def to(self, *args, **kwargs):
        """data converted as Tensor.to; the indices follow data's device (batch_sizes stays on the CPU)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        device = data.device
        si = self.sorted_indices.to(device) if self.sorted_indices is not None else None
        ui = self.unsorted_indices.to(device) if self.unsorted_indices is not None else None
        return type(self)(data, self.batch_sizes, si, ui)

    def cpu(self, *args, **kwargs):
        return self.to("cpu")

    def cuda(self, *args, **kwargs):
        return self.to("cuda")

    def double(self):
        return self.to(dtype=kael.float64)

    def float(self):
        return self.to(dtype=kael.float32)

    def half(self):
        return self.to(dtype=kael.float16)

    def bfloat16(self):
        return self.to(dtype=kael.bfloat16)

    def long(self):
        return self.to(dtype=kael.int64)

    def int(self):
        return self.to(dtype=kael.int32)

    def short(self):
        return self.to(dtype=kael.int16)

    def char(self):
        return self.to(dtype=kael.int8)

    def byte(self):
        return self.to(dtype=kael.uint8)

    @property
    def is_cuda(self):
        return self.data.device.type == "cuda"

    def is_pinned(self):
        return False


def _lengths_list(lengths):
    if isinstance(lengths, kael.Tensor):
        if lengths.dim() != 1:
            raise RuntimeError(f"pack_padded_sequence: 'lengths' must be a 1-D tensor, got {lengths.dim()}-D")
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def _pack(input, lengths, batch_first, op):
    """data and batch_sizes of a padded input whose lengths are sorted, longest first."""
    if batch_first:
        input = input.transpose(0, 1)
    steps, batch = input.shape[0], input.shape[1]
    if len(lengths) != batch:
        raise RuntimeError(f"{op}: Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                           f"(batch_size={batch})")
    if batch > 0 and lengths[-1] <= 0:
        raise RuntimeError(f"{op}: Length of all samples has to be greater than 0, but found an element in "
                           "'lengths' that is <= 0")
    for a, b in zip(lengths, lengths[1:]):
        if a < b:
            raise RuntimeError(f"{op}: `lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                               "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                               "pack_sequence to sidestep this requirement if you do not need ONNX exportability.")
    if batch > 0 and lengths[0] > steps:
        raise RuntimeError(f"{op}: Expected the longest length ({lengths[0]}) to be at most the padded length "
                           f"({steps})")
    batch_sizes = []
    pieces = []
    for t in range(lengths[0] if batch else 0):
        n = sum(1 for length in lengths if length > t)
        batch_sizes.append(n)
        pieces.append(input[t, :n])
    data = kael.cat(pieces, 0) if pieces else input.reshape((0,) + tuple(input.shape[2:]))
    return data, kael.tensor(batch_sizes, dtype=kael.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch (T, B, *) ((B, T, *) with batch_first) of sequences of the given lengths."""
    lengths = _lengths_list(lengths)
    if enforce_sorted:
        sorted_indices = None
    else:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        # torch sorts with a stable descending sort here
        sorted_indices = kael.tensor(order, dtype=kael.int64)
        lengths = [lengths[i] for i in order]
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    data, batch_sizes = _pack(input, lengths, batch_first, "pack_padded_sequence")
    return PackedSequence(data, batch_sizes, sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Pads a PackedSequence back to (T, B, *) ((B, T, *) with batch_first); returns it and the lengths."""
    batch_sizes = [int(v) for v in sequence.batch_sizes.tolist()]
    max_seq_length = len(batch_sizes)
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError("pad_packed_sequence: Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max sequence length "
                             f"being {max_seq_length}")
        max_seq_length = total_length
    data = sequence.data
    batch = batch_sizes[0] if batch_sizes else 0
    tail = tuple(data.shape[1:])
    rows = []
    off = 0
    for n in batch_sizes:
        step = data[off:off + n]
        off += n
        if n < batch:
            step = kael.cat([step, kael.full((batch - n,) + tail, padding_value, dtype=data.dtype,
                                             device=data.device)], 0)
        rows.append(step)
    for _ in range(max_seq_length - len(batch_sizes)):
        rows.append(kael.full((batch,) + tail, padding_value, dtype=data.dtype, device=data.device))
    padded = kael.stack(rows, 0) if rows else data.new_zeros((0, batch) + tail)
    lengths = [sum(1 for n in batch_sizes if n > b) for b in range(batch)]
    if batch_first:
        padded = padded.transpose(0, 1)
    lengths = kael.tensor(lengths, dtype=kael.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices]
    return padded, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks sequences of shapes (L_i, *) into (max L, B, *) ((B, max L, *) with batch_first), padded on
    padding_side ('right' or 'left') with padding_value."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"pad_sequence: Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, kael.Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    tail = tuple(sequences[0].shape[1:])
    for s in sequences:
        if tuple(s.shape[1:]) != tail:
            raise RuntimeError(f"pad_sequence: The size of the trailing dimensions of every sequence must match, "
                               f"got {list(tail)} and {list(s.shape[1:])}")
    max_len = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = max_len - s.shape[0]
        if missing:
            pad = kael.full((missing,) + tail, padding_value, dtype=s.dtype, device=s.device)
            s = kael.cat([s, pad] if padding_side == "right" else [pad, s], 0)
        padded.append(s)
    return kael.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The sequences of a padded batch, each cut to its length."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:int(length)] for seq, length in zip(padded_sequences, _lengths_list(lengths))]


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of sequences of shapes (L_i, *) (pad_sequence, then pack_padded_sequence)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences a PackedSequence holds, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
