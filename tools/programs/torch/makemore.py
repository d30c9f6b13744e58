"""A character-level model zoo in the manner of makemore: names in, more names out, with the model
picked by --type: a bigram table, an MLP over a context window (Bengio et al. 2003), an RNN and a
GRU written from their cells, and a small Transformer with a masked self-attention of its own.
AdamW, evaluation on a held-out split with torch.no_grad(), and sampling with torch.multinomial.

The names are synthetic (syllables drawn by a seeded NumPy generator) and the batches' indices come
from NumPy, so a run is the same in every library that runs this file.
"""
import argparse
import json
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


@dataclass
class ModelConfig:
    block_size: int = None
    vocab_size: int = None
    n_layer: int = 2
    n_embd: int = 32
    n_embd2: int = 32
    n_head: int = 4


class NewGELU(nn.Module):
    """The tanh approximation of GELU, written out."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.ModuleDict(dict(
            c_fc=nn.Linear(config.n_embd, 4 * config.n_embd),
            c_proj=nn.Linear(4 * config.n_embd, config.n_embd),
            act=NewGELU(),
        ))
        m = self.mlp
        self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlpf(self.ln_2(x))
        return x


class Transformer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.block_size = config.block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

    def get_block_size(self):
        return self.block_size

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


class RNNCell(nn.Module):
    """h' = tanh(W [x, h] + b)."""

    def __init__(self, config):
        super().__init__()
        self.xh_to_h = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)

    def forward(self, xt, hprev):
        return F.tanh(self.xh_to_h(torch.cat([xt, hprev], dim=1)))


class GRUCell(nn.Module):
    """The gated recurrent unit, gates computed from the concatenated input and state."""

    def __init__(self, config):
        super().__init__()
        self.xh_to_z = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
        self.xh_to_r = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
        self.xh_to_hbar = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)

    def forward(self, xt, hprev):
        xh = torch.cat([xt, hprev], dim=1)
        r = F.sigmoid(self.xh_to_r(xh))
        xhr = torch.cat([xt, r * hprev], dim=1)
        hbar = F.tanh(self.xh_to_hbar(xhr))
        z = F.sigmoid(self.xh_to_z(xh))
        return (1 - z) * hprev + z * hbar


class RNN(nn.Module):
    def __init__(self, config, cell_type):
        super().__init__()
        self.block_size = config.block_size
        self.vocab_size = config.vocab_size
        self.start = nn.Parameter(torch.zeros(1, config.n_embd2))  # the state before the first character
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.cell = RNNCell(config) if cell_type == 'rnn' else GRUCell(config)
        self.lm_head = nn.Linear(config.n_embd2, self.vocab_size)

    def get_block_size(self):
        return self.block_size

    def forward(self, idx, targets=None):
        b, t = idx.size()
        emb = self.wte(idx)
        hprev = self.start.expand((b, -1))
        hiddens = []
        for i in range(t):
            xt = emb[:, i, :]
            hprev = self.cell(xt, hprev)
            hiddens.append(hprev)
        logits = self.lm_head(torch.stack(hiddens, 1))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


class MLP(nn.Module):
    """Embeds the previous block_size characters (a special token past the start), concatenates
    them and predicts the next one with a hidden tanh layer."""

    def __init__(self, config):
        super().__init__()
        self.block_size = config.block_size
        self.vocab_size = config.vocab_size
        self.wte = nn.Embedding(config.vocab_size + 1, config.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(self.block_size * config.n_embd, config.n_embd2),
            nn.Tanh(),
            nn.Linear(config.n_embd2, self.vocab_size),
        )

    def get_block_size(self):
        return self.block_size

    def forward(self, idx, targets=None):
        embs = []
        for k in range(self.block_size):
            tok_emb = self.wte(idx)
            idx = torch.roll(idx, 1, 1)
            idx[:, 0] = self.vocab_size  # the blank token
            embs.append(tok_emb)
        x = torch.cat(embs, -1)
        logits = self.mlp(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


class Bigram(nn.Module):
    def __init__(self, config):
        super().__init__()
        n = config.vocab_size
        self.logits = nn.Parameter(torch.zeros((n, n)))

    def get_block_size(self):
        return 1

    def forward(self, idx, targets=None):
        logits = self.logits[idx]
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


class CharDataset(Dataset):
    def __init__(self, words, chars, max_word_length):
        self.words = words
        self.chars = chars
        self.max_word_length = max_word_length
        self.stoi = {ch: i + 1 for i, ch in enumerate(chars)}
        self.itos = {i: s for s, i in self.stoi.items()}

    def __len__(self):
        return len(self.words)

    def get_vocab_size(self):
        return len(self.chars) + 1  # and the token 0, start and end of a word

    def get_output_length(self):
        return self.max_word_length + 1

    def encode(self, word):
        return torch.tensor([self.stoi[w] for w in word], dtype=torch.long)

    def decode(self, ix):
        return ''.join(self.itos[i] for i in ix)

    def __getitem__(self, idx):
        ix = self.encode(self.words[idx])
        x = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        y = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        x[1:1 + len(ix)] = ix
        y[:len(ix)] = ix
        y[len(ix) + 1:] = -1  # no loss past the end of the word
        return x, y


def make_names(seed, n=600):
    rng = np.random.default_rng(seed)
    syllables = ["an", "bel", "cor", "da", "el", "fa", "gin", "ha", "is", "jo", "ka", "lu", "mi", "na", "or",
                 "pe", "ra", "sa", "ti", "vo", "wyn", "xe", "ya", "zu"]
    return sorted({"".join(syllables[i] for i in rng.integers(0, len(syllables), rng.integers(1, 4)))
                   for _ in range(n)})


def create_datasets(seed):
    words = make_names(seed)
    chars = sorted(set(''.join(words)))
    max_word_length = max(len(w) for w in words)
    order = np.random.default_rng(seed).permutation(len(words))
    test_set_size = min(100, int(len(words) * 0.1))
    train_words = [words[i] for i in order[:-test_set_size]]
    test_words = [words[i] for i in order[-test_set_size:]]
    print(f"{len(words)} words, {len(chars) + 1} tokens, longest {max_word_length}; "
          f"{len(train_words)} training and {len(test_words)} test words")
    return CharDataset(train_words, chars, max_word_length), CharDataset(test_words, chars, max_word_length)


class InfiniteDataLoader:
    """Batches forever, the indices drawn with replacement by a seeded NumPy generator."""

    def __init__(self, dataset, batch_size, seed):
        rng = np.random.default_rng(seed)
        sampler = (int(i) for i in iter(lambda: rng.integers(0, len(dataset)), None))
        self.train_loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=0)
        self.data_iter = iter(self.train_loader)

    def next(self):
        return next(self.data_iter)


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
    block_size = model.get_block_size()
    for _ in range(max_new_tokens):
        idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
        logits, _ = model(idx_cond)
        logits = logits[:, -1, :] / temperature
        if top_k is not None:
            v, _ = torch.topk(logits, top_k)
            logits[logits < v[:, [-1]]] = -float('Inf')
        probs = F.softmax(logits, dim=-1)
        if do_sample:
            idx_next = torch.multinomial(probs, num_samples=1)
        else:
            _, idx_next = torch.topk(probs, k=1, dim=-1)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx


