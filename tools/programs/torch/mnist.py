"""An MNIST-shaped convolutional classifier in the manner of pytorch/examples' mnist: two 3x3
convolutions, max pooling, Dropout2d and Dropout, two linear layers, log_softmax with nll_loss,
Adadelta with a StepLR decay per epoch, a test pass that sums the loss and counts the hits, and a
saved state_dict. --dtype float64 trains it in double precision (model.to(dtype=...)).

The images are synthetic 1x28x28 digits-like patterns (a class-dependent stroke plus noise, from a
seeded NumPy generator), normalised with MNIST's mean and standard deviation.
"""
import argparse
import json
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, dropout1=0.25, dropout2=0.5):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout2d(dropout1)
        self.dropout2 = nn.Dropout(dropout2)
        self.fc1 = nn.Linear(2304, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def synthetic_digits(n, seed):
    """n images (n, 1, 28, 28) and labels: label k draws a bar at a k-dependent place and angle."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    images = rng.random((n, 1, 28, 28), dtype=np.float32)
    rows = np.arange(28)
    for i, k in enumerate(labels):
        r0 = 4 + 2 * k
        for c in range(4, 24):
            r = (r0 + (c - 4) * (k % 3 - 1) // 3) % 28
            images[i, 0, r, c] += 0.7
        images[i, 0, :, 2 + 2 * k] += 0.2 * (rows % 2)
    images = np.clip(images, 0, 1)
    images = (images - 0.1307) / 0.3081
    return images.astype(np.float32), labels.astype(np.int64)


def train(args, model, device, train_loader, optimizer, epoch, state, log):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        if state['step'] >= args.steps:
            return
        t0 = time.perf_counter()
        data, target = data.to(device, next(model.parameters()).dtype), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        lossf = loss.item()
        dt = time.perf_counter() - t0
        if log:
            log.write(json.dumps({'step': state['step'], 'loss': lossf, 'time': dt}) + '\n')
        state['step'] += 1
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), lossf))


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device, next(model.parameters()).dtype), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset), 100. * correct / len(test_loader.dataset)))
    return test_loss


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--test-batch-size', type=int, default=100)
    parser.add_argument('--batches-per-epoch', type=int, default=10)
    parser.add_argument('--steps', type=int, default=100, help='training batches in all')
    parser.add_argument('--lr', type=float, default=1.0)
    parser.add_argument('--gamma', type=float, default=0.7, help='learning rate step gamma')
    parser.add_argument('--dropout1', type=float, default=0.25)
    parser.add_argument('--dropout2', type=float, default=0.5)
    parser.add_argument('--no-cuda', action='store_true', default=False)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--threads', type=int, default=0)
    parser.add_argument('--dtype', default='float32', choices=['float32', 'float64'])
    parser.add_argument('--log-interval', type=int, default=5)
    parser.add_argument('--save-model', action='store_true', default=True)
    parser.add_argument('--init', default='', help='start from these weights (.npz of a state_dict)')
    parser.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    parser.add_argument('--log', default='', help='write one JSON line per step (loss, seconds)')
    args = parser.parse_args(argv)
    use_cuda = not args.no_cuda and torch.cuda.is_available()

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if use_cuda else "cpu")
    log = open(args.log, 'w') if args.log else None

    train_kwargs = {'batch_size': args.batch_size}
    test_kwargs = {'batch_size': args.test_batch_size}
    if use_cuda:
        cuda_kwargs = {'num_workers': 1, 'pin_memory': True, 'shuffle': True}
        train_kwargs.update(cuda_kwargs)
        test_kwargs.update(cuda_kwargs)

    x_train, y_train = synthetic_digits(args.batch_size * args.batches_per_epoch, args.seed)
    x_test, y_test = synthetic_digits(200, args.seed + 1)
    dataset1 = TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train))
    dataset2 = TensorDataset(torch.from_numpy(x_test), torch.from_numpy(y_test))
    train_loader = DataLoader(dataset1, **train_kwargs)
    test_loader = DataLoader(dataset2, **test_kwargs)

    model = Net(args.dropout1, args.dropout2)
    if args.init:
        w = np.load(args.init)
        model.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    if args.save_init:
        np.savez(args.save_init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    dtype = getattr(torch, args.dtype)
    model = model.to(device=device, dtype=dtype)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)

    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    state = {'step': 0}
    epoch = 1
    while state['step'] < args.steps:
        train(args, model, device, train_loader, optimizer, epoch, state, log)
        test_loss = test(model, device, test_loader)
        if log:
            log.write(json.dumps({'eval': f'test@{epoch}', 'loss': test_loss}) + '\n')
        scheduler.step()
        epoch += 1

    if args.save_model:
        tmp = tempfile.TemporaryDirectory(prefix='mnist_')  # removed at exit
        path = os.path.join(tmp.name, "mnist_cnn.pt")
        torch.save(model.state_dict(), path)
        model2 = Net().to(dtype=dtype)
        model2.load_state_dict(torch.load(path, weights_only=True))
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model2.state_dict().values()))
    if log:
        log.close()


if __name__ == '__main__':
    main()
