"""Parameters to one flat vector and back."""
import kael


def _same_device(param, device):
    if device is None:
        return param.device
    if param.device != device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return device


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one new 1-D tensor, in order."""
    device = None
    flat = []
    for param in parameters:
        device = _same_device(param, device)
        flat.append(param.view(-1))
    return kael.cat(flat)


def vector_to_parameters(vec, parameters):
    """Replaces each parameter's data by its slice of vec (parameters_to_vector's layout), viewed
    in the parameter's shape: the parameters then share vec's memory, as in torch."""
    if not isinstance(vec, kael.Tensor):
        kind = type(vec).__qualname__ if type(vec).__module__ == "builtins" else f"{type(vec).__module__}.{type(vec).__qualname__}"
        raise TypeError(f"expected kael.Tensor, but got: {kind}")
    device = None
    offset = 0
    pieces = []
    for param in parameters:  # every slice and view first: an error leaves every parameter as it was
        device = _same_device(param, device)
        n = param.numel()
        pieces.append((param, vec[offset:offset + n].view_as(param).data))
        offset += n
    for param, piece in pieces:
        param.data = piece
