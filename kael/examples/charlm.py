"""Train a character-level transformer language model on Shakespeare, with kael alone.

    python -m kael.examples.charlm                  # 2 to 4 minutes on 2 CPU cores
    python -m kael.examples.charlm --steps 100      # a shorter run
    python -m kael.examples.charlm --help

The model is built from kael.nn (Embedding, TransformerEncoderLayer with a causal mask,
LayerNorm, Linear) and trained with kael.optim.AdamW on next-character prediction over the
bundled corpus kael/data/tinyshakespeare.txt (1,115,394 characters of Shakespeare, public
domain, as distributed in data/tinyshakespeare/input.txt of the char-rnn repository). The first
90% of the text is for training, the rest for validation. At the end it prints the validation
loss next to the unigram baseline (the cross-entropy of the validation characters under the
training set's character frequencies), saves a checkpoint and samples a passage.

The checkpoint is the model's state_dict as a safetensors file (Module.save, which calls
kael.save_safetensors), with the vocabulary and the model's sizes in the header's __metadata__.
"""
import argparse
import json
import math
import os
import sys
import time
from collections import Counter

import kael
import kael.nn as nn
import kael.nn.functional as F
import kael.optim as optim

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "tinyshakespeare.txt")


class CharTransformer(nn.Module):
    """A GPT-style decoder: token and position embeddings, pre-norm transformer layers with a
    causal mask, a final LayerNorm and a linear head over the vocabulary."""

    def __init__(self, vocab_size, d_model=128, n_layers=4, n_heads=4, context=128, dropout=0.0):
        super().__init__()
        self.context = context
        self.token = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(context, d_model)
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=4 * d_model, dropout=dropout,
                                       activation="gelu", batch_first=True, norm_first=True)
            for _ in range(n_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        causal = kael.ones(context, context, dtype=kael.bool).triu(1)
        self.register_buffer("causal_mask", causal, persistent=False)

    def forward(self, idx):
        length = idx.size(1)
        if length > self.context:
            raise ValueError(f"CharTransformer: sequence of {length} characters, the context is {self.context}")
        positions = kael.arange(length, device=idx.device)
        x = self.token(idx) + self.position(positions)
        mask = self.causal_mask[:length, :length]
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        return self.head(self.norm(x))


# ---------------------------------------------------------------- data


class CharData:
    """The corpus as int64 character ids, split 90/10 into training and validation text."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        ids = kael.tensor([self.index[c] for c in text], dtype=kael.int64)
        split = int(0.9 * len(text))
        self.train = ids[:split]
        self.val = ids[split:]
        self.train_text = text[:split]
        self.val_text = text[split:]

    def encode(self, text):
        return [self.index[c] for c in text if c in self.index]

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)

    def batch(self, split, batch_size, context, generator=None):
        """Random windows of context characters (inputs) and the same shifted by one (targets),
        gathered with one index_select each."""
        data = self.train if split == "train" else self.val
        starts = kael.randint(0, data.size(0) - context - 1, (batch_size, 1), generator=generator)
        positions = (starts + kael.arange(context)).reshape(-1)
        x = data.index_select(0, positions).reshape(batch_size, context)
        y = data.index_select(0, positions + 1).reshape(batch_size, context)
        return x, y

    def unigram_loss(self):
        """Cross-entropy (nats per character) of the validation text under the training text's
        character frequencies (add-one smoothed)."""
        counts = Counter(self.train_text)
        total = len(self.train_text) + len(self.chars)
        log_p = {c: math.log((counts.get(c, 0) + 1) / total) for c in self.chars}
        return -sum(log_p[c] for c in self.val_text) / len(self.val_text)


# ---------------------------------------------------------------- checkpoint (safetensors)


def save_checkpoint(path, model, metadata):
    """Writes the model's state_dict to path as a safetensors file (kael.save_safetensors, through
    Module.save), with metadata (a dict of str) in the header's __metadata__."""
    model.save(path, metadata={k: str(v) for k, v in metadata.items()})


def load_checkpoint(path):
    """(state_dict, metadata) read back from a checkpoint file."""
    return kael.load_safetensors(path), kael.read_safetensors_metadata(path)


# ---------------------------------------------------------------- training


def evaluate(model, data, batches, batch_size, context):
    """Mean validation loss over fixed batches (their own generator, so every call sees the same)."""
    generator = kael.Generator()
    generator.manual_seed(1234)
    model.eval()
    total = 0.0
    with kael.no_grad():
        for _ in range(batches):
            x, y = data.batch("val", batch_size, context, generator)
            logits = model(x.to(_device_of(model)))
            total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.to(_device_of(model)).reshape(-1)).item()
    model.train()
    return total / batches


def _device_of(model):
    return next(model.parameters()).device


def sample(model, data, prompt, length, temperature, generator=None):
    """length characters generated after prompt, sampled from softmax(logits / temperature)
    (the most likely character at temperature 0)."""
    model.eval()
    ids = data.encode(prompt) or [data.index.get("\n", 0)]
    device = _device_of(model)
    with kael.no_grad():
        for _ in range(length):
            window = kael.tensor([ids[-model.context:]], dtype=kael.int64).to(device)
            logits = model(window)[0, -1]
            if temperature <= 0:
                next_id = int(logits.argmax().item())
            else:
                probs = F.softmax(logits.to(dtype=kael.float64) / temperature, dim=-1)
                next_id = int(kael.multinomial(probs, 1, generator=generator).item())
            ids.append(next_id)
    model.train()
    return data.decode(ids)


