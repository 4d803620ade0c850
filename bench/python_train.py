"""A small PyTorch CPU training run for bench/python_overhead.sh.

A DataLoader with two worker processes (fork, Linux's default) decodes JPEGs
made at start (PIL), augments them in PIL and in a little pure Python, and
feeds a tiny conv net trained with SGD on random labels. Everything is seeded,
and torch uses one thread per process, so that a run does the same work each
time and stays stable on a 2-core machine: about 5-10 s there.

Prints one line at the end:
  train: epochs=E steps=S items=I loss=L wall_s=W cpu_s=C workers_cpu_s=K pid=P
(wall_s: the training itself, imports left out; cpu_s: this process's own
user+sys, all its threads; workers_cpu_s: the reaped DataLoader workers'.)

usage: python_train.py [EPOCHS]  (default 3)
"""
import io
import os
import random
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.utils.data
from PIL import Image, ImageFilter

SEED = 12
IMAGES = 64  # distinct JPEGs; items cycle over them
# Per epoch; BENCH_TRAIN_ITEMS sets another (longer epochs: fewer worker
# processes for the same work, as a real run's epochs are).
ITEMS = int(os.environ.get("BENCH_TRAIN_ITEMS") or "640")
BATCH = 32
SIZE = 48  # input side after augmentation


def make_jpegs(count, side=96):
    rng = np.random.default_rng(SEED)
    out = []
    for _ in range(count):
        # Smooth-ish content (a JPEG of pure noise is unusually slow to code).
        base = rng.integers(0, 256, size=(side // 8, side // 8, 3), dtype=np.uint8)
        img = Image.fromarray(base).resize((side, side), Image.BILINEAR)
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def augment(img, rng):
    img = img.resize((SIZE + 8, SIZE + 8), Image.BILINEAR)
    img = img.rotate(rng.uniform(-15, 15), resample=Image.BICUBIC)
    left, top = rng.randrange(9), rng.randrange(9)
    img = img.crop((left, top, left + SIZE, top + SIZE))
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    img = img.filter(ImageFilter.GaussianBlur(1))
    # Hand-written per-pixel Python, as custom augmentations have.
    data = img.tobytes()
    acc = 0
    for i in range(0, len(data), 5):
        acc = (acc * 31 + data[i]) & 0xFFFFFFFF
    return img, acc


class JpegDataset(torch.utils.data.Dataset):
    def __init__(self, jpegs, items):
        self.jpegs = jpegs
        self.items = items

    def __len__(self):
        return self.items

    def __getitem__(self, index):
        rng = random.Random(SEED * 100003 + index)
        img = Image.open(io.BytesIO(self.jpegs[index % len(self.jpegs)])).convert("RGB")
        img, acc = augment(img, rng)
        x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)
        return x, (acc + index) % 10


def worker_init(worker_id):
    torch.set_num_threads(1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(16 * (SIZE // 4) ** 2, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def train(epochs):
    jpegs = make_jpegs(IMAGES)
    loader = torch.utils.data.DataLoader(
        JpegDataset(jpegs, ITEMS), batch_size=BATCH, shuffle=True, num_workers=2,
        worker_init_fn=worker_init, generator=torch.Generator().manual_seed(SEED))
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    steps = items = 0
    loss = torch.tensor(0.0)
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            steps += 1
            items += x.shape[0]
    return steps, items, float(loss)


def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    start = time.monotonic()
    steps, items, loss = train(epochs)
    wall = time.monotonic() - start
    ru = resource.getrusage(resource.RUSAGE_SELF)
    # The workers of every epoch have been joined (reaped) by now.
    rc = resource.getrusage(resource.RUSAGE_CHILDREN)
    print("train: epochs=%d steps=%d items=%d loss=%.4f wall_s=%.3f cpu_s=%.3f workers_cpu_s=%.3f pid=%d"
          % (epochs, steps, items, loss, wall, ru.ru_utime + ru.ru_stime, rc.ru_utime + rc.ru_stime,
             os.getpid()))


if __name__ == "__main__":
    main()
