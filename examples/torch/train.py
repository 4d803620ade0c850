"""A PyTorch image-classification training run, written the way users write
one, with no profiler in it: it never imports dlprof. Profile it with

    build/tools/dlprof run -- /usr/bin/python3 examples/torch/train.py --scenario augment-bound

It generates a small JPEG data set (first run only), then trains a small
convolutional network with SGD on batches from a torch.utils.data.DataLoader
whose workers read, decode and augment the images. Each --scenario puts the
bottleneck in one known place; any flag given explicitly overrides the
scenario's value (see README.md).

The script measures itself, in the training process: how long each next() on
the DataLoader's iterator took (the wait for data) against the time from one
next() to the next (a step). The last line is machine-readable:

    summary: scenario=... workers=2 ... steps=30 ... steady_wait_fraction=0.6712 mean_step_ms=...

with the same key names as examples/pipeline's summary where they apply.
"""
import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
import zlib

import torch
import torch.utils.data

import dataset
import model

# Every value a scenario sets; flags override them one by one.
BASE = dict(workers=2, prefetch_factor=2, persistent_workers=0, start_method="fork",
            datapipe=0, batch_size=16, crop=64, epochs=1, steps=30, storage_mbps=0.0,
            augment_passes=0, model_width=8, model_extra=0)

SCENARIOS = {
    # Rotations and blurs in the workers cost more than the model's step: the
    # loop waits about two thirds of the time; bottleneck 'fetch' (cpu, worker).
    "augment-bound": dict(augment_passes=14),
    # Reads sleep as long as 0.4 MB/s storage would take, per worker: the
    # loop waits; bottleneck 'fetch' (io, worker). (At 1 MB/s the small
    # generated images came in about as fast as a loaded 2-core machine ran
    # the model: the loop waited 8-9% in some unprofiled runs and 65% in
    # others. At 0.4 it waits 42-82%.)
    "io-bound": dict(storage_mbps=0.4),
    # Cheap data, a heavier model: the workers keep up, the loop hardly waits.
    "model-bound": dict(model_width=48, model_extra=4, steps=16),
    # augment-bound as a datapipe chain: IterableWrapper -> ShardingFilter ->
    # Mapper(read) -> Mapper(decode_jpeg) -> Mapper(augment) -> Batcher.
    "datapipe": dict(augment_passes=14, datapipe=1),
    # augment-bound with spawned and forkserver workers.
    "spawn": dict(augment_passes=14, start_method="spawn"),
    "forkserver": dict(augment_passes=14, start_method="forkserver"),
    # augment-bound over 3 epochs with the same two workers throughout.
    "persistent": dict(augment_passes=14, persistent_workers=1, epochs=3, steps=36),
    # num_workers=0: the training process fetches in next() itself.
    "in-process": dict(workers=0, augment_passes=2),
}


