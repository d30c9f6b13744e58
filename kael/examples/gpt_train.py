"""Train a small GPT on Shakespeare with a BPE tokenizer of its own, with kael alone.

    python -m kael.examples.gpt_train                       # about 2 minutes on 2 idle CPU cores
    python -m kael.examples.gpt_train --steps 200           # a shorter run
    python -m kael.examples.gpt_train --resume              # continue the run saved in --out
    python -m kael.examples.gpt_train --help
    mpirun -np 4 python -m kael.examples.gpt_train --ddp    # data-parallel on 4 processes (as root:
                                                            # mpirun --allow-run-as-root --oversubscribe)
    python -m kael.distributed.run --nproc 4 -m kael.examples.gpt_train --ddp   # the same, torchrun-style

The model is kael.GPT (GPT-2's architecture, Hugging Face's parameter names) at a small size,
trained with AdamW on next-token prediction over the bundled corpus kael/data/tinyshakespeare.txt
(1,115,394 characters of Shakespeare, public domain, as distributed in data/tinyshakespeare/input.txt
of the char-rnn repository). The first 90% of the text is for training, the rest for validation.

The tokenizer is byte-level BPE trained with kael.BpeTokenizer.train on the training split only
(--vocab-size 2048 by default, <|endoftext|> as its last id), not GPT-2's 50,257 ranks: those are
not available offline, and on a corpus of a million characters a model this small cannot learn
50,257 embeddings (most GPT-2 tokens never occur in it) while the embedding and the tied head
would take most of the compute. 2,048 tokens cover the corpus at about 2.9 characters a token
and train in a fraction of a second (docs/decisions/gpt-training.md). Losses are therefore in
nats per token of this tokenizer and compare with the unigram baseline printed beside them (the
cross-entropy of the validation tokens under the training split's token frequencies), not with
the character-level demo's nats per character.

Schedule and optimizer as nanoGPT: AdamW with betas (0.9, 0.95) and weight decay on the 2-D
weights only (matrices and embeddings; not biases or LayerNorm), a learning rate rising linearly
over --warmup steps and then falling along a cosine to a floor of a tenth of --lr at --steps,
gradients clipped to norm 1.

The output directory (--out) holds what GPT.save_pretrained writes (config.json and
model.safetensors, Hugging Face's layout: kael.GPT.from_pretrained(out) loads it), the tokenizer
(tokenizer.tiktoken as BpeTokenizer.save writes it, with its special tokens beside it), the AdamW
state (training_state.safetensors) and training_state.json (step, data position, random state,
the run's arguments). It is rewritten at every evaluation and at the end. --resume continues the
run from there with the same schedule and data order, so that N steps, or N/2 steps and a
resumed run to N, give the same losses and weights; --stop-at ends a run early (Ctrl-C does too,
after the step in progress) with a checkpoint to resume from.

--ddp trains data-parallel with kael.distributed (MPI) and kael.nn.parallel.DistributedDataParallel,
one process per rank, started by mpirun or kael.distributed.run (docs/distributed.md). --batch-size
stays the global batch and must be divisible by the number of ranks: rank r of w trains on its
batch_size / w sequences of each step's global batch (batch_samples), DDP averages the gradients,
and each step's logged loss is the mean over the ranks, so w ranks train as one process on the
whole batch does (the same losses and weights up to the order of float32 sums; with --dropout
every rank draws the same masks, each for its own sequences, so that run differs from a single
process but still resumes exactly). Rank 0 alone trains the tokenizer (or reads the cached one)
while the others wait at a barrier and then read it; rank 0 alone prints, evaluates, writes the
checkpoints (the inner model's state, no "module." prefix, which GPT.from_pretrained loads) and
samples, the others waiting at a barrier after each evaluation and checkpoint. --resume works as
without --ddp (every rank reads the checkpoint; its world size need not be the run's). A SIGINT
that reaches any rank stops every rank after the same step, with a checkpoint (the ranks agree on
it each step); Ctrl-C on mpirun itself ends the job as Open MPI does, leaving the checkpoint of
the last evaluation to resume from.
"""
import argparse
import hashlib
import json
import math
import os
import shutil
import signal
import sys
import time
from collections import Counter

