#!/usr/bin/env python3
"""Size limits of the hand-written product code: files over 800 lines and functions over 120.

    python tools/code_shape.py [--max-file 800] [--max-function 120] [ROOT]

Reads the files git tracks under aten/, csrc/, kael/, codegen/ and libs/ (C++ and Python; the
generated tree lives in build/ and is not tracked). Python functions are measured with ast; a C++
function is a brace block opened at the end of a line that looks like a definition (a line with
a parameter list, not a control statement, not a class/struct/namespace/enum/lambda body),
measured from that line to its closing brace. Exits 1 when anything is over a limit."""
import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

AREAS = ("aten", "csrc", "kael", "codegen", "libs")
CONTROL = re.compile(r"^\s*(?:}\s*)?(?:if|for|while|switch|catch|else|do|try)\b")
NOT_FUNCTION = re.compile(r"\b(?:class|struct|namespace|enum|union)\b|\[[^\]]*\]\s*\(|=\s*\[|^\s*\[")


def python_functions(path: Path, text: str):
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def strip_cpp(text: str) -> list[str]:
    """Lines with comments, string and character literals blanked (braces inside them ignored)."""
    out, i, n = [], 0, len(text)
    buf = []
    state = None
    while i < n:
        c = text[i]
        if state is None:
            if text.startswith("//", i):
                j = text.find("\n", i)
                i = n if j < 0 else j
                continue
            if text.startswith("/*", i):
                j = text.find("*/", i + 2)
                seg = text[i : (n if j < 0 else j + 2)]
                buf.append("".join("\n" if ch == "\n" else " " for ch in seg))
                i = n if j < 0 else j + 2
                continue
            m = re.match(r'R"([^(\s]*)\(', text[i:i + 20])
            if m:
                end = text.find(")" + m.group(1) + '"', i)
                seg = text[i : (n if end < 0 else end + len(m.group(1)) + 2)]
                buf.append("".join("\n" if ch == "\n" else " " for ch in seg))
                i += len(seg)
                continue
            if c in "\"'":
                state = c
                buf.append(" ")
                i += 1
                continue
            buf.append(c)
            i += 1
        else:
            if c == "\\":
                buf.append("  ")
                i += 2
                continue
            if c == state:
                state = None
            buf.append("\n" if c == "\n" else " ")
            i += 1
    return "".join(buf).split("\n")


def cpp_functions(path: Path, text: str):
    lines = strip_cpp(text)
    stack = []  # (kind, name, start line)
    for number, line in enumerate(lines, 1):
        for pos, ch in enumerate(line):
            if ch == "{":
                head = line[:pos]
                # the definition's head may span the lines before the brace
                k = number - 1
                while not head.strip() or (head.strip().startswith(":") or head.rstrip().endswith(",")) and k > 0:
                    k -= 1
                    head = lines[k - 1] + " " + head if k > 0 else head
                    if k <= 0 or number - k > 8:
                        break
                is_function = ("(" in head and ")" in head and not CONTROL.search(head)
                               and not NOT_FUNCTION.search(head) and not head.rstrip().endswith(("=", "return"))
                               and not any(kind == "function" for kind, _, _ in stack))
                name = re.findall(r"([~\w:]+)\s*\(", head)
                stack.append(("function" if is_function else "block", name[0] if name else "?", number))
            elif ch == "}" and stack:
                kind, name, start = stack.pop()
                if kind == "function":
                    yield name, start, number - start + 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--max-file", type=int, default=800)
    parser.add_argument("--max-function", type=int, default=120)
    args = parser.parse_args()
    root = Path(args.root)
    files = subprocess.run(["git", "ls-files", *AREAS], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    long_files, long_functions = [], []
    for name in files:
        path = root / name
        if path.suffix not in (".py", ".cpp", ".h", ".hpp", ".cu", ".cuh") or not path.exists():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        count = text.count("\n")
        if count > args.max_file:
            long_files.append((count, name))
        found = python_functions(path, text) if path.suffix == ".py" else cpp_functions(path, text)
        for fn, start, length in found:
            if length > args.max_function:
                long_functions.append((length, f"{name}:{start} {fn}"))
    print(f"files over {args.max_file} lines: {len(long_files)}")
    for count, name in sorted(long_files, reverse=True):
        print(f"  {count:5d} {name}")
    print(f"functions over {args.max_function} lines: {len(long_functions)}")
    for length, where in sorted(long_functions, reverse=True):
        print(f"  {length:5d} {where}")
    return 1 if long_files or long_functions else 0


if __name__ == "__main__":
    sys.exit(main())
