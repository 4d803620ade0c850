"""A torch DataLoader that never imports dlprof, for the automatic
annotations (python/dlprof/_torch.py). Prints what it did as JSON.

Usage: torch_annotations.py KIND [WORKERS [START_METHOD]]
  map:      a map-style Dataset over 64 items, batch 8, 2 epochs; __getitem__
            burns 2 ms in a stage of the user's own, "user_decode" (ctypes on
            the C API: the script does not import dlprof), and the collate
            function burns 3 ms per batch;
  datapipe: IterableWrapper(range(64)) -> Mapper(decode) -> Mapper(augment)
            -> fed to the DataLoader unbatched then collated in batches of 8;
  package:  as map, with the user's stages from the dlprof package itself
            (PYTHONPATH must hold it): `with dlprof.stage("user_decode")` in
            __getitem__ and `@dlprof.stage("user_collate")` on the collate
            function, which nest inside the automatic fetch and collate;
  pin:      torch's pin_memory() on 40 objects that take 5 ms each to pin.
"""
import ctypes
import json
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

KIND = sys.argv[1]
WORKERS = int(sys.argv[2]) if len(sys.argv) > 2 else 2
START = sys.argv[3] if len(sys.argv) > 3 else "fork"
ITEMS, BATCH, EPOCHS = 64, 8, 2

_api = ctypes.CDLL(None)
try:
    _intern, _enter, _exit = _api.dlprof_stage_intern, _api.dlprof_stage_enter, _api.dlprof_stage_exit
    _intern.argtypes, _intern.restype = [ctypes.c_char_p], ctypes.c_uint32
    _enter.argtypes = [ctypes.c_uint32]
except AttributeError:  # unprofiled
    _intern, _enter, _exit = (lambda name: 0), (lambda sid: None), (lambda: None)


def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Items(Dataset):
    def __len__(self):
        return ITEMS

    def __getitem__(self, i):
        _enter(_intern(b"user_decode"))
        try:
            burn(0.002)
        finally:
            _exit()
        return torch.full((4,), float(i))


def slow_collate(batch):
    burn(0.003)
    return torch.stack(batch)


if KIND == "package":
    import dlprof

    class PackageItems(Items):
        def __getitem__(self, i):
            with dlprof.stage("user_decode"):
                burn(0.002)
            return torch.full((4,), float(i))

    @dlprof.stage("user_collate")
    def package_collate(batch):
        burn(0.003)
        return torch.stack(batch)


def decode(i):
    burn(0.002)
    return i


def augment(i):
    burn(0.001)
    return torch.full((4,), float(i))


def make_loader():
    kwargs = {"num_workers": WORKERS}
    if WORKERS > 0:
        kwargs["multiprocessing_context"] = START
    if KIND == "map":
        return DataLoader(Items(), batch_size=BATCH, collate_fn=slow_collate, **kwargs)
    if KIND == "package":
        return DataLoader(PackageItems(), batch_size=BATCH, collate_fn=package_collate, **kwargs)
    from torch.utils.data.datapipes.iter import IterableWrapper

    pipe = IterableWrapper(range(ITEMS)).map(decode).map(augment)
    if WORKERS > 0:
        pipe = pipe.sharding_filter()
    return DataLoader(pipe, batch_size=BATCH, **kwargs)


class Pinnable:
    """What torch's pin_memory() pins by calling its pin_memory() method."""

    def pin_memory(self, *args):
        burn(0.005)
        return self


if __name__ == "__main__" and KIND == "pin":
    # The pin-memory thread's copies (no CUDA here: an object that pins itself).
    from torch.utils.data._utils import pin_memory

    for _ in range(40):
        pin_memory.pin_memory(Pinnable())
    print(json.dumps({"pinned": 40}))
    sys.exit(0)

if __name__ == "__main__":
    loader = make_loader()
    batches = []
    for epoch in range(EPOCHS):
        n = 0
        for batch in loader:
            n += 1
            burn(0.001)
        batches.append(n)
    print(json.dumps({"batches_per_epoch": batches}))