def default_data_dir(images, size):
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "dlprof-example-torch", f"v{dataset.DATASET_VERSION}-{images}x{size}")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="augment-bound", choices=sorted(SCENARIOS))
    p.add_argument("--data-dir", help="data set folder (default: under $XDG_CACHE_HOME or ~/.cache)")
    p.add_argument("--images", type=int, default=384, help="images in the data set (384)")
    p.add_argument("--image-px", type=int, default=96, help="their width and height (96)")
    p.add_argument("--generate-only", action="store_true", help="make the data set, then exit")
    p.add_argument("--ranks", type=int, default=1,
                   help="train data-parallel in this many processes (DistributedDataParallel over "
                        "gloo, started by torch.multiprocessing.spawn), each with its own DataLoader")
    p.add_argument("--launcher", action="store_true",
                   help="run the training in a child process, as torchrun would, and wait for it")
    p.add_argument("--warmup-steps", type=int, default=2,
                   help="steps left out of steady_wait_fraction (2, dlprof's DLPROF_WARMUP_STEPS default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--step-log", action="store_true", help="print one 'step:' line per step")
    p.add_argument("--mark-loop", action="store_true",
                   help="mark the steps and waits by hand with `import dlprof`, and no stage (run "
                        "with DLPROF_AUTO_ANNOTATE=0 to see what dlprof makes of an unmarked pipeline)")
    g = p.add_argument_group("scenario values (default: the scenario's)")
    g.add_argument("--workers", type=int, help="DataLoader num_workers")
    g.add_argument("--prefetch-factor", type=int, help="DataLoader prefetch_factor")
    g.add_argument("--persistent-workers", type=int, choices=[0, 1])
    g.add_argument("--start-method", choices=["fork", "spawn", "forkserver"],
                   help="DataLoader multiprocessing_context")
    g.add_argument("--datapipe", type=int, choices=[0, 1], help="feed a datapipe chain, not a Dataset")
    g.add_argument("--batch-size", type=int)
    g.add_argument("--crop", type=int, help="side of the augmented images")
    g.add_argument("--epochs", type=int)
    g.add_argument("--steps", type=int, help="steps in all (an epoch is steps/epochs batches)")
    g.add_argument("--storage-mbps", type=float, help="emulated storage bandwidth per read, 0: none")
    g.add_argument("--augment-passes", type=int, help="rounds of rotate+blur per image (CPU cost)")
    g.add_argument("--model-width", type=int)
    g.add_argument("--model-extra", type=int, help="extra conv layers")
    args = p.parse_args(argv)
    for key, value in {**BASE, **SCENARIOS[args.scenario]}.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.data_dir is None:
        args.data_dir = default_data_dir(args.images, args.image_px)
    if args.epochs < 1 or args.steps < args.epochs or args.steps % args.epochs:
        p.error("--steps must be a positive multiple of --epochs")
    if args.workers < 0 or args.batch_size < 1 or args.warmup_steps < 0:
        p.error("--workers >= 0, --batch-size >= 1 and --warmup-steps >= 0 please")
    if args.datapipe and args.epochs != 1:
        p.error("the datapipe chain runs one epoch")
    if args.ranks < 1:
        p.error("--ranks >= 1 please")
    if args.workers == 0 and args.persistent_workers:
        p.error("--persistent-workers needs --workers > 0")
    return args


def run_launcher(argv):
    """Runs this script again without --launcher as a child, as torchrun runs
    a trainer, waits for it and exits with its status."""
    child = [sys.executable, os.path.abspath(__file__)] + [a for a in argv if a != "--launcher"]
    env = dict(os.environ, LOCAL_RANK="0", RANK="0", WORLD_SIZE="1")
    rc = subprocess.call(child, env=env)
    return rc if rc >= 0 else 128 - rc


def make_loader(args, files, keys_per_epoch):
    storage = dataset.Storage(args.storage_mbps)
    kwargs = {}
    if args.workers > 0:
        kwargs = dict(num_workers=args.workers, prefetch_factor=args.prefetch_factor,
                      persistent_workers=bool(args.persistent_workers),
                      multiprocessing_context=args.start_method)
    if args.datapipe:
        settings = dataset.StageSettings(storage, args.crop, args.augment_passes, args.seed)
        settings.configure()
        keys = [(0, i) for _, i in dataset.EpochSampler(len(files), keys_per_epoch, args.seed)]
        pipe = dataset.build_datapipe(args.data_dir, files, keys, args.batch_size)
        if args.workers > 0:
            kwargs["worker_init_fn"] = settings
        loader = torch.utils.data.DataLoader(
            pipe, batch_size=None, collate_fn=torch.utils.data.default_collate, **kwargs)
        return loader, None
    ds = dataset.JpegFolder(args.data_dir, files, storage, args.crop, args.augment_passes, args.seed)
    sampler = dataset.EpochSampler(len(files), keys_per_epoch, args.seed)
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, sampler=sampler,
                                         drop_last=True, **kwargs)
    return loader, sampler


def train(args, loader, sampler, net, optimizer):
    """Every next() on the loader's iterators, timed: (start, end, got_batch).
    The loop runs each epoch to the end (the next() that raises StopIteration
    included), so that the last step ends at a next() as the others do."""
    calls, losses = [], []
    checksum = 0
    marks = None
    if args.mark_loop:
        import dlprof as marks  # pylint: disable=import-outside-toplevel
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        it = iter(loader)
        while True:
            with marks.step() if marks else contextlib.nullcontext():
                t0 = time.perf_counter()
                try:
                    with marks.wait() if marks else contextlib.nullcontext():
                        images, labels = next(it)
                except StopIteration:
                    calls.append((t0, time.perf_counter(), False))
                    break
                calls.append((t0, time.perf_counter(), True))
                losses.append(model.train_step(net, optimizer, images, labels))
            checksum = zlib.crc32(images.numpy().tobytes(), zlib.crc32(labels.numpy().tobytes(), checksum))
        del it
    return calls, losses, checksum


