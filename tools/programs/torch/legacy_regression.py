"""Polynomial regression in the manner of pytorch/examples' regression, written in the older style
much code still carries: Variable wrappers, legacy tensor types (torch.FloatTensor,
torch.LongTensor), batches picked by index_select with a LongTensor, F.smooth_l1_loss, and a manual
SGD step on param.data with param.grad.data, until the loss is small.

The target polynomial and the samples come from a seeded NumPy generator.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd import Variable

POLY_DEGREE = 4


def make_features(x):
    """A matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def poly_desc(W, b):
    result = 'y = '
    for i, w in enumerate(W):
        result += '{:+.2f} x^{} '.format(w, i + 1)
    result += '{:+.2f}'.format(b[0])
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument('--steps', type=int, default=200)
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--threads', type=int, default=0)
    parser.add_argument('--init', default='', help='start from these weights (.npz of a state_dict)')
    parser.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    parser.add_argument('--log', default='', help='write one JSON line per step (loss, seconds)')
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    log = open(args.log, 'w') if args.log else None
    rng = np.random.default_rng(args.seed)

    W_target = torch.FloatTensor(rng.standard_normal(POLY_DEGREE).astype(np.float32) * 5).unsqueeze(1)
    b_target = torch.FloatTensor(rng.standard_normal(1).astype(np.float32) * 5)
    pool = torch.FloatTensor(rng.uniform(-1, 1, 4096).astype(np.float32))

    def f(x):
        return x.mm(W_target) + b_target[0]

    def get_batch(batch_size):
        idx = torch.LongTensor(rng.integers(0, pool.size(0), batch_size))
        x = make_features(pool.index_select(0, idx))
        return Variable(x), Variable(f(x))

    fc = torch.nn.Linear(W_target.size(0), 1)
    if args.init:
        w = np.load(args.init)
        fc.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    if args.save_init:
        np.savez(args.save_init, **{k: v.detach().cpu().numpy() for k, v in fc.state_dict().items()})

    for batch_idx in range(args.steps):
        t0 = time.perf_counter()
        batch_x, batch_y = get_batch(args.batch_size)
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad.data)
        dt = time.perf_counter() - t0
        if log:
            log.write(json.dumps({'step': batch_idx, 'loss': loss, 'time': dt}) + '\n')
        if loss < 1e-3:
            break
    print('Loss: {:.6f} after {} batches'.format(loss, batch_idx + 1))
    print('==> Learned function:\t' + poly_desc(fc.weight.view(-1).tolist(), fc.bias.tolist()))
    print('==> Actual function:\t' + poly_desc(W_target.view(-1).tolist(), b_target.tolist()))
    if log:
        log.close()


if __name__ == '__main__':
    main()