import kael
import kael.nn as nn
import kael.optim as optim

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "tinyshakespeare.txt")
SPECIAL_TOKENS = ["<|endoftext|>"]

TOKENIZER_FILE = "tokenizer.tiktoken"
STATE_FILE = "training_state.safetensors"
STATE_JSON = "training_state.json"
FORMAT_VERSION = 1

# The flags that define a run: a resumed run takes them from its checkpoint (giving one with
# another value is an error), a new run from here.
RUN_DEFAULTS = {
    "steps": 1000, "batch_size": 16, "block_size": 128, "n_layer": 4, "n_head": 4, "n_embd": 128,
    "lr": 2e-3, "warmup": None, "seed": 1337, "vocab_size": 2048, "dropout": 0.0, "weight_decay": 0.1,
    "grad_clip": 1.0, "corpus": CORPUS,
}
# The flags of what a run reports: a resumed run keeps its own unless given again.
SESSION_DEFAULTS = {"eval_every": 250, "log_every": 50, "sample_tokens": 200, "prompt": "ROMEO:",
                    "temperature": 0.8, "top_k": None}


# ---------------------------------------------------------------- tokenizer and data


def corpus_fingerprint(text, vocab_size):
    """What a cached tokenizer must match: the corpus's SHA-256 and the vocabulary size."""
    return {"corpus_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "vocab_size": vocab_size,
            "special_tokens": SPECIAL_TOKENS}


def load_or_train_tokenizer(out, train_text, fingerprint, saved_fingerprint):
    """(tokenizer, seconds or None when cached): the tokenizer saved in out when the run recorded
    there was trained on the same text with the same vocabulary size, else BPE trained on
    train_text and saved to out/tokenizer.tiktoken."""
    path = os.path.join(out, TOKENIZER_FILE)
    if saved_fingerprint == fingerprint and os.path.exists(path):
        return kael.BpeTokenizer.from_tiktoken(path), None
    start = time.perf_counter()
    tokenizer = kael.BpeTokenizer.train(train_text, fingerprint["vocab_size"], special_tokens=SPECIAL_TOKENS)
    seconds = time.perf_counter() - start
    os.makedirs(out, exist_ok=True)
    tokenizer.save(path)
    return tokenizer, seconds


def windows(tokens, starts, block_size):
    """Inputs tokens[s : s + block_size] and targets tokens[s + 1 : s + block_size + 1] for each
    start s of the int64 tensor starts, as two (len(starts), block_size) tensors."""
    positions = (starts.reshape(-1, 1) + kael.arange(block_size)).reshape(-1)
    x = tokens.index_select(0, positions).reshape(-1, block_size)
    y = tokens.index_select(0, positions + 1).reshape(-1, block_size)
    return x, y


class WindowOrder:
    """The order in which training windows are read: a pure function of the seed and a sample's
    position in the run, so a resumed run needs only its step to read on as before.

    Epoch e is a permutation of the training split's non-overlapping windows of block_size + 1
    tokens, shifted by an offset in [0, block_size) drawn for it (so the boundaries move from
    epoch to epoch); both come from a generator seeded with (seed, e). Sample p of the run is
    window p mod n of epoch p // n. Step s (from 1) reads samples (s - 1) * batch_size onwards.
    """

    def __init__(self, n_tokens, block_size, seed):
        self.block_size = block_size
        self.seed = seed
        # room for the largest offset: offset + windows * block_size + 1 <= n_tokens
        self.windows = (n_tokens - 1) // block_size - 1
        if self.windows < 1:
            raise ValueError(f"WindowOrder: {n_tokens} training tokens hold no window of {block_size + 1}")
        self._epoch = None

    def _order(self, epoch):
        if self._epoch is None or self._epoch[0] != epoch:
            generator = kael.Generator()
            generator.manual_seed(self.seed * 1_000_003 + epoch)
            offset = int(kael.randint(0, self.block_size, (1,), generator=generator).item())
            permutation = kael.randperm(self.windows, generator=generator).tolist()
            self._epoch = (epoch, offset, permutation)
        return self._epoch[1], self._epoch[2]

    def starts(self, first, count):
        """The start tokens of samples first .. first + count - 1, as an int64 tensor."""
        out = []
        for position in range(first, first + count):
            epoch, index = divmod(position, self.windows)
            offset, permutation = self._order(epoch)
            out.append(offset + permutation[index] * self.block_size)
        return kael.tensor(out, dtype=kael.int64)