@torch.inference_mode()
def evaluate(model, dataset, batch_size=50, max_batches=None):
    model.eval()
    loader = DataLoader(dataset, shuffle=False, batch_size=batch_size, num_workers=0)
    losses = []
    for i, batch in enumerate(loader):
        X, Y = batch
        logits, loss = model(X, Y)
        losses.append(loss.item())
        if max_batches is not None and i >= max_batches:
            break
    mean_loss = torch.tensor(losses).mean().item()
    model.train()
    return mean_loss


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument('--type', default='transformer', choices=['bigram', 'mlp', 'rnn', 'gru', 'transformer'])
    p.add_argument('--steps', type=int, default=300)
    p.add_argument('--seed', type=int, default=3407)
    p.add_argument('--threads', type=int, default=0)
    p.add_argument('--batch-size', type=int, default=32)
    p.add_argument('--learning-rate', type=float, default=5e-3)
    p.add_argument('--weight-decay', type=float, default=0.01)
    p.add_argument('--init', default='', help='start from these weights (.npz of a state_dict)')
    p.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    p.add_argument('--log', default='', help='write one JSON line per step (loss, seconds)')
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    log = open(args.log, 'w') if args.log else None

    train_dataset, test_dataset = create_datasets(args.seed)
    vocab_size = train_dataset.get_vocab_size()
    block_size = train_dataset.get_output_length()
    config = ModelConfig(vocab_size=vocab_size, block_size=block_size)
    if args.type == 'transformer':
        model = Transformer(config)
    elif args.type == 'bigram':
        model = Bigram(config)
    elif args.type == 'mlp':
        model = MLP(config)
    else:
        model = RNN(config, cell_type=args.type)
    if args.init:
        w = np.load(args.init)
        model.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    if args.save_init:
        np.savez(args.save_init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    model.to(device)
    print(f"model #params: {sum(p.numel() for p in model.parameters())}")

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay,
                                  betas=(0.9, 0.99), eps=1e-8)
    batch_loader = InfiniteDataLoader(train_dataset, batch_size=args.batch_size, seed=args.seed + 1)

    best_loss = None
    for step in range(args.steps):
        t0 = time.perf_counter()
        batch = batch_loader.next()
        X, Y = [t.to(device) for t in batch]
        logits, loss = model(X, Y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        lossf = loss.item()
        dt = time.perf_counter() - t0
        if log:
            log.write(json.dumps({'step': step, 'loss': lossf, 'time': dt}) + '\n')
        if step % 10 == 0:
            print(f"step {step} | loss {lossf:.4f} | step time {dt * 1000:.2f}ms")
        if step > 0 and (step % 10 == 0 or step == args.steps - 1):
            test_loss = evaluate(model, test_dataset, batch_size=50, max_batches=2)
            if log:
                log.write(json.dumps({'eval': f'test@{step}', 'loss': test_loss}) + '\n')
            if best_loss is None or test_loss < best_loss:
                best_loss = test_loss

    X_init = torch.zeros(5, 1, dtype=torch.long).to(device)
    X_samp = generate(model, X_init, train_dataset.get_output_length() - 1, top_k=None, do_sample=True).to('cpu')
    for i in range(X_samp.size(0)):
        row = X_samp[i, 1:].tolist()
        crop_index = row.index(0) if 0 in row else len(row)
        print(train_dataset.decode(row[:crop_index]))
    greedy = generate(model, X_init[:1], 8, do_sample=False)
    print("greedy:", train_dataset.decode([i for i in greedy[0, 1:].tolist() if i != 0]))
    if log:
        log.close()


if __name__ == '__main__':
    main()
