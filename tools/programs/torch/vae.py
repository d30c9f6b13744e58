"""A variational autoencoder in the manner of pytorch/examples' vae: linear encoder to a mean and a
log-variance, the reparameterisation trick, a linear decoder with a sigmoid, binary cross-entropy
summed over pixels plus the KL divergence to the unit Gaussian, Adam, a test pass under no_grad, and
samples decoded from torch.randn.

The images are synthetic 28x28 blobs in [0, 1] from a seeded NumPy generator. --fixed-noise takes
the reparameterisation noise from a seeded NumPy generator instead of torch.randn_like, for runs that
are to be compared across libraries whose random generators differ.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F


class VAE(nn.Module):
    def __init__(self, hidden=200, latent=10, noise=None):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc21 = nn.Linear(hidden, latent)
        self.fc22 = nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, 784)
        self.noise = noise

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        if self.noise is None:
            eps = torch.randn_like(std)
        else:
            eps = torch.from_numpy(self.noise.standard_normal(tuple(std.shape)).astype(np.float32)).to(std.device)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    """Reconstruction (binary cross-entropy summed over the pixels) + KL(q(z|x) || N(0, I))."""
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def synthetic_images(n, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:28, 0:28]
    cy, cx = rng.uniform(7, 21, (2, n, 1, 1))
    r = rng.uniform(3, 8, (n, 1, 1))
    img = 1.0 / (1.0 + np.exp(((yy - cy) ** 2 + (xx - cx) ** 2 - r ** 2) / 6.0))
    img = np.clip(img + 0.05 * rng.standard_normal(img.shape), 0, 1)
    return img[:, None].astype(np.float32)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--steps', type=int, default=100, help='training batches in all')
    parser.add_argument('--batches-per-epoch', type=int, default=10)
    parser.add_argument('--no-cuda', action='store_true', default=False)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--threads', type=int, default=0)
    parser.add_argument('--log-interval', type=int, default=5)
    parser.add_argument('--fixed-noise', action='store_true', help='reparameterisation noise from NumPy')
    parser.add_argument('--init', default='', help='start from these weights (.npz of a state_dict)')
    parser.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    parser.add_argument('--log', default='', help='write one JSON line per step (loss, seconds)')
    args = parser.parse_args(argv)
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.cuda else "cpu")
    log = open(args.log, 'w') if args.log else None

    kwargs = {'num_workers': 1, 'pin_memory': True} if args.cuda else {}
    train_set = torch.utils.data.TensorDataset(
        torch.from_numpy(synthetic_images(args.batch_size * args.batches_per_epoch, args.seed)))
    test_set = torch.utils.data.TensorDataset(torch.from_numpy(synthetic_images(100, args.seed + 1)))
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, shuffle=False, **kwargs)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=args.batch_size, shuffle=False, **kwargs)

    noise = np.random.default_rng(args.seed + 2) if args.fixed_noise else None
    model = VAE(noise=noise)
    if args.init:
        w = np.load(args.init)
        model.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    if args.save_init:
        np.savez(args.save_init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    model = model.to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)

    step = 0

    def train(epoch):
        nonlocal step
        model.train()
        train_loss = 0
        for batch_idx, (data,) in enumerate(train_loader):
            if step >= args.steps:
                break
            t0 = time.perf_counter()
            data = data.to(device)
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            lossf = loss.item() / len(data)
            dt = time.perf_counter() - t0
            if log:
                log.write(json.dumps({'step': step, 'loss': lossf, 'time': dt}) + '\n')
            step += 1
            if batch_idx % args.log_interval == 0:
                print('Train Epoch: {} [{}/{}]\tLoss: {:.6f}'.format(
                    epoch, batch_idx * len(data), len(train_loader.dataset), lossf))
        print('====> Epoch: {} Average loss: {:.4f}'.format(epoch, train_loss / len(train_loader.dataset)))

    def test(epoch):
        model.eval()
        test_loss = 0
        with torch.no_grad():
            for i, (data,) in enumerate(test_loader):
                data = data.to(device)
                recon_batch, mu, logvar = model(data)
                test_loss += loss_function(recon_batch, data, mu, logvar).item()
                if i == 0:
                    n = min(data.size(0), 8)
                    comparison = torch.cat([data[:n], recon_batch.view(args.batch_size, 1, 28, 28)[:n]])
                    assert comparison.shape == (2 * n, 1, 28, 28)
        test_loss /= len(test_loader.dataset)
        print('====> Test set loss: {:.4f}'.format(test_loss))
        return test_loss

    epoch = 1
    while step < args.steps:
        train(epoch)
        test_loss = test(epoch)
        if log:
            log.write(json.dumps({'eval': f'test@{epoch}', 'loss': test_loss}) + '\n')
        with torch.no_grad():
            sample = torch.randn(64, 10).to(device)
            sample = model.decode(sample).cpu()
            assert sample.view(64, 1, 28, 28).shape == (64, 1, 28, 28)
        epoch += 1
    if log:
        log.close()


if __name__ == '__main__':
    main()