def batch_samples(step, batch_size, rank=0, world_size=1):
    """(first sample, count) that rank (of world_size) reads at step (from 1); batch_size is the
    global batch, a multiple of world_size. The global batch of step s is samples
    (s - 1) * batch_size onwards, whatever the number of ranks; rank r reads its slice r of
    batch_size / world_size of it, in the same order on every run."""
    share = batch_size // world_size
    return (step - 1) * batch_size + rank * share, share


def unigram_loss(train_tokens, targets, vocab_size):
    """Cross-entropy (nats per token) of targets under the training tokens' frequencies
    (add-one smoothed over the vocabulary)."""
    counts = Counter(train_tokens.tolist())
    total = train_tokens.numel() + vocab_size
    return -sum(n * math.log((counts.get(t, 0) + 1) / total) for t, n in Counter(targets.tolist()).items()) \
        / targets.numel()


def validation_windows(val_tokens, block_size):
    """The starts of the validation split's non-overlapping windows (a tail shorter than a window
    is left out)."""
    count = (val_tokens.numel() - 1) // block_size
    return kael.arange(count, dtype=kael.int64) * block_size


def evaluate(model, val_tokens, block_size, batch_size):
    """Mean cross-entropy (nats per token) of the model over every validation window: the same
    tokens in the same batches every time, and no random numbers drawn."""
    starts = validation_windows(val_tokens, block_size)
    was_training = model.training
    model.eval()
    total = 0.0
    with kael.no_grad():
        for first in range(0, starts.numel(), batch_size):
            x, y = windows(val_tokens, starts[first:first + batch_size], block_size)
            _, loss = model(x, targets=y)
            total += loss.item() * x.size(0)
    model.train(was_training)
    return total / starts.numel()


# ---------------------------------------------------------------- schedule and optimizer


def learning_rate(step, args):
    """The learning rate of step (from 1): linear warmup to args.lr over args.warmup steps, then a
    cosine down to args.lr / 10 at args.steps."""
    floor = args.lr / 10
    if step <= args.warmup:
        return args.lr * step / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return floor + (args.lr - floor) * (1 + math.cos(math.pi * min(1.0, progress))) / 2


