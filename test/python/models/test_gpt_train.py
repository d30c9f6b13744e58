"""The GPT training job (python -m kael.examples.gpt_train): a short run in a subprocess trains,
reports and writes a checkpoint that kael.GPT.from_pretrained loads and that evaluates to the
logged validation loss; N steps equal N/2 steps and a resumed run to N; bad flags are argparse
errors."""
import json
import math
import os
import re
import signal
import subprocess
import sys

import pytest

import kael
from kael.examples import gpt_train


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# one block of width 32 over a 512-token vocabulary: a step takes milliseconds
TINY = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "32", "--batch-size", "8",
        "--vocab-size", "512", "--warmup", "4", "--lr", "3e-3", "--seed", "7"]
STEP = re.compile(r"^step +(\d+)/(\d+) \| loss (\S+) \| lr (\S+) \| +[\d,]+ tokens/s \| ETA \S+$", re.M)
VALIDATION = re.compile(r"^step +(\d+)/\d+ \| validation loss (\S+)$", re.M)
FINAL = re.compile(r"validation loss (\S+) nats/token \(unigram baseline (\S+),")


def run_job(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "kael.examples.gpt_train", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def step_losses(text):
    return {int(m.group(1)): float(m.group(3)) for m in STEP.finditer(text)}


def validation_losses(text):
    return {int(m.group(1)): float(m.group(2)) for m in VALIDATION.finditer(text)}


def test_short_run_reports_and_its_checkpoint_reloads(tmp_path):
    out = tmp_path / "run"
    text = run_job(*TINY, "--steps", "30", "--eval-every", "15", "--log-every", "5", "--sample-tokens", "12",
                   "--out", str(out)).stdout
    losses = step_losses(text)
    assert sorted(losses) == [1, 5, 10, 15, 20, 25, 30], text
    assert losses[30] < losses[1] - 0.5, losses
    assert sorted(validation_losses(text)) == [15, 30], text
    final = FINAL.search(text)
    assert final, text
    val_loss, baseline = float(final.group(1)), float(final.group(2))
    assert val_loss == validation_losses(text)[30]
    assert 4.0 < baseline < math.log(512), baseline
    assert "--- sample (temperature 0.8, seed 7) ---" in text

    names = set(os.listdir(out))
    assert {"config.json", "model.safetensors", "tokenizer.tiktoken", "training_state.safetensors",
            "training_state.json"} <= names, names
    state = json.loads((out / "training_state.json").read_text())
    assert state["step"] == 30 and state["data_position"] == 30 * 8
    assert state["args"]["n_embd"] == 32 and state["val_losses"][-1] == [30, pytest.approx(val_loss, abs=1e-4)]

    # the saved directory is a Hugging Face GPT-2 directory that evaluates to the logged loss
    model = kael.GPT.from_pretrained(out)
    assert model.config.n_layer == 1 and model.config.vocab_size == 512
    tokenizer = kael.BpeTokenizer.from_tiktoken(str(out / "tokenizer.tiktoken"))
    assert len(tokenizer) == 512 and tokenizer.special_tokens == {"<|endoftext|>": 511}
    with open(gpt_train.CORPUS, encoding="utf-8") as f:
        corpus = f.read()
    val_tokens = kael.tensor(tokenizer.encode_ordinary(corpus[int(0.9 * len(corpus)):]), dtype=kael.int64)
    again = gpt_train.evaluate(model, val_tokens, 32, 8)
    assert abs(again - val_loss) < 6e-5, (again, val_loss)

    # a new run in the same directory reuses the tokenizer it trained
    text = run_job(*TINY, "--steps", "2", "--warmup", "1", "--sample-tokens", "0", "--out", str(out)).stdout
    assert "(cached)" in text and "replacing the run saved there at step 30" in text, text


@pytest.mark.parametrize("dropout", ["0", "0.1"])  # with dropout, the default generator's state is restored too
def test_resume_continues_the_same_run(tmp_path, dropout):
    common = [*TINY, "--steps", "16", "--eval-every", "6", "--log-every", "1", "--sample-tokens", "8",
              "--dropout", dropout]
    whole = run_job(*common, "--out", str(tmp_path / "whole")).stdout
    first = run_job(*common, "--stop-at", "8", "--out", str(tmp_path / "split")).stdout
    assert "stopped at step 8/16" in first and "unigram baseline" not in first
    second = run_job("--resume", "--out", str(tmp_path / "split")).stdout
    assert "resuming" in second and "at step 8/16" in second

    assert sorted(step_losses(first)) == list(range(1, 9))
    assert sorted(step_losses(second)) == list(range(9, 17))
    assert {**step_losses(first), **step_losses(second)} == step_losses(whole)
    assert {**validation_losses(first), **validation_losses(second)} == validation_losses(whole)
    assert FINAL.search(second).groups() == FINAL.search(whole).groups()
    assert "--- sample" in whole and whole.split("--- sample")[1] == second.split("--- sample")[1]  # the seed's

    for name in ("model.safetensors", "training_state.safetensors"):
        a = kael.load_safetensors(str(tmp_path / "whole" / name))
        b = kael.load_safetensors(str(tmp_path / "split" / name))
        assert sorted(a) == sorted(b)
        for key in a:
            scale = a[key].abs().max().item() + 1e-30
            assert (a[key] - b[key]).abs().max().item() <= 1e-6 * scale, (name, key)
    a = json.loads((tmp_path / "whole" / "training_state.json").read_text())
    b = json.loads((tmp_path / "split" / "training_state.json").read_text())
    for key in ("step", "data_position", "rng_state", "args", "val_losses"):
        assert a[key] == b[key], key

    # a resumed run keeps its settings; a finished one has nothing left
    proc = run_job("--resume", "--lr", "1e-2", "--out", str(tmp_path / "split"), check=False)
    assert proc.returncode == 2 and "--lr 0.01 differs from the run's 0.003" in proc.stderr
    proc = run_job("--resume", "--out", str(tmp_path / "split"), check=False)
    assert proc.returncode == 2 and "the run is at step 16" in proc.stderr


def test_resume_refuses_a_checkpoint_cut_short(tmp_path):
    out = tmp_path / "run"
    run_job(*TINY, "--steps", "6", "--stop-at", "3", "--sample-tokens", "0", "--out", str(out))
    path = out / "training_state.json"
    state = json.loads(path.read_text())
    state["step"] = 2  # as if the JSON of the new checkpoint had not been written
    path.write_text(json.dumps(state))
    proc = run_job("--resume", "--out", str(out), check=False)
    assert proc.returncode != 0 and "interrupted while being written" in proc.stderr


def test_ctrl_c_stops_after_the_step_with_a_checkpoint(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "kael.examples.gpt_train", *TINY, "--steps", "100000",
                             "--log-every", "1", "--sample-tokens", "0", "--out", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if line.startswith("step     3/"):
                proc.send_signal(signal.SIGINT)
                break
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    stopped = re.search(r"stopped at step (\d+)/100000", stdout)
    assert stopped, stdout + stderr
    state = json.loads((out / "training_state.json").read_text())
    assert state["step"] == int(stopped.group(1)) >= 3
    text = run_job("--resume", "--stop-at", str(state["step"] + 2), "--out", str(out)).stdout
    assert sorted(step_losses(text)) == [state["step"] + 1, state["step"] + 2]


@pytest.mark.parametrize("flags, message", [
    (["--steps", "0"], "--steps must be at least 1"),
    (["--n-embd", "30", "--n-head", "4"], "--n-embd (30) must be a multiple of --n-head (4)"),
    (["--steps", "10", "--warmup", "10"], "--warmup (10) must be less than --steps (10)"),
    (["--steps", "10", "--warmup", "-1"], "--warmup must be at least 0"),
    (["--steps", "10", "--stop-at", "11"], "--stop-at must be in (0, 10]"),
    (["--lr", "0"], "--lr must be positive"),
    (["--vocab-size", "100"], "--vocab-size must be at least 257"),
    (["--batch-size", "two"], "argument --batch-size: invalid int value: 'two'"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
])
def test_bad_flags_are_argparse_errors(flags, message, capsys):
    with pytest.raises(SystemExit) as info:
        gpt_train.parse_args(flags)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_help_lists_every_flag_and_bad_flags_exit_2(tmp_path):
    help_text = run_job("--help").stdout
    for flag in ("--steps", "--batch-size", "--block-size", "--n-layer", "--n-head", "--n-embd", "--lr", "--warmup",
                 "--eval-every", "--out", "--resume", "--seed", "--threads", "--sample-tokens", "--stop-at"):
        assert flag in help_text, flag
    proc = run_job("--resume", "--out", str(tmp_path / "nothing"), check=False)
    assert proc.returncode == 2 and "holds no run" in proc.stderr
    assert not (tmp_path / "nothing").exists()


def test_schedule_warms_up_then_decays_to_a_tenth():
    assert gpt_train.parse_args(["--steps", "5000"]).warmup == 100
    assert gpt_train.parse_args(["--steps", "300"]).warmup == 30
    args = gpt_train.parse_args(["--steps", "100", "--lr", "1e-3"])
    assert args.warmup == 10
    lrs = [gpt_train.learning_rate(step, args) for step in range(1, 101)]
    assert lrs[:10] == pytest.approx([1e-4 * k for k in range(1, 11)])
    assert all(a > b for a, b in zip(lrs[9:], lrs[10:]))
    assert lrs[-1] == pytest.approx(1e-4)
    assert lrs[54] == pytest.approx(1e-4 + 0.9e-3 / 2)  # halfway through the cosine


def test_window_order_is_a_function_of_seed_and_position():
    order = gpt_train.WindowOrder(1000, 32, seed=3)
    n = order.windows
    assert n == 30
    epoch0 = order.starts(0, n).tolist()
    offset = epoch0[0] % 32
    assert sorted(epoch0) == [offset + 32 * k for k in range(n)]  # each window once per epoch
    assert max(epoch0) + 33 <= 1000
    # reading from the middle, or with a new object, gives the same starts
    again = gpt_train.WindowOrder(1000, 32, seed=3)
    assert again.starts(n + 5, 7).tolist() == order.starts(0, 2 * n).tolist()[n + 5:n + 12]
    assert gpt_train.WindowOrder(1000, 32, seed=4).starts(0, n).tolist() != epoch0
    assert order.starts(n, n).tolist() != epoch0  # a new epoch, a new order
    assert gpt_train.batch_samples(3, 16) == (32, 16)


# ---------------------------------------------------------------- --ddp under mpirun

def run_ddp(nproc, *args):
    """(output, seconds) of `mpirun -np nproc python kael/examples/gpt_train.py --ddp args...` with
    the distributed tests' environment (run_mpi); asserts it exits 0."""
    from mpi_launch import run_mpi
    returncode, output, seconds = run_mpi(nproc, os.path.abspath(gpt_train.__file__), "--ddp", *args, timeout=120)
    assert returncode == 0, output
    return output, seconds


def assert_same_tensors(dir_a, dir_b, name, rel, n_embd=32):
    """Each tensor of dir_a/name equals dir_b's to rel of its norm, except the key bias: its gradient is
    zero in exact arithmetic (softmax ignores a constant added to every score of a row), so in
    float32 it is rounding noise, which AdamW (dividing by its running size) turns into steps that
    follow the summation order, not the data."""
    a = kael.load_safetensors(str(dir_a / name))
    b = kael.load_safetensors(str(dir_b / name))
    assert sorted(a) == sorted(b), name
    for key in a:
        x, y = a[key], b[key]
        if key.startswith("transformer.h.0.attn.c_attn.bias"):
            x = kael.cat([x[:n_embd], x[2 * n_embd:]])
            y = kael.cat([y[:n_embd], y[2 * n_embd:]])
        error = ((x - y) ** 2).sum().sqrt().item()
        assert error <= rel * ((x ** 2).sum().sqrt().item() + 1e-30), (name, key, error)


def test_ddp_on_two_ranks_trains_as_one_process_on_the_global_batch(tmp_path):
    common = [*TINY, "--steps", "10", "--eval-every", "5", "--log-every", "1", "--sample-tokens", "8"]
    single = subprocess.run([sys.executable, "-m", "kael.examples.gpt_train", *common, "--out", str(tmp_path / "one")],
                            cwd=REPO, capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, KAEL_NUM_THREADS="1")).stdout
    ddp, _ = run_ddp(2, *common, "--out", str(tmp_path / "ddp"))

    # rank 0 alone reports: one progress line per step, one header, one sample
    assert "1 threads on each of 2 ranks (DDP, 4 sequences a rank and step)" in ddp, ddp
    assert len(re.findall(r"^step +1/10 \| loss", ddp, re.M)) == 1, ddp
    assert ddp.count("--- sample") == 1 and ddp.count("GPT of 30,176 parameters") == 1, ddp

    # the logged losses (the global batch's) and the validation losses are the single process's
    one_losses, ddp_losses = step_losses(single), step_losses(ddp)
    assert sorted(ddp_losses) == list(range(1, 11)) and sorted(one_losses) == list(range(1, 11)), ddp
    for step in one_losses:  # printed to 4 decimals
        assert abs(ddp_losses[step] - one_losses[step]) <= 1.01e-4, (step, ddp_losses[step], one_losses[step])
    a = json.loads((tmp_path / "one" / "training_state.json").read_text())
    b = json.loads((tmp_path / "ddp" / "training_state.json").read_text())
    assert a["step"] == b["step"] == 10 and a["data_position"] == b["data_position"] == 80
    assert [s for s, _ in a["val_losses"]] == [s for s, _ in b["val_losses"]] == [5, 10]
    for (_, x), (_, y) in zip(a["val_losses"], b["val_losses"]):
        assert abs(x - y) <= 1e-5 * abs(x), (x, y)

    # the final parameters and AdamW state are the single process's; the directory is the inner
    # module's (no "module." prefix), which GPT.from_pretrained loads
    assert_same_tensors(tmp_path / "one", tmp_path / "ddp", "model.safetensors", 1e-5)
    assert_same_tensors(tmp_path / "one", tmp_path / "ddp", "training_state.safetensors", 1e-5)
    model = kael.GPT.from_pretrained(tmp_path / "ddp")
    assert model.config.n_embd == 32 and model.config.vocab_size == 512
    assert not any(k.startswith("module.") for k in model.state_dict())

    # a DDP run stopped halfway and resumed under DDP ends where the whole run did
    first, _ = run_ddp(2, *common, "--stop-at", "4", "--out", str(tmp_path / "split"))
    assert first.count("stopped at step 4/10") == 1, first
    second, _ = run_ddp(2, "--resume", "--out", str(tmp_path / "split"))
    assert second.count("resuming") == 1 and "at step 4/10" in second, second
    resumed = {**step_losses(first), **step_losses(second)}
    assert sorted(resumed) == list(range(1, 11)), first + second
    for step in one_losses:
        assert abs(resumed[step] - one_losses[step]) <= 1.01e-4, (step, resumed[step], one_losses[step])
    assert_same_tensors(tmp_path / "one", tmp_path / "split", "model.safetensors", 1e-5)


def test_ddp_batch_size_must_divide_among_the_ranks(monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(SystemExit) as info:
        gpt_train.parse_args(["--ddp", "--batch-size", "8"])
    assert info.value.code == 2
    assert "--batch-size (8) must be divisible by the number of ranks (3) with --ddp" in capsys.readouterr().err
    assert gpt_train.parse_args(["--ddp", "--batch-size", "9"]).world_size == 3
    assert gpt_train.batch_samples(3, 12, rank=2, world_size=3) == (32, 4)
