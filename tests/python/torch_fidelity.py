"""What a torch program can see of dlprof's automatic annotations: it must
print exactly the same with and without dlprof (tests/python_package_test.cc
compares the two outputs). Each check prints one line; the ones that found a
difference once say so.

- tracebacks and exception texts from a failing __getitem__ and collate_fn,
  in the training process and from a worker (no frame of dlprof's);
- warnings.warn(stacklevel=N) from __getitem__ and from a collate_fn name
  the same file and line;
- a datapipe that is its own iterator keeps its type and attributes; one
  whose `fn` is a tensor still runs; __getstate__ is not called by dlprof;
- introspection of torch's patched functions: isfunction, signature,
  getsourcefile, isgeneratorfunction.
"""
import inspect
import os
import sys
import traceback
import types
import warnings

import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.datapipes.iter import IterableWrapper, Mapper
from torch.utils.data.datapipes.datapipe import IterDataPipe
from torch.utils.data import dataloader
from torch.utils.data._utils import fetch


def show(*parts):
    print(*parts, flush=True)


class Failing(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise ValueError("item %d is bad" % i)
        return torch.tensor([i])


class Warning_(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        for level in (1, 2, 3, 4, 5):
            warnings.warn("getitem level %d" % level, stacklevel=level)
        return torch.tensor([i])


def warning_collate(batch):
    warnings.warn("collate level 2", stacklevel=2)
    warnings.warn("collate level 3", stacklevel=3)
    return torch.stack(batch)


def failing_collate(batch):
    raise RuntimeError("collate failed")


class OwnIterator(IterDataPipe):
    def __init__(self):
        self.i = 0

    def __iter__(self):
        self.i = 0
        return self

    def __next__(self):
        self.i += 1
        if self.i > 3:
            raise StopIteration
        return self.i


class TensorFn(IterDataPipe):
    def __init__(self, source):
        self.source = source
        self.fn = torch.ones(3)  # a weight, not a function

    def __iter__(self):
        for x in self.source:
            yield x + int(self.fn.sum())


getstate_calls = 0


class Stateful(IterDataPipe):
    def __iter__(self):
        yield from range(3)

    def __getstate__(self):
        global getstate_calls
        getstate_calls += 1
        return self.__dict__


def short(tb_text):
    # Paths differ between machines, not between runs: keep them.
    return tb_text.rstrip()


if __name__ == "__main__":
    # Tracebacks, in the training process (num_workers=0).
    for name, loader in (("getitem", DataLoader(Failing(), batch_size=1)),
                         ("collate", DataLoader(Failing(), batch_size=2, collate_fn=failing_collate))):
        try:
            for _ in loader:
                pass
        except Exception:
            show("traceback", name, short(traceback.format_exc()))
    # The text of a worker's exception (it carries the worker's traceback).
    try:
        for _ in DataLoader(Failing(), batch_size=1, num_workers=2):
            pass
    except ValueError as err:
        show("worker exception", str(err).rstrip())
    # Warnings and where they point.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in DataLoader(Warning_(), batch_size=2, collate_fn=warning_collate):
            pass
    for w in caught:
        show("warning", w.message, os.path.basename(w.filename), w.lineno)
    # Datapipes.
    own = OwnIterator()
    show("own iterator", list(DataLoader(own, batch_size=None)))
    it = iter(own)
    show("own iterator again", type(it).__name__, hasattr(it, "i"))
    show("tensor fn", list(DataLoader(TensorFn(IterableWrapper(range(3))), batch_size=None)))
    stateful = Stateful().map(abs)
    show("stateful", list(DataLoader(stateful, batch_size=None)), "getstate calls", getstate_calls)
    # Introspection of what dlprof patched.
    nxt = dataloader._BaseDataLoaderIter.__next__
    show("__next__", inspect.isfunction(nxt), isinstance(nxt, types.FunctionType), nxt.__name__,
         nxt.__qualname__, nxt.__module__, str(inspect.signature(nxt)),
         os.path.basename(inspect.getsourcefile(nxt)), nxt.__code__.co_name)
    f = fetch._MapDatasetFetcher.fetch
    show("fetch", inspect.isfunction(f), f.__qualname__, str(inspect.signature(f)))
    show("Mapper.__iter__", inspect.isgeneratorfunction(Mapper.__iter__),
         os.path.basename(Mapper.__iter__.__code__.co_filename))
