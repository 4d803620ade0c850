"""The example's data: a generated JPEG data set, the stages that read, decode
and augment one image, a map-style Dataset built on them and a datapipe chain
built on the same functions.

Nothing here knows about dlprof. Every random choice is a function of
(seed, epoch, index), so a sample is the same whichever process makes it and
whatever the number of workers.
"""
import io
import json
import os
import shutil
import tempfile
import time

import numpy as np
import torch
import torch.utils.data
from PIL import Image, ImageFilter

CLASSES = 10
# Bump when the generated images change, so that an old folder is not reused.
DATASET_VERSION = 1


# --- The data set on disk ------------------------------------------------------

def _make_image(index, size):
    """One deterministic RGB image of class index % CLASSES: a coloured
    gradient with stripes whose angle and frequency depend on the class, plus
    noise of the image's own."""
    label = index % CLASSES
    rng = np.random.default_rng((DATASET_VERSION, index))
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    angle = np.pi * label / CLASSES
    freq = 3 + label
    stripes = 0.5 + 0.5 * np.sin(2 * np.pi * freq * (x * np.cos(angle) + y * np.sin(angle)))
    base = rng.uniform(0.2, 0.8, size=3).astype(np.float32)
    rgb = np.stack([base[0] * stripes + 0.3 * x, base[1] * (1 - stripes) + 0.3 * y,
                    base[2] * stripes * (1 - x)], axis=-1)
    rgb += rng.normal(0, 0.05, size=rgb.shape).astype(np.float32)
    return Image.fromarray((np.clip(rgb, 0, 1) * 255).astype(np.uint8), "RGB"), label


def ensure_dataset(data_dir, images, size):
    """Makes `images` JPEGs of size x size pixels in data_dir unless that folder
    already holds exactly this data set. The folder is written under a
    temporary name and renamed into place, so that runs started at the same
    time neither clash nor read half a data set. Returns the manifest."""
    manifest = {"version": DATASET_VERSION, "images": images, "size": size}
    path = os.path.join(data_dir, "manifest.json")
    if os.path.exists(path):
        with open(path) as f:
            found = json.load(f)
        found_kind = {k: found.get(k) for k in manifest}
        if found_kind != manifest:
            raise SystemExit(f"train.py: {data_dir} holds another data set ({found_kind}); "
                             f"choose another --data-dir or remove it")
        return found
    parent = os.path.dirname(os.path.abspath(data_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".dlprof-torch-data-", dir=parent)
    try:
        files = []
        for i in range(images):
            img, label = _make_image(i, size)
            name = f"img_{i:05d}_c{label}.jpg"
            img.save(os.path.join(tmp, name), format="JPEG", quality=90)
            files.append(name)
        manifest["files"] = files
        with open(os.path.join(tmp, "manifest.json"), "w") as f:
            json.dump(manifest, f)
        try:
            os.rename(tmp, data_dir)  # also replaces an empty folder
            tmp = None
        except OSError as err:
            # Another run published it first, or the folder holds other files.
            if not os.path.exists(path):
                raise SystemExit(f"train.py: cannot make the data set in {data_dir}: {err}")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return ensure_dataset(data_dir, images, size)


def label_of(name):
    return int(name.rsplit("_c", 1)[1].split(".")[0])


# --- The stages of one sample -------------------------------------------------

class Storage:
    """Reads files; with mbps > 0 each read also sleeps as long as moving its
    bytes at that bandwidth would take, like network storage (off-CPU)."""

    def __init__(self, mbps=0.0):
        self.mbps = mbps

    def read(self, path):
        with open(path, "rb") as f:
            data = f.read()
        if self.mbps > 0:
            time.sleep(len(data) / (self.mbps * 1e6))
        return data


def decode_image(data):
    img = Image.open(io.BytesIO(data))
    return img.convert("RGB")


MEAN = np.array([0.5, 0.5, 0.5], dtype=np.float32)
STD = np.array([0.25, 0.25, 0.25], dtype=np.float32)


def augment_image(img, rng, out_size, passes):
    """Random resized crop, random horizontal flip, `passes` rounds of a small
    random rotation and blur (the CPU-heavy knob), colour jitter (brightness,
    contrast, saturation), normalisation into a float CHW tensor."""
    w, h = img.size
    scale = rng.uniform(0.5, 1.0)
    ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
    cw = int(min(w, round(w * np.sqrt(scale * ratio))))
    ch = int(min(h, round(h * np.sqrt(scale / ratio))))
    x0 = int(rng.integers(0, w - cw + 1))
    y0 = int(rng.integers(0, h - ch + 1))
    img = img.resize((out_size, out_size), Image.BILINEAR, box=(x0, y0, x0 + cw, y0 + ch))
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    for _ in range(passes):
        img = img.rotate(float(rng.uniform(-10, 10)), resample=Image.BICUBIC)
        img = img.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.3, 1.0))))
    a = np.asarray(img, dtype=np.float32) / 255.0
    a = a * rng.uniform(0.7, 1.3)                                    # brightness
    a = (a - a.mean()) * rng.uniform(0.7, 1.3) + a.mean()            # contrast
    gray = a @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    a = gray[..., None] + (a - gray[..., None]) * rng.uniform(0.7, 1.3)  # saturation
    a = (np.clip(a, 0, 1) - MEAN) / STD
    return torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))


