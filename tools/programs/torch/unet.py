"""A U-Net for segmentation in the manner of the widely used PyTorch U-Net trainers: double
(conv 3x3 -> BatchNorm2d -> ReLU) blocks, max-pool downsampling, bilinear nn.Upsample (or
ConvTranspose2d) upsampling with F.pad to the skip connection's size and torch.cat, a 1x1 output
convolution; cross-entropy plus a Dice loss over F.one_hot masks, RMSprop with momentum and
foreach, ReduceLROnPlateau on the validation Dice score, gradient clipping under a GradScaler
(disabled on the CPU), and an evaluation under torch.inference_mode.

The images are synthetic 3x32x32 scenes of discs and squares with their class masks, from a seeded
NumPy generator. --dtype float64 trains in double precision (model.to(dtype=...)).
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, TensorDataset


class DoubleConv(nn.Module):
    """(convolution => [BN] => ReLU) * 2"""

    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels, bilinear=True):
        super().__init__()
        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        diffY = x2.size()[2] - x1.size()[2]
        diffX = x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, bilinear=True, width=8):
        super(UNet, self).__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.bilinear = bilinear
        factor = 2 if bilinear else 1
        self.inc = DoubleConv(n_channels, width)
        self.down1 = Down(width, 2 * width)
        self.down2 = Down(2 * width, 4 * width // factor)
        self.up1 = Up(4 * width, 2 * width // factor, bilinear)
        self.up2 = Up(2 * width, width, bilinear)
        self.outc = nn.Conv2d(width, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        return self.outc(x)


def dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)
    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)
    dice = (inter + epsilon) / (sets_sum + epsilon)
    return dice.mean()


def multiclass_dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    return dice_coeff(input.flatten(0, 1), target.flatten(0, 1), reduce_batch_first, epsilon)


def dice_loss(input, target):
    return 1 - multiclass_dice_coeff(input, target, reduce_batch_first=True)


def scenes(n, seed, size=32):
    """Images (n, 3, size, size) and masks (n, size, size): 0 background, 1 a disc, 2 a square."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    images = 0.3 * rng.standard_normal((n, 3, size, size))
    masks = np.zeros((n, size, size), np.int64)
    for i in range(n):
        cy, cx, r = rng.uniform(8, 24), rng.uniform(8, 24), rng.uniform(3, 7)
        masks[i][(yy - cy) ** 2 + (xx - cx) ** 2 < r ** 2] = 1
        y0, x0, s = rng.integers(0, size - 8, 3)
        masks[i, y0:y0 + 4 + s % 5, x0:x0 + 4 + s % 5] = 2
        images[i, 0] += masks[i] == 1
        images[i, 1] += masks[i] == 2
        images[i, 2] += 0.5 * (masks[i] > 0)
    return images.astype(np.float32), masks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument('--steps', type=int, default=100)
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--lr', type=float, default=3e-4)
    parser.add_argument('--bilinear', action='store_true', default=True)
    parser.add_argument('--amp', action='store_true', default=False)
    parser.add_argument('--channels-last', action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--threads', type=int, default=0)
    parser.add_argument('--dtype', default='float32', choices=['float32', 'float64'])
    parser.add_argument('--init', default='', help='start from these weights (.npz of a state_dict)')
    parser.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    parser.add_argument('--log', default='', help='write one JSON line per step (loss, seconds)')
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    dtype = getattr(torch, args.dtype)
    log = open(args.log, 'w') if args.log else None

    x, m = scenes(args.batch_size * 6, args.seed)
    xv, mv = scenes(16, args.seed + 1)
    train_loader = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(m)), batch_size=args.batch_size)
    val_loader = DataLoader(TensorDataset(torch.from_numpy(xv), torch.from_numpy(mv)), batch_size=8,
                            drop_last=True)

    model = UNet(n_channels=3, n_classes=3, bilinear=args.bilinear)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    if args.init:
        w = np.load(args.init)
        model.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    if args.save_init:
        np.savez(args.save_init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    model.to(device=device, dtype=dtype)

    optimizer = optim.RMSprop(model.parameters(), lr=args.lr, weight_decay=1e-8, momentum=0.9, foreach=True)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, 'max', patience=2)
    grad_scaler = torch.amp.GradScaler(device.type, enabled=args.amp)
    criterion = nn.CrossEntropyLoss() if model.n_classes > 1 else nn.BCEWithLogitsLoss()

    @torch.inference_mode()
    def evaluate():
        model.eval()
        dice_score = 0
        val_loss = 0
        for image, mask_true in val_loader:
            image = image.to(device=device, dtype=dtype, memory_format=memory_format)
            mask_true = mask_true.to(device=device, dtype=torch.long)
            mask_pred = model(image)
            val_loss += criterion(mask_pred, mask_true).item()
            mask_true = F.one_hot(mask_true, model.n_classes).permute(0, 3, 1, 2).float()
            mask_pred = F.one_hot(mask_pred.argmax(dim=1), model.n_classes).permute(0, 3, 1, 2).float()
            dice_score += multiclass_dice_coeff(mask_pred[:, 1:], mask_true[:, 1:], reduce_batch_first=False)
        model.train()
        return dice_score / max(len(val_loader), 1), val_loss / max(len(val_loader), 1)

    step = 0
    epoch = 0
    while step < args.steps:
        model.train()
        epoch_loss = 0
        for images, true_masks in train_loader:
            if step >= args.steps:
                break
            t0 = time.perf_counter()
            images = images.to(device=device, dtype=dtype, memory_format=memory_format)
            true_masks = true_masks.to(device=device, dtype=torch.long)
            with torch.autocast(device.type if device.type != 'mps' else 'cpu', enabled=args.amp):
                masks_pred = model(images)
                loss = criterion(masks_pred, true_masks)
                loss += dice_loss(F.softmax(masks_pred, dim=1),
                                  F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).to(masks_pred.dtype))
            optimizer.zero_grad(set_to_none=True)
            grad_scaler.scale(loss).backward()
            grad_scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            grad_scaler.step(optimizer)
            grad_scaler.update()
            lossf = loss.item()
            dt = time.perf_counter() - t0
            if log:
                log.write(json.dumps({'step': step, 'loss': lossf, 'time': dt}) + '\n')
            step += 1
            epoch_loss += lossf
        epoch += 1
        val_score, val_loss = evaluate()
        scheduler.step(val_score)
        print(f"epoch {epoch}: loss {epoch_loss / len(train_loader):.4f}, validation Dice {float(val_score):.4f}, "
              f"lr {optimizer.param_groups[0]['lr']:.2e}")
        if log:
            log.write(json.dumps({'eval': f'val@{epoch}', 'loss': val_loss}) + '\n')
    if log:
        log.close()


if __name__ == '__main__':
    main()