def make_optimizer(model, args):
    """AdamW with weight decay on the 2-D parameters (matrices and embeddings) only, as nanoGPT."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                        {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))


# ---------------------------------------------------------------- checkpoints


def optimizer_tensors(optimizer, names):
    """The optimizer's state_dict as safetensors content: ({"<param>.<buffer>": tensor},
    {"param_groups": json, "param_steps": json}), parameters by their model names (names maps
    id(param) to it) rather than by position."""
    state = optimizer.state_dict()
    by_index = [names[id(p)] for group in optimizer.param_groups for p in group["params"]]
    tensors, steps = {}, {}
    for index, entry in state["state"].items():
        for key, value in entry.items():
            if isinstance(value, kael.Tensor):
                tensors[f"{by_index[index]}.{key}"] = value.contiguous()
            else:
                steps.setdefault(by_index[index], {})[key] = value
    groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [by_index[i] for i in g["params"]]}
              for g in state["param_groups"]]
    return tensors, {"param_groups": json.dumps(groups), "param_steps": json.dumps(steps)}


def optimizer_state_dict(tensors, metadata, optimizer, names):
    """optimizer_tensors' output back into a state_dict for optimizer.load_state_dict; ValueError
    when it names parameters the model does not have."""
    index_of = {names[id(p)]: i for i, p in enumerate(p for g in optimizer.param_groups for p in g["params"])}
    steps = json.loads(metadata["param_steps"])
    state = {}
    for key, value in tensors.items():
        name, _, buffer = key.rpartition(".")
        if name not in index_of:
            raise ValueError(f"{STATE_FILE}: state for {name!r}, which the model does not have")
        state.setdefault(index_of[name], dict(steps.get(name, {})))[buffer] = value
    groups = []
    for group in json.loads(metadata["param_groups"]):
        unknown = [n for n in group["params"] if n not in index_of]
        if unknown:
            raise ValueError(f"{STATE_FILE}: parameter group names {unknown[0]!r}, which the model does not have")
        group["params"] = [index_of[n] for n in group["params"]]
        if "betas" in group:
            group["betas"] = tuple(group["betas"])
        groups.append(group)
    return {"state": state, "param_groups": groups}


def save_checkpoint(out, model, optimizer, names, run_state):
    """Writes the model (save_pretrained), the AdamW state and run_state (JSON) into out.

    Everything is written into out/.checkpoint first and then moved over the previous files, the
    optimizer's state first and the JSON last, both carrying the step: a checkpoint cut short
    leaves them disagreeing, which load_run_state reports.
    """
    staging = os.path.join(out, ".checkpoint")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tensors, metadata = optimizer_tensors(optimizer, names)
    metadata["step"] = str(run_state["step"])
    kael.save_safetensors(tensors, os.path.join(staging, STATE_FILE), metadata)
    with open(os.path.join(staging, STATE_JSON), "w", encoding="utf-8") as f:
        json.dump(run_state, f, separators=(",", ":"))
        f.write("\n")
    model_files = sorted(set(os.listdir(staging)) - {STATE_FILE, STATE_JSON})
    for name in [STATE_FILE, *model_files, STATE_JSON]:
        os.replace(os.path.join(staging, name), os.path.join(out, name))
    os.rmdir(staging)


def read_run_state(out):
    """The JSON of the run saved in out, or None when there is none."""
    path = os.path.join(out, STATE_JSON)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_training_state(out, run_state, optimizer, names):
    """Restores the optimizer's state and the default generator's from out."""
    path = os.path.join(out, STATE_FILE)
    metadata = kael.read_safetensors_metadata(path)
    if metadata.get("step") != str(run_state["step"]):
        raise ValueError(f"{out}: {STATE_FILE} is of step {metadata.get('step')} but {STATE_JSON} of step "
                         f"{run_state['step']}: the checkpoint was interrupted while being written")
    optimizer.load_state_dict(optimizer_state_dict(kael.load_safetensors(path), metadata, optimizer, names))
    kael.set_rng_state(kael.tensor(run_state["rng_state"], dtype=kael.uint8))


# ---------------------------------------------------------------- progress


def format_duration(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """A progress line every `every` steps (and on the first and last): step, the step's loss, the
    learning rate, tokens per second and the time left, both from the training steps since the
    previous line."""

    def __init__(self, total, tokens_per_step, every, stream):
        self.total = total
        self.tokens_per_step = tokens_per_step
        self.every = every
        self.stream = stream
        self.seconds = 0.0
        self.steps = 0

    def update(self, step, loss, lr, seconds, first, last):
        self.seconds += seconds
        self.steps += 1
        if step == first or step % self.every == 0 or step == last:
            per_step = self.seconds / self.steps
            print(f"step {step:5d}/{self.total} | loss {loss:.4f} | lr {lr:.2e} | "
                  f"{self.tokens_per_step / per_step:7,.0f} tokens/s | ETA {format_duration(per_step * (last - step))}",
                  file=self.stream, flush=True)
            self.seconds = 0.0
            self.steps = 0


class StopRequest:
    """Turns Ctrl-C into a request to stop after the step in progress (a second one interrupts)."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: no handler
            self._previous = None
        return self

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


# ---------------------------------------------------------------- arguments


