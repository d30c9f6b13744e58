"""Build times of kael: clean build, no-op rebuild, and the edits docs/build.md lists.

    .venv/bin/python tools/bench/build_times.py [--repeats 3] [--jobs 2] [--markdown] [--steps]
                                                [--keep DIR]

Works on a copy of the committed tree (`git archive HEAD`) in a temporary directory, so the
checkout is never touched, and builds the `_C` target with CMake + Ninja exactly as
`pip install -e .` does (Release). Each case runs --repeats times; the table shows the median
wall time, the median CPU time (user + sys of the build and every compiler it ran, which a busy
machine inflates far less than the wall time) and the number of build steps Ninja ran. --steps
lists the steps each incremental case ran; --keep DIR keeps the tree and its build (for
`.ninja_log`, `ninja -t deps`). Run it on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def find_dnnl_dir() -> str:
    """dnnl-config.cmake of the onednn-devel-cpu-gomp wheel in this environment."""
    candidate = Path(sys.prefix) / "lib" / "cmake" / "dnnl"
    if not (candidate / "dnnl-config.cmake").exists():
        sys.exit(f"oneDNN's CMake files are not in {candidate}: run tools/setup_env.sh first")
    return str(candidate)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd, cwd):
    start, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed, children_cpu() - cpu, proc.stdout + proc.stderr


def steps(output: str) -> int:
    found = re.findall(r"^\[(\d+)/(\d+)\]", output, re.M)
    return int(found[-1][0]) if found else 0


def step_names(output: str) -> list[str]:
    """What each step built: the object or target after Ninja's `[i/n] Building CXX object`."""
    return [m.group(1).split()[-1] for m in re.finditer(r"^\[\d+/\d+\] (.*)$", output, re.M)]


def slowest_steps(log: Path, n: int) -> list[tuple[int, str]]:
    """The n longest steps recorded in a .ninja_log (start and end in ms, then the output)."""
    steps = {}
    for line in log.read_text().splitlines()[1:]:
        start, end, _, output, _ = line.split("\t")
        steps[output] = int(end) - int(start)
    return sorted(((ms, name) for name, ms in steps.items()), reverse=True)[:n]


def compile_cpu_alone(build: Path, outputs: list[str]) -> dict[str, float]:
    """CPU time of each object's compile command (compile_commands.json) run alone, to /dev/null."""
    commands = json.loads((build / "compile_commands.json").read_text())
    out = {}
    for entry in commands:
        args = shlex.split(entry["command"])
        if "-o" not in args:
            continue
        i = args.index("-o")
        if args[i + 1] not in outputs:
            continue
        target, args[i + 1] = args[i + 1], os.devnull
        start = children_cpu()
        subprocess.run(args, cwd=entry["directory"], check=True, capture_output=True)
        out[target] = children_cpu() - start
    return out


def warnings_in(output: str) -> list[str]:
    return [line for line in output.splitlines() if "warning:" in line]


