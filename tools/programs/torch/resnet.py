"""A small ResNet in the manner of the CIFAR-10 ResNets people train first: 3x3 convolutions without
bias, BatchNorm2d, basic residual blocks with a 1x1 projection shortcut where the shape changes,
AdaptiveAvgPool2d, kaiming-normal init, SGD with momentum, Nesterov and weight decay under
CosineAnnealingLR, CrossEntropyLoss with label smoothing, random horizontal flips, and an eval pass
on the running statistics. --dtype float64 trains it in double precision (model.to(dtype=...)).

The images are synthetic 3x16x16 class-dependent textures from a seeded NumPy generator; the flips
are drawn by NumPy too.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import CosineAnnealingLR
from torch.utils.data import DataLoader, TensorDataset


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = conv3x3(in_planes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10, width=8):
        super().__init__()
        self.in_planes = width
        self.conv1 = conv3x3(3, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = self._make_layer(block, width, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 2 * width, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 4 * width, num_blocks[2], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(4 * width * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, num_blocks, stride):
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(block(self.in_planes, planes, s))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = self.avgpool(out)
        out = torch.flatten(out, 1)
        return self.fc(out)


def synthetic_images(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    yy, xx = np.mgrid[0:16, 0:16]
    images = 0.5 * rng.standard_normal((n, 3, 16, 16))
    for i, k in enumerate(labels):
        angle = np.pi * k / 10
        wave = np.sin((np.cos(angle) * xx + np.sin(angle) * yy) * (0.5 + 0.1 * k))
        images[i, k % 3] += wave
    return images.astype(np.float32), labels.astype(np.int64)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument('--steps', type=int, default=100)
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--lr', type=float, default=0.05)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--threads', type=int, default=0)
    parser.add_argument('--dtype', default='float32', choices=['float32', 'float64'])
    parser.add_argument('--init', default='', help='start from these weights (.npz of a state_dict)')
    parser.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    parser.add_argument('--log', default='', help='write one JSON line per step (loss, seconds)')
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    if args.threads:
        torch.set_num_threads(args.threads)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    log = open(args.log, 'w') if args.log else None

    x, y = synthetic_images(args.batch_size * 8, args.seed)
    xt, yt = synthetic_images(100, args.seed + 1)
    trainloader = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=args.batch_size)
    testloader = DataLoader(TensorDataset(torch.from_numpy(xt), torch.from_numpy(yt)), batch_size=50)
    flips = np.random.default_rng(args.seed + 2)

    net = ResNet(BasicBlock, [1, 1, 1])
    if args.init:
        w = np.load(args.init)
        net.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    if args.save_init:
        np.savez(args.save_init, **{k: v.detach().cpu().numpy() for k, v in net.state_dict().items()})
    dtype = getattr(torch, args.dtype)
    net = net.to(device=device, dtype=dtype)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
    scheduler = CosineAnnealingLR(optimizer, T_max=args.steps)

    def test(tag):
        net.eval()
        test_loss, correct, total = 0, 0, 0
        with torch.no_grad():
            for inputs, targets in testloader:
                inputs, targets = inputs.to(device, dtype), targets.to(device)
                outputs = net(inputs)
                test_loss += criterion(outputs, targets).item() * targets.size(0)
                _, predicted = outputs.max(1)
                total += targets.size(0)
                correct += predicted.eq(targets).sum().item()
        print(f"test {tag}: loss {test_loss / total:.4f} acc {100. * correct / total:.1f}%")
        if log:
            log.write(json.dumps({'eval': f'test@{tag}', 'loss': test_loss / total}) + '\n')

    step = 0
    epoch = 0
    while step < args.steps:
        net.train()
        train_loss, correct, total = 0, 0, 0
        for inputs, targets in trainloader:
            if step >= args.steps:
                break
            t0 = time.perf_counter()
            flip = torch.from_numpy(flips.random(inputs.size(0)) < 0.5).view(-1, 1, 1, 1)
            inputs = torch.where(flip, inputs.flip(3), inputs)
            inputs, targets = inputs.to(device, dtype), targets.to(device)
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            scheduler.step()
            lossf = loss.item()
            dt = time.perf_counter() - t0
            if log:
                log.write(json.dumps({'step': step, 'loss': lossf, 'time': dt}) + '\n')
            step += 1
            train_loss += lossf
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
        epoch += 1
        print(f"epoch {epoch}: loss {train_loss / max(1, len(trainloader)):.4f} "
              f"acc {100. * correct / max(1, total):.1f}% "
              f"lr {scheduler.get_last_lr()[0]:.4f}")
        test(epoch)
    running = [m.running_mean.clone() for m in net.modules() if isinstance(m, nn.BatchNorm2d)]
    assert all(torch.isfinite(r).all() for r in running)
    if log:
        log.close()


if __name__ == '__main__':
    main()