def parse_args(argv=None):
    d, s = RUN_DEFAULTS, SESSION_DEFAULTS
    parser = argparse.ArgumentParser(
        prog="python -m kael.examples.gpt_train",
        description="Train a small GPT (kael.GPT) on the bundled Shakespeare corpus with a BPE tokenizer trained on "
                    "its training split; report the validation loss against a unigram baseline, save a checkpoint "
                    "that kael.GPT.from_pretrained loads, and print a sampled passage. The flags marked (run) "
                    "define a run: --resume takes them from the checkpoint.")
    add = parser.add_argument
    add("--steps", type=int, help=f"(run) training steps; the schedule ends here (default {d['steps']})")
    add("--batch-size", type=int, help=f"(run) sequences per step (default {d['batch_size']})")
    add("--block-size", type=int, help=f"(run) tokens of context (default {d['block_size']})")
    add("--n-layer", type=int, help=f"(run) transformer blocks (default {d['n_layer']})")
    add("--n-head", type=int, help=f"(run) attention heads (default {d['n_head']})")
    add("--n-embd", type=int, help=f"(run) model width, a multiple of --n-head (default {d['n_embd']})")
    add("--lr", type=float, help=f"(run) peak learning rate; the cosine ends at a tenth of it (default {d['lr']:g})")
    add("--warmup", type=int, help="(run) steps of linear warmup (default: a tenth of --steps, at most 100)")
    add("--seed", type=int, help=f"(run) seed of the initialisation, data order and sample (default {d['seed']})")
    add("--vocab-size", type=int, help=f"(run) tokens of the trained BPE vocabulary (default {d['vocab_size']})")
    add("--dropout", type=float, help=f"(run) dropout probability (default {d['dropout']:g})")
    add("--weight-decay", type=float, help=f"(run) AdamW weight decay of 2-D weights (default {d['weight_decay']:g})")
    add("--grad-clip", type=float, help=f"(run) gradient norm clip, 0 for none (default {d['grad_clip']:g})")
    add("--corpus", help="(run) text file to train on (default: the bundled Shakespeare)")
    add("--out", default="gpt-shakespeare", help="output directory: model, tokenizer, training state "
        "(default gpt-shakespeare)")
    add("--resume", action="store_true", help="continue the run saved in --out, with its settings")
    add("--stop-at", type=int, help="stop after this step with a checkpoint, to --resume later (default: --steps)")
    add("--eval-every", type=int, help=f"steps between validation losses and checkpoints (default {s['eval_every']})")
    add("--log-every", type=int, help=f"steps between progress lines (default {s['log_every']})")
    add("--ddp", action="store_true", help="data-parallel training over the ranks of mpirun (or python -m "
        "kael.distributed.run) with DistributedDataParallel; --batch-size is the global batch, split evenly")
    add("--threads", type=int, help="threads for kael's kernels (default: kael.get_num_threads())")
    add("--sample-tokens", type=int, help=f"tokens to sample at the end, 0 for none (default {s['sample_tokens']})")
    add("--prompt", help=f"start of the sampled passage (default {s['prompt']!r})")
    add("--temperature", type=float, help=f"sampling temperature, 0 for greedy (default {s['temperature']:g})")
    add("--top-k", type=int, help="sample from the k most likely tokens only (default: all)")
    args = parser.parse_args(argv)

    saved = None
    if args.resume:
        saved = read_run_state(args.out)
        if saved is None:
            parser.error(f"--resume: {args.out} holds no run ({STATE_JSON} is missing)")
        if saved.get("format") != FORMAT_VERSION:
            parser.error(f"--resume: {args.out} holds a checkpoint of format {saved.get('format')}, "
                         f"this job reads {FORMAT_VERSION}")
    for key, default in RUN_DEFAULTS.items():
        given = getattr(args, key)
        if saved is None:
            setattr(args, key, default if given is None else given)
        else:
            if given is not None and given != saved["args"][key]:
                parser.error(f"--resume: --{key.replace('_', '-')} {given} differs from the run's "
                             f"{saved['args'][key]}; a resumed run keeps its settings")
            setattr(args, key, saved["args"][key])
    if args.warmup is None:
        args.warmup = min(100, args.steps // 10)
    for key, default in SESSION_DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, saved["session"][key] if saved is not None else default)
    checks = [("steps", 1), ("batch_size", 1), ("block_size", 1), ("n_layer", 1), ("n_head", 1), ("n_embd", 1),
              ("warmup", 0), ("vocab_size", 256 + len(SPECIAL_TOKENS)), ("eval_every", 1), ("log_every", 1),
              ("sample_tokens", 0)]
    for key, least in checks:
        if getattr(args, key) < least:
            parser.error(f"--{key.replace('_', '-')} must be at least {least}, got {getattr(args, key)}")
    if args.n_embd % args.n_head:
        parser.error(f"--n-embd ({args.n_embd}) must be a multiple of --n-head ({args.n_head})")
    if args.warmup >= args.steps:
        parser.error(f"--warmup ({args.warmup}) must be less than --steps ({args.steps})")
    if not args.lr > 0:
        parser.error(f"--lr must be positive, got {args.lr}")
    if not 0 <= args.dropout < 1:
        parser.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.weight_decay < 0 or args.grad_clip < 0:
        parser.error("--weight-decay and --grad-clip must be at least 0")
    if args.temperature < 0:
        parser.error(f"--temperature must be at least 0, got {args.temperature}")
    if args.top_k is not None and args.top_k < 1:
        parser.error(f"--top-k must be at least 1, got {args.top_k}")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    args.world_size = 1
    if args.ddp:
        import kael.distributed  # sets WORLD_SIZE from mpirun's environment
        args.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if args.batch_size % args.world_size:
            parser.error(f"--batch-size ({args.batch_size}) must be divisible by the number of ranks "
                         f"({args.world_size}) with --ddp: it is the global batch")
    start = saved["step"] if saved else 0
    if args.stop_at is None:
        args.stop_at = args.steps
    if not start < args.stop_at <= args.steps:
        parser.error(f"--stop-at must be in ({start}, {args.steps}], got {args.stop_at}"
                     + (f" (the run is at step {start})" if saved else ""))
    args.saved = saved
    return args