def measure(calls, first_batch):
    """Steps from the one that got batch `first_batch` on. A step runs from the
    next() that returns its batch to the following next() call; its wait is
    that first next(). The next() that ends an epoch (StopIteration) and the
    time until the next epoch's first next() are in no step. Returns (steps,
    wait_s, step time in all, step_s list, wait_s list)."""
    step_s, wait_s = [], []
    for i, (start, end, got_batch) in enumerate(calls):
        if got_batch:
            step_s.append(calls[i + 1][0] - start)
            wait_s.append(end - start)
    step_s, wait_s = step_s[first_batch:], wait_s[first_batch:]
    return len(step_s), sum(wait_s), sum(step_s), step_s, wait_s


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_rank(rank, args, manifest, port, wall0):
    """One data-parallel training process (torch.multiprocessing.spawn's
    target): joins the gloo group, then trains as a single process would,
    its gradients averaged with the other ranks' at each step."""
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.ranks)
    try:
        rc = train_process(args, manifest, wall0, rank)
    finally:
        dist.destroy_process_group()
    if rc:
        sys.exit(rc)


def main(argv):
    args = parse_args(argv)
    if args.launcher:
        return run_launcher(argv)
    wall0 = time.perf_counter()
    manifest = dataset.ensure_dataset(args.data_dir, args.images, args.image_px)
    if args.generate_only:
        print(f"data set: {args.data_dir} ({manifest['images']} images of {manifest['size']} px)")
        return 0
    if args.ranks > 1:
        import torch.multiprocessing as mp  # pylint: disable=import-outside-toplevel
        mp.spawn(run_rank, args=(args, manifest, free_port(), wall0), nprocs=args.ranks)
        return 0
    return train_process(args, manifest, wall0, None)


def train_process(args, manifest, wall0, rank):
    """Trains and prints the summary line: the whole run, or one rank's."""
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    files = manifest["files"]
    steps_per_epoch = args.steps // args.epochs
    loader, sampler = make_loader(args, files, steps_per_epoch * args.batch_size)
    net = model.SmallConvNet(args.model_width, args.model_extra, dataset.CLASSES)
    if rank is not None:
        net = torch.nn.parallel.DistributedDataParallel(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

    train0 = time.perf_counter()
    calls, losses, checksum = train(args, loader, sampler, net, optimizer)
    train_s = time.perf_counter() - train0
    steps = len(losses)
    ok = steps == args.steps
    _, all_wait, all_span, _, _ = measure(calls, 0)
    n, wait, span, step_s, wait_s = measure(calls, args.warmup_steps)
    wait_fraction = all_wait / all_span if all_span > 0 else 0.0
    steady = wait / span if span > 0 else 0.0
    if args.step_log:
        for i, (s, w) in enumerate(zip(step_s, wait_s)):
            print(f"step: i={i + args.warmup_steps} step_s={s:.6f} wait_s={w:.6f}")
    median_step = statistics.median(step_s) if step_s else 0.0
    print(f"trained {steps} steps in {train_s:.2f} s: mean step {1e3 * span / max(n, 1):.1f} ms, "
          f"waiting for data {100 * steady:.1f}% of step time after {args.warmup_steps} warm-up steps "
          f"({'input-bound' if steady >= 0.2 else 'slightly input-bound' if steady >= 0.05 else 'not input-bound'})")
    print(f"summary: scenario={args.scenario} workers={args.workers} prefetch_factor={args.prefetch_factor} "
          f"persistent_workers={args.persistent_workers} start_method={args.start_method} "
          f"datapipe={args.datapipe} batch_size={args.batch_size} epochs={args.epochs} steps={steps} "
          f"warmup_steps={args.warmup_steps} wall_s={time.perf_counter() - wall0:.4f} "
          f"train_s={train_s:.4f} wait_s={all_wait:.4f} wait_fraction={wait_fraction:.4f} "
          f"steady_wait_fraction={steady:.4f} mean_step_ms={1e3 * span / max(n, 1):.3f} "
          f"median_step_s={median_step:.6f} "
          f"median_wait_s={statistics.median(wait_s) if wait_s else 0.0:.6f} "
          f"first_loss={losses[0] if losses else 0:.6f} last_loss={losses[-1] if losses else 0:.6f} "
          f"data_checksum={checksum:08x} pid={os.getpid()} rank={-1 if rank is None else rank} "
          f"status={'ok' if ok else 'failed'}",
          flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
