"""kael.save and kael.load: what PyTorch code calls to keep a model (torch.save(model.state_dict(),
path), model.load_state_dict(torch.load(path, weights_only=True))), as a pickle of kael objects.

The files are kael's own: a pickle stream (tensors pickle with their bytes, kael/_tensor.py), not
torch's zip archive, which kael.load recognises and refuses with a message that points to
safetensors, the format both libraries read (kael.save_safetensors / kael.load_safetensors).

weights_only=True (the default, as in torch 2.6 and later) unpickles through an allow-list:
tensors and Parameters, dtypes, devices, Size, containers (dict, OrderedDict, list, tuple, set)
and plain values; any other global is a pickle.UnpicklingError naming it, before anything of it
runs. weights_only=False unpickles anything, so only files one trusts may be loaded that way.
"""
from __future__ import annotations

import collections
import functools
import io
import os
import pickle

import kael
from kael import _C

__all__ = ["save", "load"]

DEFAULT_PROTOCOL = 2
_ZIP_MAGIC = b"PK\x03\x04"


def _opened(f, mode):
    """(file object, whether we opened it) for a path or a file-like object."""
    if isinstance(f, (str, os.PathLike)):
        return open(f, mode), True
    if isinstance(f, (bytes, bytearray)):
        raise TypeError(f"{'save' if 'w' in mode else 'load'}: expected a path or a file object, got bytes "
                        f"(wrap them in io.BytesIO)")
    return f, False


def save(obj, f, pickle_module=pickle, pickle_protocol=DEFAULT_PROTOCOL, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Saves obj (a tensor, a state dict, a module, any picklable object) to f, a path or a binary
    file object. CPU tensors only (pickle refuses others with a RuntimeError). torch's format
    switches are accepted and change nothing: kael writes one format."""
    if pickle_module is not pickle:
        raise ValueError("save: kael pickles with the standard pickle module only")
    out, owned = _opened(f, "wb")
    try:
        pickle.dump(obj, out, protocol=pickle_protocol)
    finally:
        if owned:
            out.close()


@functools.cache
def _allowed():
    """The allow-list, built once (at the first weights-only load: kael.nn imports after kael)."""
    from kael._tensor import _rebuild_tensor
    from kael.nn.parameter import Parameter

    return {
        ("kael._tensor", "_rebuild_tensor"): _rebuild_tensor,
        ("kael", "Tensor"): kael.Tensor,
        ("kael._C", "Tensor"): kael.Tensor,
        ("kael.nn.parameter", "Parameter"): Parameter,
        ("kael", "device"): kael.device,
        ("kael._tensor", "device"): kael.device,
        ("kael", "Size"): kael.Size,
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("builtins", "complex"): complex,
        ("builtins", "slice"): slice,
        ("builtins", "bytearray"): _bytearray,
        ("builtins", "bytes"): _empty_bytes,
        ("_codecs", "encode"): _latin1_encode,  # how protocol 2 spells bytes
    }


def _empty_bytes(*args):
    # protocol 2 spells b"" as bytes(); a count (bytes(10**12)) would only allocate
    if args:
        raise pickle.UnpicklingError("load: weights only: bytes() with arguments")
    return b""


def _bytearray(*args):
    # protocol 2 spells a bytearray as bytearray(_codecs.encode(text, "latin1")); a count would
    # only allocate
    if len(args) == 0:
        return bytearray()
    if len(args) == 1 and isinstance(args[0], bytes):
        return bytearray(args[0])
    raise pickle.UnpicklingError("load: weights only: bytearray() takes bytes here")


def _latin1_encode(text, encoding="latin1"):
    if encoding != "latin1":
        raise pickle.UnpicklingError(f"load: weights only: unsupported encoding {encoding!r} in _codecs.encode")
    return text.encode("latin1")


class _WeightsUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module == "__builtin__":  # protocol 2's name for builtins
            module = "builtins"
        found = _allowed().get((module, name))
        if found is not None:
            return found
        if module in ("kael", "kael._C") and isinstance(getattr(_C, name, None), _C.dtype):
            return getattr(_C, name)  # kael.float32 and the other dtypes
        raise pickle.UnpicklingError(
            f"load: weights only load failed: unsupported global {module}.{name}. Load with weights_only=False only "
            f"if the file comes from a source you trust (it can run any code).")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("load: weights only load failed: persistent ids are not supported")


def _to(obj, device):
    """obj with its tensors moved to device (containers rebuilt)."""
    if isinstance(obj, kael.Tensor):
        return obj.to(device)
    if isinstance(obj, collections.OrderedDict):
        return collections.OrderedDict((k, _to(v, device)) for k, v in obj.items())
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to(v, device) for v in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_to(v, device) for v in obj)
    return obj


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Loads what kael.save wrote to f (a path or a binary file object). weights_only=True (the
    default; None means True, as in torch) allows tensors, dtypes, devices, containers and plain values only (see the module's
    docstring). map_location: None or "cpu" (kael pickles CPU tensors), or a CUDA device where kael
    has one."""
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("load: kael unpickles with the standard pickle module only")
    if weights_only is None:  # torch's default since 2.6
        weights_only = True
    if mmap:
        raise ValueError("load: mmap=True is for safetensors files here: kael.load_safetensors(path, mmap=True)")
    device = None
    if map_location is not None:
        if callable(map_location) or isinstance(map_location, dict):
            raise TypeError("load: map_location must be a device or a device string in kael")
        device = kael.device(map_location) if isinstance(map_location, str) else map_location
        if not isinstance(device, kael.device):
            raise TypeError(f"load: map_location must be a device or a device string, got {type(map_location).__name__}")
        if device.type == "cuda" and not kael.cuda.is_available():
            raise RuntimeError("load: attempting to deserialize object on a CUDA device but kael.cuda.is_available() "
                               "is False; pass map_location='cpu'")
    source, owned = _opened(f, "rb")
    try:
        seekable = getattr(source, "seekable", None)
        start = source.tell() if callable(seekable) and seekable() else None
        head = source.read(4)
        if head == _ZIP_MAGIC:
            raise pickle.UnpicklingError(
                "load: this is a PyTorch checkpoint (a zip archive written by torch.save); kael reads what kael.save "
                "writes. Save the tensors from torch with safetensors (safetensors.torch.save_file) and load them "
                "with kael.load_safetensors")
        if start is not None:
            source.seek(start)
            stream = source
        else:
            stream = io.BufferedReader(_Prefixed(head, source))
        unpickler = _WeightsUnpickler(stream, **pickle_load_args) if weights_only else pickle.Unpickler(
            stream, **pickle_load_args)
        obj = unpickler.load()
    finally:
        if owned:
            source.close()
    if device is not None and device.type != "cpu":
        obj = _to(obj, device)
    return obj


class _Prefixed(io.RawIOBase):
    """A raw stream of `head` followed by the rest of `rest` (for unseekable inputs)."""

    def __init__(self, head, rest):
        self._head, self._rest = head, rest

    def readable(self):
        return True

    def readinto(self, buffer):
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
