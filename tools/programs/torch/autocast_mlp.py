"""Mixed precision the way the PyTorch AMP recipe writes it: forward and loss under
torch.autocast (bfloat16 on the CPU), backward through a torch.amp.GradScaler (scale, unscale_ for
clipping, step, update), its state saved in the checkpoint beside the model's and the optimizer's,
and an evaluation under autocast and torch.no_grad().

The data are synthetic: 2-D spirals lifted to 64 features by a fixed random projection, from a
seeded NumPy generator.
"""
import argparse
import json
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def make_net(in_size, hidden, out_size, num_layers):
    layers = []
    for _ in range(num_layers):
        layers.append(nn.Linear(in_size, hidden))
        layers.append(nn.ReLU())
        in_size = hidden
    layers.append(nn.Linear(in_size, out_size))
    return nn.Sequential(*layers)


def spirals(n, seed, classes=4, features=64):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    t = rng.uniform(0.2, 1.0, n)
    angle = 2 * np.pi * labels / classes + 3.0 * t
    xy = np.stack([t * np.cos(angle), t * np.sin(angle)], 1) + 0.02 * rng.standard_normal((n, 2))
    projection = np.random.default_rng(1234).standard_normal((2, features))
    x = np.tanh(xy @ projection)
    return x.astype(np.float32), labels.astype(np.int64)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument('--steps', type=int, default=100)
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--threads', type=int, default=0)
    parser.add_argument('--init', default='', help='start from these weights (.npz of a state_dict)')
    parser.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    parser.add_argument('--log', default='', help='write one JSON line per step (loss, seconds)')
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    amp_dtype = torch.float16 if device == 'cuda' else torch.bfloat16
    log = open(args.log, 'w') if args.log else None

    x, y = spirals(args.batch_size * 10, args.seed)
    xt, yt = spirals(256, args.seed + 1)
    loader = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=args.batch_size)

    net = make_net(64, 128, 4, 3)
    if args.init:
        w = np.load(args.init)
        net.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    if args.save_init:
        np.savez(args.save_init, **{k: v.detach().cpu().numpy() for k, v in net.state_dict().items()})
    net = net.to(device)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler(device)

    step = 0
    while step < args.steps:
        net.train()
        for input, target in loader:
            if step >= args.steps:
                break
            t0 = time.perf_counter()
            input, target = input.to(device), target.to(device)
            with torch.autocast(device_type=device, dtype=amp_dtype):
                output = net(input)
                assert output.dtype == amp_dtype
                loss = loss_fn(output, target)
                assert loss.dtype == torch.float32  # cross_entropy autocasts to float32
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            lossf = loss.item()
            dt = time.perf_counter() - t0
            if log:
                log.write(json.dumps({'step': step, 'loss': lossf, 'time': dt}) + '\n')
            step += 1
        net.eval()
        with torch.no_grad(), torch.autocast(device_type=device, dtype=amp_dtype):
            out = net(torch.from_numpy(xt).to(device))
            val = loss_fn(out, torch.from_numpy(yt).to(device)).item()
            acc = (out.argmax(1) == torch.from_numpy(yt).to(device)).float().mean().item()
        print(f"step {step}: train loss {lossf:.4f}, val loss {val:.4f}, accuracy {acc:.3f}")
        if log:
            log.write(json.dumps({'eval': f'val@{step}', 'loss': val}) + '\n')

    checkpoint = {"model": net.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler.state_dict()}
    tmp = tempfile.TemporaryDirectory(prefix='amp_')  # removed at exit
    path = os.path.join(tmp.name, 'checkpoint.pt')
    torch.save(checkpoint, path)
    checkpoint = torch.load(path, map_location=device)
    net.load_state_dict(checkpoint["model"])
    opt.load_state_dict(checkpoint["optimizer"])
    scaler.load_state_dict(checkpoint["scaler"])
    if log:
        log.close()


if __name__ == '__main__':
    main()