# --- A map-style Dataset --------------------------------------------------------

class JpegFolder(torch.utils.data.Dataset):
    """Item (epoch, index): reads data_dir/files[index], decodes and augments
    it; returns (CHW float tensor, label)."""

    def __init__(self, data_dir, files, storage, out_size, passes, seed):
        self.data_dir = data_dir
        self.files = files
        self.labels = [label_of(f) for f in files]
        self.storage = storage
        self.out_size = out_size
        self.passes = passes
        self.seed = seed

    def __len__(self):
        return len(self.files)

    def __getitem__(self, key):
        epoch, index = key
        data = self.storage.read(os.path.join(self.data_dir, self.files[index]))
        img = decode_image(data)
        rng = np.random.default_rng((self.seed, epoch, index))
        return augment_image(img, rng, self.out_size, self.passes), self.labels[index]


class EpochSampler(torch.utils.data.Sampler):
    """A seeded shuffle of the data set per epoch, `length` keys long (the data
    set repeats when it is shorter), each key (epoch, index). Like
    DistributedSampler, set_epoch() chooses the epoch; the sampler runs in the
    training process, so this works with persistent workers too."""

    def __init__(self, size, length, seed):
        self.size = size
        self.length = length
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return self.length

    def __iter__(self):
        rng = np.random.default_rng((self.seed, self.epoch, 7))
        keys = []
        while len(keys) < self.length:
            keys.extend(int(i) for i in rng.permutation(self.size))
        return iter([(self.epoch, i) for i in keys[: self.length]])


# --- The same stages as a datapipe chain ------------------------------------------
# Module-level functions (not lambdas or partials), so that the chain pickles
# for spawn and each Mapper is known by its function's name. Their settings
# are module state, set in the training process and, in each worker, by the
# DataLoader's worker_init_fn (a spawned worker imports this module afresh).

_STAGE = {}  # storage, out_size, passes, seed


class StageSettings:
    """configure() sets the datapipe stages' settings here; as a worker_init_fn
    it sets them in each worker."""

    def __init__(self, storage, out_size, passes, seed):
        self.values = dict(storage=storage, out_size=out_size, passes=passes, seed=seed)

    def configure(self):
        _STAGE.update(self.values)

    def __call__(self, worker_id):
        self.configure()


def read(item):
    key, path, label = item
    return key, _STAGE["storage"].read(path), label


def decode_jpeg(item):
    key, data, label = item
    return key, decode_image(data), label


def augment(item):
    (epoch, index), img, label = item
    rng = np.random.default_rng((_STAGE["seed"], epoch, index))
    return augment_image(img, rng, _STAGE["out_size"], _STAGE["passes"]), label


def build_datapipe(data_dir, files, keys, batch_size):
    """IterableWrapper over the file names -> sharding filter (each worker
    takes its share) -> Mapper(read) -> Mapper(decode_jpeg) -> Mapper(augment)
    -> Batcher. The DataLoader collates each batch."""
    from torch.utils.data.datapipes.iter import Batcher, IterableWrapper, Mapper, ShardingFilter

    items = [((e, i), os.path.join(data_dir, files[i]), label_of(files[i])) for e, i in keys]
    pipe = IterableWrapper(items, deepcopy=False)
    pipe = ShardingFilter(pipe)
    pipe = Mapper(pipe, read)
    pipe = Mapper(pipe, decode_jpeg)
    pipe = Mapper(pipe, augment)
    return Batcher(pipe, batch_size)