def run_args(args):
    """The arguments that define the run and those of its reports, as saved in its checkpoint."""
    return ({key: getattr(args, key) for key in RUN_DEFAULTS}, {key: getattr(args, key) for key in SESSION_DEFAULTS})


# ---------------------------------------------------------------- the job


class _Discard:
    """The stream of the ranks other than 0: what they would print goes nowhere."""

    def write(self, text):
        return len(text)

    def flush(self):
        pass


def main(argv=None, stream=sys.stdout):
    """Runs the job; returns a dict with the losses (per step, validation, unigram), the sample and
    whether Ctrl-C stopped it."""
    args = parse_args(argv)
    if not args.ddp:
        return _main(args, stream, None)
    import kael.distributed as dist
    dist.init_process_group(backend="mpi")
    try:
        if dist.get_world_size() != args.world_size:
            raise SystemExit(f"--ddp: WORLD_SIZE is {args.world_size} but the process group has "
                             f"{dist.get_world_size()} ranks")
        result = _main(args, stream if dist.get_rank() == 0 else _Discard(), dist)
        dist.barrier()  # the others wait for rank 0's report and sample
        return result
    finally:
        dist.destroy_process_group()


def _prepare_data(args, lead, barrier):
    """The corpus split 90/10, the BPE tokenizer (trained on the training split and cached in the
    output directory; with --ddp rank 0 trains or reads it while the others wait, then they read
    what it saved) and both splits as token tensors; also the tokenizer's fingerprint and the run
    state the directory held."""
    saved = args.saved
    with open(args.corpus, encoding="utf-8") as f:
        text = f.read()
    split = int(0.9 * len(text))
    train_text, val_text = text[:split], text[split:]

    fingerprint = corpus_fingerprint(train_text, args.vocab_size)
    previous = saved if saved is not None else read_run_state(args.out)
    if lead:
        tokenizer, tokenizer_seconds = load_or_train_tokenizer(
            args.out, train_text, fingerprint, previous.get("tokenizer") if previous else None)
        if saved is not None and tokenizer_seconds is not None:
            raise SystemExit(f"--resume: {args.out}/{TOKENIZER_FILE} is missing or not the run's tokenizer")
        if saved is None and previous is not None:
            # the directory holds no resumable run until this one's first checkpoint
            os.remove(os.path.join(args.out, STATE_JSON))
    barrier()
    if not lead:
        tokenizer, tokenizer_seconds = kael.BpeTokenizer.from_tiktoken(os.path.join(args.out, TOKENIZER_FILE)), None
    train_tokens = kael.tensor(tokenizer.encode_ordinary(train_text), dtype=kael.int64)
    val_tokens = kael.tensor(tokenizer.encode_ordinary(val_text), dtype=kael.int64)
    if validation_windows(val_tokens, args.block_size).numel() == 0:
        raise SystemExit(f"the validation split ({val_tokens.numel()} tokens) holds no window of {args.block_size + 1}")
    return tokenizer, tokenizer_seconds, fingerprint, previous, train_tokens, val_tokens


