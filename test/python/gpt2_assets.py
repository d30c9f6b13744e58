"""GPT-2's BPE ranks for the tokenizer tests and tools/bench/tokenizer.py.

The ranks ship as `whisper/assets/gpt2.tiktoken` (50,256 ranks; `<|endoftext|>` is 50256) inside
the openai-whisper==20250625 sdist on PyPI. The first use runs

    python -m pip download --no-deps --no-binary :all: openai-whisper==20250625

into a temporary directory, takes that one file out of the archive, checks its SHA-256 (the same
file as tiktoken's r50k_base.tiktoken) and keeps it in the cache directory: $KAEL_TEST_CACHE, else
~/.cache/kael. Later uses read the cached copy.
"""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

WHISPER = "openai-whisper==20250625"
MEMBER = "whisper/assets/gpt2.tiktoken"
SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
CORPUS = Path(__file__).resolve().parents[2] / "kael" / "data" / "tinyshakespeare.txt"
# GPT-2's pre-tokenisation pattern as tiktoken spells it (tiktoken_ext.openai_public.r50k_pat_str).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


class FetchError(RuntimeError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("KAEL_TEST_CACHE") or Path.home() / ".cache" / "kael")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def gpt2_tiktoken_path() -> Path:
    """The cached gpt2.tiktoken, fetched first if needed; FetchError says why it cannot be had."""
    target = cache_dir() / "gpt2.tiktoken"
    if target.exists() and _sha256(target.read_bytes()) == SHA256:
        return target
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", WHISPER, "-d", tmp]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise FetchError(f"`{' '.join(cmd[2:])}` failed: {e}") from e
        archives = list(Path(tmp).glob("*.tar.gz"))
        if done.returncode != 0 or not archives:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise FetchError(f"`pip download {WHISPER}` failed (exit {done.returncode}): {tail[0]}")
        with tarfile.open(archives[0]) as tar:
            members = [m for m in tar.getmembers() if m.name.endswith("/" + MEMBER)]
            if not members:
                raise FetchError(f"{archives[0].name} has no {MEMBER}")
            data = tar.extractfile(members[0]).read()
    if _sha256(data) != SHA256:
        raise FetchError(f"{MEMBER} of {WHISPER} has SHA-256 {_sha256(data)}, expected {SHA256}")
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_suffix(f".{os.getpid()}.part")
    part.write_bytes(data)
    os.replace(part, target)
    return target


def load_ranks(path) -> dict[bytes, int]:
    """tiktoken's load_tiktoken_bpe without its download cache: {token bytes: rank}."""
    out = {}
    for line in Path(path).read_bytes().splitlines():
        if line:
            token, rank = line.split()
            out[base64.b64decode(token)] = int(rank)
    return out


def tiktoken_gpt2(path):
    """The oracle: tiktoken's Encoding from the same file with GPT-2's pattern and special token."""
    import tiktoken
    return tiktoken.Encoding("gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=load_ranks(path),
                             special_tokens={"<|endoftext|>": 50256})
