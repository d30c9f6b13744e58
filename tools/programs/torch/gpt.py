"""A GPT trainer in the manner of nanoGPT: a decoder-only Transformer on characters, attention by
F.scaled_dot_product_attention, AdamW with weight-decay groups, warmup + cosine learning rate,
gradient accumulation and clipping under a GradScaler, periodic evaluation, a checkpoint
(model + optimizer state + config) that the run reloads and resumes from, and sampling with top-k.

The text is synthetic (sentences of words drawn by a seeded NumPy generator) and batch offsets are
drawn from NumPy, so that a run is the same in every library that runs this file.
"""
import argparse
import inspect
import json
import math
import os
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F


class LayerNorm(nn.Module):
    """LayerNorm whose bias is optional (F.layer_norm takes none when bias=False)."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


@dataclass
class GPTConfig:
    block_size: int = 32
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def get_num_params(self, non_embedding=True):
        n_params = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n_params -= self.transformer.wpe.weight.numel()
        return n_params

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, f"sequence of {t} is longer than the block size {self.config.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])  # only the last position when generating
            loss = None
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {'params': decay_params, 'weight_decay': weight_decay},
            {'params': nodecay_params, 'weight_decay': 0.0},
        ]
        print(f"decayed tensors: {len(decay_params)} ({sum(p.numel() for p in decay_params):,} parameters), "
              f"not decayed: {len(nodecay_params)} ({sum(p.numel() for p in nodecay_params):,} parameters)")
        fused_available = 'fused' in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == 'cuda'
        extra_args = dict(fused=True) if use_fused else dict()
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('Inf')
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def make_text(seed, n_chars=20000):
    """Sentences of words from a small lexicon, generated by a seeded NumPy generator."""
    rng = np.random.default_rng(seed)
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "from", "home", "to",
             "see", "sun", "moon", "rose", "over", "hill", "quick", "brown", "fox", "jumps", "lazy"]
    out = []
    n = 0
    while n < n_chars:
        sentence = " ".join(words[i] for i in rng.integers(0, len(words), rng.integers(3, 9))).capitalize() + ".\n"
        out.append(sentence)
        n += len(sentence)
    return "".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument('--steps', type=int, default=200, help='optimizer steps (max_iters)')
    p.add_argument('--seed', type=int, default=1337)
    p.add_argument('--threads', type=int, default=0, help='torch.set_num_threads (0: leave as is)')
    p.add_argument('--dropout', type=float, default=0.1)
    p.add_argument('--batch-size', type=int, default=8)
    p.add_argument('--grad-accum', type=int, default=2)
    p.add_argument('--eval-interval', type=int, default=10)
    p.add_argument('--eval-iters', type=int, default=2)
    p.add_argument('--out-dir', default='')
    p.add_argument('--init', default='', help='start from these weights (.npz of a state_dict)')
    p.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    p.add_argument('--log', default='', help='write one JSON line per step (loss, seconds)')
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    device_type = 'cuda' if 'cuda' in device else 'cpu'
    dtype = 'float32'
    ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
    ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    log = open(args.log, 'w') if args.log else None

    text = make_text(args.seed)
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    data = np.array([stoi[c] for c in text], dtype=np.uint16)
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]
    batch_rng = np.random.default_rng(args.seed + 1)

    model_args = dict(n_layer=2, n_head=4, n_embd=64, block_size=32, bias=True, vocab_size=len(chars),
                      dropout=args.dropout)
    block_size = model_args['block_size']

    def get_batch(split):
        d = train_data if split == 'train' else val_data
        ix = batch_rng.integers(0, len(d) - block_size, args.batch_size)
        x = torch.from_numpy(np.stack([d[i:i + block_size].astype(np.int64) for i in ix]))
        y = torch.from_numpy(np.stack([d[i + 1:i + 1 + block_size].astype(np.int64) for i in ix]))
        return x.to(device), y.to(device)

    model = GPT(GPTConfig(**model_args))
    if args.init:
        w = np.load(args.init)
        model.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    if args.save_init:
        np.savez(args.save_init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    model.to(device)
    print(f"number of parameters: {model.get_num_params() / 1e6:.2f}M")

    learning_rate, min_lr, warmup_iters = 1e-3, 1e-4, max(1, args.steps // 10)
    lr_decay_iters = args.steps
    grad_clip = 1.0
    scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))
    optimizer = model.configure_optimizers(0.1, learning_rate, (0.9, 0.99), device_type)

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ['train', 'val']:
            losses = torch.zeros(args.eval_iters)
            for k in range(args.eval_iters):
                X, Y = get_batch(split)
                with ctx:
                    logits, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean().item()
        model.train()
        return out

    def train_step(it, model, optimizer):
        lr = get_lr(it)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        t0 = time.perf_counter()
        for micro_step in range(args.grad_accum):
            X, Y = get_batch('train')
            with ctx:
                logits, loss = model(X, Y)
                loss = loss / args.grad_accum
            scaler.scale(loss).backward()
        if grad_clip != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        lossf = loss.item() * args.grad_accum
        dt = time.perf_counter() - t0
        if log:
            log.write(json.dumps({'step': it, 'loss': lossf, 'time': dt}) + '\n')
        return lossf, dt

    tmp = None if args.out_dir else tempfile.TemporaryDirectory(prefix='gpt_')  # removed at exit
    out_dir = args.out_dir or tmp.name
    os.makedirs(out_dir, exist_ok=True)
    best_val_loss = 1e9
    model.train()
    for iter_num in range(args.steps):
        if iter_num % args.eval_interval == 0 and iter_num > 0:
            losses = estimate_loss()
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
            if log:
                log.write(json.dumps({'eval': f'val@{iter_num}', 'loss': losses['val']}) + '\n')
            if losses['val'] < best_val_loss:
                best_val_loss = losses['val']
        lossf, dt = train_step(iter_num, model, optimizer)
        if iter_num % 10 == 0:
            print(f"iter {iter_num}: loss {lossf:.4f}, time {dt * 1000:.2f}ms")

    checkpoint = {
        'model': model.state_dict(),
        'optimizer': optimizer.state_dict(),
        'model_args': model_args,
        'iter_num': args.steps,
        'best_val_loss': best_val_loss,
    }
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    print(f"saving checkpoint to {out_dir}")
    torch.save(checkpoint, ckpt_path)

    # resume, as init_from='resume' does: a new model and optimizer from the checkpoint
    checkpoint = torch.load(ckpt_path, map_location=device)
    model = GPT(GPTConfig(**checkpoint['model_args']))
    state_dict = checkpoint['model']
    unwanted_prefix = '_orig_mod.'
    for k, v in list(state_dict.items()):
        if k.startswith(unwanted_prefix):
            state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
    model.load_state_dict(state_dict)
    model.to(device)
    optimizer = model.configure_optimizers(0.1, learning_rate, (0.9, 0.99), device_type)
    optimizer.load_state_dict(checkpoint['optimizer'])
    iter_num = checkpoint['iter_num']
    checkpoint = None
    model.train()
    for it in range(iter_num, iter_num + 2):
        lossf, _ = train_step(it, model, optimizer)
        print(f"resumed iter {it}: loss {lossf:.4f}")
    losses = estimate_loss()
    if log:
        log.write(json.dumps({'eval': 'val@end', 'loss': losses['val']}) + '\n')

    model.eval()
    start_ids = [stoi[c] for c in "The "]
    x = torch.tensor(start_ids, dtype=torch.long, device=device)[None, ...]
    with torch.no_grad():
        with ctx:
            y = model.generate(x, 40, temperature=0.8, top_k=10)
    print(''.join(itos[i] for i in y[0].tolist()))
    if log:
        log.close()


if __name__ == '__main__':
    main()