def _report_and_sample(args, model, tokenizer, train_tokens, val_tokens, history, train_seconds, result, stream):
    """Rank 0's end of a finished run: the validation loss beside the unigram baseline, where the
    checkpoint is, and a sampled passage."""
    val_loss = history[-1][1]
    targets = val_tokens[1:validation_windows(val_tokens, args.block_size).numel() * args.block_size + 1]
    baseline = unigram_loss(train_tokens, targets, len(tokenizer))
    print(f"trained {args.steps} steps in {train_seconds:.1f}s; validation loss {val_loss:.4f} nats/token "
          f"(unigram baseline {baseline:.4f}, {targets.numel():,} tokens)", file=stream)
    print(f"checkpoint: {args.out} (kael.GPT.from_pretrained, {TOKENIZER_FILE})", file=stream)
    result.update(val_loss=val_loss, unigram_loss=baseline)
    if args.sample_tokens > 0:
        prompt = tokenizer.encode_ordinary(args.prompt) or [tokenizer.encode_ordinary("\n")[0]]
        model.eval()
        with kael.no_grad():
            out = model.generate(kael.tensor([prompt], dtype=kael.int64), args.sample_tokens,
                                 temperature=args.temperature, top_k=args.top_k, seed=args.seed)
        passage = tokenizer.decode(out[0].tolist())
        print(f"--- sample (temperature {args.temperature:g}, seed {args.seed}) ---\n{passage}\n---", file=stream)
        result["sample"] = passage
    return result


def _build_model(args, saved, tokenizer, dist):
    """The model and its optimizer, new from the seed or as the checkpoint left them; with --ddp,
    `trained` is DistributedDataParallel around the model (rank 0's parameters broadcast,
    gradients averaged), and `model` stays the inner module, which is evaluated and saved."""
    if saved is None:
        kael.manual_seed(args.seed)
        config = kael.GPTConfig(vocab_size=len(tokenizer), block_size=args.block_size, n_layer=args.n_layer,
                                n_head=args.n_head, n_embd=args.n_embd, dropout=args.dropout, bias=True)
        model = kael.GPT(config)
    else:
        model = kael.GPT.from_pretrained(args.out)
        if model.config.vocab_size != len(tokenizer):
            raise SystemExit(f"--resume: the model in {args.out} has {model.config.vocab_size} tokens, its tokenizer "
                             f"{len(tokenizer)}")
    model.train()
    names = {id(p): n for n, p in model.named_parameters()}
    trained = model
    if dist is not None:
        from kael.nn.parallel import DistributedDataParallel
        trained = DistributedDataParallel(model)
    optimizer = make_optimizer(model, args)
    if saved is not None:
        load_training_state(args.out, saved, optimizer, names)
    return model, trained, optimizer, names


