"""kael.nn.functional: the functional forms of neural-network ops, as torch.nn.functional."""

import kael

# ---- random


def dropout(input: kael.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> kael.Tensor:
    """Zeroes each element with probability p and scales the others by 1 / (1 - p) while training;
    returns input itself when training is False or p is 0 (as torch)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    result = kael.dropout(input, p, training)
    if inplace and result is not input:
        input.copy_(result)
        return input
    return result