class Tree:
    def __init__(self, src: Path, jobs: int):
        self.src = src
        self.build = src / "build" / "bench"
        self.jobs = jobs
        bindir = Path(sys.executable).parent
        self.cmake = str(bindir / "cmake") if (bindir / "cmake").exists() else "cmake"
        self.env_path = f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"

    def configure(self):
        os.environ["PATH"] = self.env_path
        return run([self.cmake, "-S", str(self.src), "-B", str(self.build), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}",
                    f"-Ddnnl_DIR={find_dnnl_dir()}"], self.src)

    def compile(self):
        return run([self.cmake, "--build", str(self.build), "--target", "_C", "-j", str(self.jobs)], self.src)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--steps", action="store_true", help="list the steps of each incremental case")
    parser.add_argument("--keep", type=Path, help="build in this (new) directory and keep it")
    parser.add_argument("--top", type=int, default=0, metavar="N",
                        help="list the N slowest steps of the (last) clean build, from .ninja_log, "
                             "and the CPU time of each of those compiles rerun alone")
    args = parser.parse_args()

    results: dict[str, list[tuple[float, float, int]]] = {}
    all_warnings: list[str] = []

    def record(name, elapsed, cpu, out):
        results.setdefault(name, []).append((elapsed, cpu, steps(out)))
        all_warnings.extend(warnings_in(out))
        if args.steps and not name.startswith("clean"):
            print(f"{name}: {', '.join(step_names(out)) or 'nothing'}", file=sys.stderr)

    if args.keep:
        args.keep.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="kael-build-times-") as tmp:
        src = (args.keep or Path(tmp)) / "src"
        src.mkdir()
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        tree = Tree(src, args.jobs)
        registry = src / "native_functions.yaml"
        original = registry.read_text()
        formula = "  pointwise: T(1) / a\n"
        assert formula in original, "reciprocal's formula moved; update this script"
        derivative = "    self: -grad * result * result\n  doc: Returns 1 / x for each element.\n"
        assert derivative in original, "reciprocal's derivative moved; update this script"
        new_op = ("\n- func: bench_square(Tensor self) -> Tensor\n  variants: [function, method]\n"
                  "  pointwise: a * a\n  doc: Squares each element (build benchmark).\n")
        kernel = src / "aten/src/native/cpu/reduce.cpp"
        binding = src / "csrc/arg_parsing.cpp"
        for i in range(args.repeats):
            print(f"round {i + 1}/{args.repeats}", file=sys.stderr)
            shutil.rmtree(tree.build, ignore_errors=True)
            record("clean: configure + codegen", *tree.configure())
            record("clean: compile + link `kael._C`", *tree.compile())
            slowest = slowest_steps(tree.build / ".ninja_log", args.top)
            alone = compile_cpu_alone(tree.build, [name for _, name in slowest])
            record("no-op rebuild", *tree.compile())
            registry.write_text(original.replace(formula, "  pointwise: T(1) / (a)\n"))
            record("edit one pointwise formula in `native_functions.yaml`", *tree.compile())
            registry.write_text(original)
            tree.compile()
            registry.write_text(original.replace(derivative, derivative.replace("-grad * result", "-(grad * result)")))
            record("edit one derivative formula in `native_functions.yaml`", *tree.compile())
            registry.write_text(original)
            tree.compile()
            registry.write_text(original + new_op)
            record("add one pointwise op to `native_functions.yaml`", *tree.compile())
            registry.write_text(original)
            tree.compile()
            registry.write_text(original + new_op + "  derivatives:\n    self: 2 * grad * self\n")
            record("add one pointwise op with a derivative", *tree.compile())
            registry.write_text(original)
            tree.compile()
            kernel.write_text(kernel.read_text() + "\n")
            record("edit one hand-written kernel (`aten/src/native/cpu/reduce.cpp`)", *tree.compile())
            binding.write_text(binding.read_text() + "\n")
            record("edit one binding file (`csrc/arg_parsing.cpp`)", *tree.compile())

    rows = []
    for name, runs in results.items():
        med = statistics.median(t for t, _, _ in runs)
        cpu = statistics.median(c for _, c, _ in runs)
        n = max(s for _, _, s in runs)
        rows.append((name, med, cpu, n, [t for t, _, _ in runs]))
    if args.markdown:
        print("| build | wall time (median) | CPU time (median) | build steps | runs |")
        print("|---|---:|---:|---:|---|")
        for name, med, cpu, n, runs in rows:
            print(f"| {name} | {med:.2f} s | {cpu:.2f} s | {n} | {', '.join(f'{t:.2f}' for t in runs)} |")
    else:
        for name, med, cpu, n, runs in rows:
            print(f"{name:70s} {med:8.2f} s  cpu {cpu:8.2f} s  {n:3d} steps  "
                  f"({', '.join(f'{t:.2f}' for t in runs)})")
    if args.top:
        print(f"\nslowest steps of the clean build (wall time in the build with {args.jobs} jobs; "
              "CPU time compiled again alone):")
        for ms, name in slowest:
            cpu = f"{alone[name]:7.2f} s" if name in alone else "      -  "
            print(f"  {ms / 1000:7.2f} s  cpu {cpu}  {name}")
    unique = sorted(set(all_warnings))
    print(f"\ncompiler warnings: {len(unique)}")
    for w in unique[:20]:
        print("  " + w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