def _main(args, stream, dist):
    rank = dist.get_rank() if dist is not None else 0
    world_size = args.world_size
    lead = rank == 0

    def barrier():
        if dist is not None:
            dist.barrier()

    if args.threads is not None:
        kael.set_num_threads(args.threads)
    saved = args.saved
    tokenizer, tokenizer_seconds, fingerprint, previous, train_tokens, val_tokens = _prepare_data(args, lead, barrier)
    order = WindowOrder(train_tokens.numel(), args.block_size, args.seed)

    model, trained, optimizer, names = _build_model(args, saved, tokenizer, dist)
    start_step = saved["step"] if saved else 0
    history = saved["val_losses"] if saved else []
    train_seconds = saved["train_seconds"] if saved else 0.0

    params = sum(p.numel() for p in model.parameters())
    where = "cached" if tokenizer_seconds is None else f"trained in {tokenizer_seconds:.1f}s"
    print(f"kael {kael.__version__}: GPT of {params:,} parameters ({args.n_layer} layers, {args.n_head} heads, "
          f"width {args.n_embd}, context {args.block_size}); BPE vocabulary of {len(tokenizer):,} ({where}); "
          f"{train_tokens.numel():,} training / {val_tokens.numel():,} validation tokens; "
          f"{kael.get_num_threads()} threads" + (f" on each of {world_size} ranks (DDP, {args.batch_size // world_size} "
                                                  f"sequences a rank and step)" if dist is not None else ""),
          file=stream)
    if saved is not None:
        print(f"resuming {args.out} at step {start_step}/{args.steps}", file=stream)
    elif previous is not None:
        print(f"starting a new run in {args.out} (replacing the run saved there at step {previous['step']})",
              file=stream)

    run, session = run_args(args)

    def checkpoint(step):
        # rank 0 writes (every rank's parameters, optimizer and generator states are the same)
        if lead:
            run_state = {"format": FORMAT_VERSION, "step": step, "data_position": step * args.batch_size,
                         "rng_state": kael.get_rng_state().tolist(), "args": run, "session": session,
                         "tokenizer": fingerprint, "val_losses": history, "train_seconds": train_seconds}
            save_checkpoint(args.out, model, optimizer, names, run_state)

    parameters = list(model.parameters())
    progress = Progress(args.steps, args.batch_size * args.block_size, args.log_every, stream)
    losses = []
    stopped_at = args.stop_at
    with StopRequest() as stop:
        for step in range(start_step + 1, args.stop_at + 1):
            began = time.perf_counter()
            lr = learning_rate(step, args)
            for group in optimizer.param_groups:
                group["lr"] = lr
            first, count = batch_samples(step, args.batch_size, rank, world_size)
            x, y = windows(train_tokens, order.starts(first, count), args.block_size)
            _, loss = trained(x, targets=y)
            optimizer.zero_grad()
            loss.backward()
            if args.grad_clip > 0:
                nn.utils.clip_grad_norm_(parameters, args.grad_clip)
            optimizer.step()
            value = loss.item()
            if dist is not None:
                # the global batch's loss (the mean of the ranks' means over equal shares), and
                # whether Ctrl-C reached any rank, so that every rank stops after the same step
                agreed = kael.tensor([value, 1.0 if stop.requested else 0.0], dtype=kael.float64)
                dist.all_reduce(agreed)
                value = agreed[0].item() / world_size
                stop.requested = agreed[1].item() > 0
            seconds = time.perf_counter() - began
            train_seconds += seconds
            losses.append(value)
            progress.update(step, value, lr, seconds, start_step + 1, args.stop_at)
            if not math.isfinite(value):
                raise SystemExit(f"step {step}: the loss is {value}; try a smaller --lr")
            if step % args.eval_every == 0 or step == args.steps:
                if lead:
                    val_loss = evaluate(model, val_tokens, args.block_size, args.batch_size)
                    history.append([step, val_loss])
                    print(f"step {step:5d}/{args.steps} | validation loss {val_loss:.4f}", file=stream, flush=True)
                checkpoint(step)
                barrier()
            elif step == args.stop_at or stop.requested:
                checkpoint(step)
                barrier()
            if stop.requested:
                stopped_at = step
                break

    result = {"losses": losses, "val_losses": history, "seconds": train_seconds, "sample": "",
              "interrupted": stopped_at < args.stop_at}
    if not lead:  # rank 0 alone reports and samples; the others are done
        return result
    if stopped_at < args.steps:
        print(f"stopped at step {stopped_at}/{args.steps} after {train_seconds:.1f}s of training; checkpoint in "
              f"{args.out}: continue with --resume --out {args.out}", file=stream)
        return result

    return _report_and_sample(args, model, tokenizer, train_tokens, val_tokens, history, train_seconds, result,
                              stream)

if __name__ == "__main__":
    sys.exit(130 if main()["interrupted"] else 0)  # 130: stopped by Ctrl-C, as a shell reports SIGINT