class Progress:
    """A one-line progress bar on a terminal (a line every `every` steps otherwise)."""

    def __init__(self, total, stream=sys.stdout, every=50):
        self.total = total
        self.stream = stream
        self.tty = stream.isatty()
        self.every = every

    def update(self, step, loss, tokens_per_s, elapsed):
        done = step / self.total
        bar = "#" * int(24 * done) + "-" * (24 - int(24 * done))
        line = (f"step {step:5d}/{self.total} [{bar}] loss {loss:.3f}  {tokens_per_s:,.0f} tokens/s  "
                f"{elapsed:5.1f}s")
        if self.tty:
            self.stream.write("\r" + line)
            if step == self.total:
                self.stream.write("\n")
            self.stream.flush()
        elif step == 1 or step % self.every == 0 or step == self.total:
            self.stream.write(line + "\n")
            self.stream.flush()


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m kael.examples.charlm",
        description="Train a small character-level transformer language model on the bundled Shakespeare "
                    "corpus with kael, report its validation loss against a unigram baseline, save a checkpoint "
                    "and print a sampled passage.")
    parser.add_argument("--steps", type=int, default=2000,
                        help="training steps (batches); the default takes 2 to 4 minutes on 2 CPU cores")
    parser.add_argument("--device", default="cpu", help="device to train on: cpu (default) or cuda")
    parser.add_argument("--temperature", type=float, default=0.8,
                        help="sampling temperature of the printed passage (0: always the most likely character)")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per batch (default 16)")
    parser.add_argument("--context", type=int, default=128, help="characters of context (default 128)")
    parser.add_argument("--d-model", type=int, default=128, help="model width (default 128)")
    parser.add_argument("--layers", type=int, default=4, help="transformer layers (default 4)")
    parser.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate of AdamW (default 3e-3)")
    parser.add_argument("--seed", type=int, default=1337, help="random seed (default 1337)")
    parser.add_argument("--eval-batches", type=int, default=20, help="validation batches (default 20)")
    parser.add_argument("--sample-length", type=int, default=400, help="characters to sample (default 400)")
    parser.add_argument("--prompt", default="ROMEO:", help="start of the sampled passage")
    parser.add_argument("--checkpoint", default="charlm.safetensors",
                        help="where to save the trained weights (default charlm.safetensors; '' to skip)")
    parser.add_argument("--corpus", default=CORPUS, help="text file to train on (default: the bundled Shakespeare)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if args.temperature < 0:
        parser.error(f"--temperature must be at least 0, got {args.temperature}")
    return args


def main(argv=None, stream=sys.stdout):
    """Runs the demo; returns a dict with the losses (first, last, validation, unigram)."""
    args = parse_args(argv)
    kael.manual_seed(args.seed)
    with open(args.corpus, encoding="utf-8") as f:
        text = f.read()
    data = CharData(text)
    model = CharTransformer(len(data.chars), args.d_model, args.layers, args.heads, args.context).to(args.device)
    params = sum(p.numel() for p in model.parameters())
    print(f"kael {kael.__version__}: {params:,} parameters, {len(data.chars)} characters in the vocabulary, "
          f"{len(data.train_text):,} training / {len(data.val_text):,} validation characters, "
          f"{kael.get_num_threads()} threads, device {args.device}", file=stream)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.99))
    warmup = max(1, min(100, args.steps // 10))
    scheduler = optim.lr_scheduler.WarmupCosineLR(optimizer, warmup, args.steps + 1, eta_min=args.lr / 10)
    progress = Progress(args.steps, stream)
    tokens = args.batch_size * args.context
    losses = []
    smoothed = None
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = data.batch("train", args.batch_size, args.context)
        x, y = x.to(args.device), y.to(args.device)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        value = loss.item()
        losses.append(value)
        smoothed = value if smoothed is None else 0.9 * smoothed + 0.1 * value
        elapsed = time.perf_counter() - start
        progress.update(step, smoothed, tokens * step / elapsed, elapsed)
    train_time = time.perf_counter() - start
    val_loss = evaluate(model, data, args.eval_batches, args.batch_size, args.context)
    unigram = data.unigram_loss()
    print(f"trained {args.steps} steps in {train_time:.1f}s; validation loss {val_loss:.3f} nats/char "
          f"(unigram baseline {unigram:.3f})", file=stream)
    if args.checkpoint:
        metadata = {"vocabulary": json.dumps("".join(data.chars)), "d_model": args.d_model, "layers": args.layers,
                    "heads": args.heads, "context": args.context, "steps": args.steps}
        save_checkpoint(args.checkpoint, model, metadata)
        print(f"checkpoint: {args.checkpoint}", file=stream)
    passage = ""
    if args.sample_length > 0:
        generator = kael.Generator()
        generator.manual_seed(args.seed)
        passage = sample(model, data, args.prompt, args.sample_length, args.temperature, generator)
        print(f"--- sample (temperature {args.temperature}) ---\n{passage}\n---", file=stream)
    return {"first_loss": losses[0], "last_loss": sum(losses[-10:]) / len(losses[-10:]), "val_loss": val_loss,
            "unigram_loss": unigram, "losses": losses, "sample": passage, "seconds": train_time}


if __name__ == "__main__":
    main()
