"""A small PyTorch input pipeline, written the way users write one.

A Dataset decodes a JPEG (made in memory with PIL at start) in __getitem__ and
passes it to a module-level augment(img), which resizes, rotates and flips it
in PIL and then does a little pure-Python work on the pixels. A DataLoader with
two worker processes (the 'fork' start method, Linux's default) feeds a
training loop, train(), that does some work of its own per batch.

It prints one JSON line at the end: the source lines of `def augment`,
`def JpegDataset.__getitem__` and `def train` (from inspect), the qualified
names, the items and batches seen and the main process's pid.

usage: dataloader.py [ITEMS]  (default 480)
"""
import inspect
import io
import json
import os
import sys

import torch
import torch.utils.data
from PIL import Image, ImageFilter


def make_jpeg(size=160):
    img = Image.new("RGB", (size, size))
    pixels = img.load()
    for y in range(size):
        for x in range(size):
            pixels[x, y] = ((x * 7) % 256, (y * 5) % 256, ((x + y) * 3) % 256)
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=90)
    return out.getvalue()


def augment(img):
    img = img.resize((128, 128), Image.BILINEAR)
    img = img.rotate(17, resample=Image.BICUBIC)
    img = img.transpose(Image.FLIP_LEFT_RIGHT)
    img = img.filter(ImageFilter.GaussianBlur(1))
    # A little pure Python on the pixels, as hand-written augmentations do.
    data = img.tobytes()
    checksum = 0
    for i in range(0, len(data), 7):
        checksum = (checksum * 31 + data[i]) & 0xFFFFFFFF
    return img, checksum


class JpegDataset(torch.utils.data.Dataset):
    def __init__(self, jpeg, items):
        self.jpeg = jpeg
        self.items = items

    def __len__(self):
        return self.items

    def __getitem__(self, index):
        img = Image.open(io.BytesIO(self.jpeg))
        img = img.convert("RGB")
        img, checksum = augment(img)
        tensor = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)
        return tensor.view(128, 128, 3), checksum


def train(loader, weights):
    batches = items = 0
    total = 0.0
    for batch, checksums in loader:
        x = batch.float().reshape(batch.shape[0], -1)[:, :256] / 255.0
        total += float((x @ weights).sum())
        # The loop's own Python work per batch (logging, metrics).
        acc = 0
        for v in checksums.tolist():
            for _ in range(2000):
                acc = (acc * 17 + v) % 65521
        batches += 1
        items += batch.shape[0]
    return batches, items, total


def main():
    items = int(sys.argv[1]) if len(sys.argv) > 1 else 480
    torch.set_num_threads(1)
    dataset = JpegDataset(make_jpeg(), items)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2)
    weights = torch.ones(256, 8)
    batches, seen, _ = train(loader, weights)
    print(
        json.dumps(
            {
                "pid": os.getpid(),
                "items": seen,
                "batches": batches,
                "augment": {"qualname": augment.__code__.co_qualname,
                            "line": inspect.getsourcelines(augment)[1]},
                "getitem": {"qualname": JpegDataset.__getitem__.__code__.co_qualname,
                            "line": inspect.getsourcelines(JpegDataset.__getitem__)[1]},
                "train": {"qualname": train.__code__.co_qualname,
                          "line": inspect.getsourcelines(train)[1]},
                "file": os.path.abspath(__file__),
            },
            sort_keys=True,
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
