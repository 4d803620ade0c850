# A torch DataLoader whose workers wait in slow_io() inside __getitem__
# (a sleep standing for slow storage, then a small read): an I/O-bound
# pipeline whose culprit is slow_io (tests/blocked_stacks_test.cc).
import time

import torch
from torch.utils.data import DataLoader, Dataset


def slow_io(i):
    time.sleep(0.02)
    with open("/proc/self/stat", "rb") as f:
        return f.read()


class SlowStorage(Dataset):
    def __len__(self):
        return 160

    def __getitem__(self, i):
        slow_io(i)
        return torch.zeros(4)


def main():
    for _ in DataLoader(SlowStorage(), batch_size=4, num_workers=2):
        pass


if __name__ == "__main__":
    main()
