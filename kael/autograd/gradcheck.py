"""gradcheck: analytical gradients against central finite differences."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from kael._C import Tensor


def _as_tuple(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def gradcheck(func: Callable[..., Any], inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0) -> bool:
    """Checks the gradients autograd computes for `func` at `inputs` (float64 tensors that
    require grad) against central differences, output by output and element by element.
    Returns True, or raises (or returns False with raise_exception=False) describing the first
    mismatch."""
    import kael
    from kael.autograd import grad as autograd_grad
    from kael.autograd.grad_mode import no_grad

    inputs = _as_tuple(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    for i in diff:
        if inputs[i].dtype != kael.float64:
            import warnings
            warnings.warn(f"gradcheck: input {i} is {inputs[i].dtype}, not float64; the check is not reliable",
                          stacklevel=2)

    def fail(msg: str) -> bool:
        if raise_exception:
            raise RuntimeError(msg)
        return False

    outputs = _as_tuple(func(*inputs))
    checked = [k for k, out in enumerate(outputs) if isinstance(out, Tensor) and out.requires_grad]
    # analytical: one backward per output element (all before any input is perturbed)
    analytical: dict[int, list] = {}
    for k in checked:
        flat_out = outputs[k].reshape(-1)
        n_out = flat_out.numel()
        rows = [kael.zeros(n_out, inputs[i].numel(), dtype=kael.float64) for i in diff]
        for j in range(n_out):
            g = kael.zeros(n_out, dtype=flat_out.dtype)
            g[j] = 1.0
            grads = autograd_grad(flat_out, [inputs[i] for i in diff], g, retain_graph=True, allow_unused=True)
            for a, gi in zip(rows, grads):
                if gi is not None:
                    a[j] = gi.reshape(-1).to(kael.float64)
        analytical[k] = rows
    # numerical: central differences, perturbing each element of each input in place
    for pos, i in enumerate(diff):
        x = inputs[i]
        xd = x.detach()
        shape = tuple(x.shape)
        for e in range(x.numel()):
            idx, rest = [], e
            for size in reversed(shape):
                idx.append(rest % size)
                rest //= size
            idx = tuple(reversed(idx))

            def put(v: float) -> None:
                if shape:
                    xd[idx] = v
                else:
                    xd.fill_(v)

            with no_grad():
                orig = (xd[idx] if shape else xd).item()
                put(orig + eps)
                plus = [_as_tuple(func(*inputs))[k].reshape(-1).to(kael.float64).clone() for k in checked]
                put(orig - eps)
                minus = [_as_tuple(func(*inputs))[k].reshape(-1).to(kael.float64).clone() for k in checked]
                put(orig)
            for n, k in enumerate(checked):
                numeric = (plus[n] - minus[n]) / (2 * eps)
                ana = analytical[k][pos][:, e]
                if not kael.allclose(ana, numeric, rtol=rtol, atol=atol):
                    return fail(f"Jacobian mismatch for output {k} with respect to input {i}, element {e}:\n"
                                f"numerical:{numeric.tolist()}\nanalytical:{ana.tolist()}")
    return True
