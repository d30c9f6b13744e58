"""A time-series predictor in the manner of pytorch/examples' time_sequence_prediction: two
LSTMCells and a linear layer unrolled over sine waves of random phase, in double precision, trained
with LBFGS through a closure on MSELoss, then asked to continue the waves beyond the input under
torch.no_grad().

The waves come from a seeded NumPy generator, as in the original (which generates them with NumPy).
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


class Sequence(nn.Module):
    def __init__(self, hidden=51):
        super(Sequence, self).__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # predict beyond the input, feeding each prediction back
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def make_waves(seed, T=20, L=60, N=12):
    rng = np.random.default_rng(seed)
    x = np.empty((N, L), 'int64')
    x[:] = np.array(range(L)) + rng.integers(-4 * T, 4 * T, N).reshape(N, 1)
    return np.sin(x / 1.0 / T).astype('float64')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument('--steps', type=int, default=15, help='LBFGS steps')
    parser.add_argument('--max-iter', type=int, default=10, help='closure evaluations per LBFGS step at most')
    parser.add_argument('--hidden', type=int, default=24)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--threads', type=int, default=0)
    parser.add_argument('--future', type=int, default=40)
    parser.add_argument('--init', default='', help='start from these weights (.npz of a state_dict)')
    parser.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    parser.add_argument('--log', default='', help='write one JSON line per closure evaluation (loss, seconds)')
    opt = parser.parse_args(argv)

    np.random.seed(opt.seed)
    torch.manual_seed(opt.seed)
    if opt.threads:
        torch.set_num_threads(opt.threads)
    log = open(opt.log, 'w') if opt.log else None

    data = make_waves(opt.seed)
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])

    seq = Sequence(opt.hidden)
    seq.double()
    if opt.init:
        w = np.load(opt.init)
        seq.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    if opt.save_init:
        np.savez(opt.save_init, **{k: v.detach().cpu().numpy() for k, v in seq.state_dict().items()})
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=opt.max_iter)
    evals = 0
    for i in range(opt.steps):
        print('STEP: ', i)

        def closure():
            nonlocal evals
            t0 = time.perf_counter()
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            lossf = loss.item()
            print('loss:', lossf)
            loss.backward()
            if log:
                log.write(json.dumps({'step': evals, 'loss': lossf, 'time': time.perf_counter() - t0}) + '\n')
            evals += 1
            return loss
        optimizer.step(closure)
        with torch.no_grad():
            future = opt.future
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print('test loss:', loss.item())
            if log:
                log.write(json.dumps({'eval': f'test@{i}', 'loss': loss.item()}) + '\n')
            y = pred.detach().numpy()
            assert y.shape == (3, test_input.size(1) + future)
    if log:
        log.close()


if __name__ == '__main__':
    main()
