"""A first look at kael: tensors, broadcasting, type promotion, views, reductions, matmul,
errors, and the per-call overhead table against PyTorch and NumPy.

Run with the README's demo command (or `.venv/bin/python examples/demo.py`).
"""
from __future__ import annotations

import pathlib
import runpy
import sys

import kael


def show(label: str, value) -> None:
    text = repr(value).replace("\n", "\n" + " " * 24)
    print(f"{label:<22}  {text}")


def main() -> None:
    print(f"kael {kael.__version__}: {kael.get_num_threads()} threads, "
          f"CUDA backend: {kael.cuda_is_available()}\n")

    a = kael.arange(6).reshape(2, 3)
    b = kael.tensor([0.5, -1.0, 2.0])
    show("a = arange(6)", a)
    show("b", b)
    show("a + b (broadcast)", a + b)
    show("(a * 2).dtype", (a * 2).dtype)
    show("a / 4 (true div)", a / 4)
    show("kael.add(a, b, alpha=2)", kael.add(a, b, alpha=2))
    show("a.T (a view)", a.T)
    show("a.T.is_contiguous()", a.T.is_contiguous())
    show("a[:, ::2]", a[:, ::2])
    show("a.sum(dim=1)", a.sum(dim=1))
    show("b.exp().mean()", b.exp().mean())
    show("sigmoid(b) > 0.5", kael.sigmoid(b) > 0.5)
    x = kael.ones(3, 4, dtype=kael.float64)
    show("ones(3,4) @ eye(4)", x @ kael.eye(4, dtype=kael.float64))
    v = a.view(6)
    v.add_(10)
    show("a after view.add_(10)", a)

    print("\nErrors are Python exceptions with the op name and the values:")
    for expr in ("kael.zeros(2) + kael.zeros(3)", "kael.zeros(2, 3).sum(dim=5)", "kael.add(a, 'x')",
                 "kael.zeros(2, dtype='float33')"):
        try:
            eval(expr)
        except (ValueError, IndexError, TypeError, RuntimeError) as e:
            first = str(e).splitlines()[0]
            print(f"  {expr:<32} -> {type(e).__name__}: {first[:110]}")

    stats = kael.allocator_stats()
    print(f"\nallocator: {stats}")

    print("\nPer-call overhead and throughput against PyTorch and NumPy (quick run; "
          "docs/performance.md has the full table):\n")
    bench = pathlib.Path(__file__).resolve().parent.parent / "tools" / "bench" / "overhead.py"
    sys.argv = [str(bench), "--quick"] + sys.argv[1:]
    runpy.run_path(str(bench), run_name="__main__")


if __name__ == "__main__":
    main()
