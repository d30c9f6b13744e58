"""A DCGAN in the manner of pytorch/examples' dcgan: a generator of transposed convolutions with
BatchNorm2d and ReLU ending in Tanh, a discriminator of strided convolutions with BatchNorm2d and
LeakyReLU ending in Sigmoid, the weights_init that matches classes by name, BCELoss against
torch.full label tensors, two Adam optimizers with beta1 0.5, the fake batch detached for the
discriminator's step, and samples from a fixed noise batch.

The "real" images are synthetic 16x16 rings from a seeded NumPy generator. --fixed-noise takes the
generator's input noise from a seeded NumPy generator instead of torch.randn, for runs that are to
be compared across libraries whose random generators differ.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data

nc, nz, ngf, ndf = 1, 16, 8, 8


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),  # 4x4
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),  # 8x8
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),  # 16x16
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),  # 8x8
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),  # 4x4
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),  # 1x1
            nn.Sigmoid(),
        )

    def forward(self, input):
        output = self.main(input)
        return output.view(-1, 1).squeeze(1)


def rings(n, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:16, 0:16]
    c = rng.uniform(6, 10, (2, n, 1, 1))
    r = rng.uniform(3, 6, (n, 1, 1))
    d = np.sqrt((yy - c[0]) ** 2 + (xx - c[1]) ** 2)
    img = np.exp(-((d - r) ** 2) / 2.0) * 2 - 1
    return img[:, None].astype(np.float32)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument('--steps', type=int, default=100)
    parser.add_argument('--batchSize', type=int, default=32)
    parser.add_argument('--lr', type=float, default=0.0002)
    parser.add_argument('--beta1', type=float, default=0.5)
    parser.add_argument('--manualSeed', '--seed', type=int, default=999)
    parser.add_argument('--threads', type=int, default=0)
    parser.add_argument('--fixed-noise', action='store_true', help='generator noise from NumPy')
    parser.add_argument('--init', default='', help='start from these weights (.npz of both state_dicts)')
    parser.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    parser.add_argument('--log', default='', help='write JSON lines per step (losses, seconds)')
    opt = parser.parse_args(argv)

    torch.manual_seed(opt.manualSeed)
    if opt.threads:
        torch.set_num_threads(opt.threads)
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    log = open(opt.log, 'w') if opt.log else None
    noise_rng = np.random.default_rng(opt.manualSeed + 1) if opt.fixed_noise else None

    def make_noise(b):
        if noise_rng is None:
            return torch.randn(b, nz, 1, 1, device=device)
        return torch.from_numpy(noise_rng.standard_normal((b, nz, 1, 1)).astype(np.float32)).to(device)

    dataset = torch.utils.data.TensorDataset(torch.from_numpy(rings(opt.batchSize * 8, opt.manualSeed)))
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize, shuffle=False)

    netG = Generator().to(device)
    netG.apply(weights_init)
    netD = Discriminator().to(device)
    netD.apply(weights_init)
    if opt.init:
        w = np.load(opt.init)
        netG.load_state_dict({k[2:]: torch.from_numpy(w[k]) for k in w.files if k.startswith('G.')})
        netD.load_state_dict({k[2:]: torch.from_numpy(w[k]) for k in w.files if k.startswith('D.')})
    if opt.save_init:
        np.savez(opt.save_init, **{'G.' + k: v.detach().cpu().numpy() for k, v in netG.state_dict().items()},
                 **{'D.' + k: v.detach().cpu().numpy() for k, v in netD.state_dict().items()})

    criterion = nn.BCELoss()
    fixed_noise = make_noise(16)
    real_label = 1
    fake_label = 0
    optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

    step = 0
    epoch = 0
    while step < opt.steps:
        for i, (data,) in enumerate(dataloader):
            if step >= opt.steps:
                break
            t0 = time.perf_counter()
            # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            real_cpu = data.to(device)
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()
            noise = make_noise(batch_size)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()
            # (2) update G: maximize log(D(G(z)))
            netG.zero_grad()
            label.fill_(real_label)  # fake labels are real for the generator's loss
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()
            dt = time.perf_counter() - t0
            if log:
                log.write(json.dumps({'step': step, 'loss': errD.item(), 'time': dt}) + '\n')
                log.write(json.dumps({'eval': f'G@{step}', 'loss': errG.item()}) + '\n')
            step += 1
            if i % 4 == 0:
                print('[%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f'
                      % (epoch, i, len(dataloader), errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
        epoch += 1
        with torch.no_grad():
            fake = netG(fixed_noise).detach().cpu()
        assert fake.shape == (16, 1, 16, 16) and fake.abs().max().item() <= 1.0
    if log:
        log.close()


if __name__ == '__main__':
    main()
