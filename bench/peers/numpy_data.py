#!/usr/bin/env python3
"""The NumPy peer of bench_data: the same reads on the same files, one thread, from the page cache.
Prints one JSON object: MB/s and examples/s for
  npy_batches:    np.load(mmap_mode='r'), random batches by fancy indexing, as float32 / 255;
  token_windows:  np.load(mmap_mode='r') of the token .npy, random windows of --seq-len + 1 ids as int32;
  csv:            np.loadtxt of the CSV (the whole file; label column split off);
  png_shards:     the WebDataset shards' PNGs decoded with Pillow (when importable);
  npy_load_convert: np.load of the images and labels, as float32 / 255 and int32.
"""
import argparse
import io
import json
import os
import tarfile
import time

import numpy as np


def timed(fn, runs):
    best = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best.append(time.perf_counter() - t0)
    best.sort()
    return best[len(best) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--batches", type=int, default=2000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    out = {}
    rng = np.random.default_rng(1)

    x = np.load(os.path.join(a.dir, "x_train.npy"), mmap_mode="r")
    idx = rng.integers(0, x.shape[0], (a.batches, a.batch))
    row = int(np.prod(x.shape[1:]))

    def npy():
        for b in idx:
            batch = x[b].astype(np.float32) / 255.0
        return batch
    s = timed(npy, a.runs)
    out["npy_batches"] = {"mb_per_s": a.batches * a.batch * row / s / 1e6, "examples_per_s": a.batches * a.batch / s}

    def load():
        out = []
        for split in ("train", "test"):
            xx = np.load(os.path.join(a.dir, "x_%s.npy" % split))
            yy = np.load(os.path.join(a.dir, "y_%s.npy" % split))
            out.append((xx.reshape(len(xx), -1).astype(np.float32) / np.float32(255), yy.astype(np.int32)))
        return out
    s = timed(load, a.runs)
    out["npy_load_convert"] = {"mb_per_s": 70000 * row / s / 1e6, "examples_per_s": 70000 / s}

    t = np.load(os.path.join(a.dir, "tokens.npy"), mmap_mode="r")
    starts = rng.integers(0, t.shape[0] - a.seq_len - 1, (a.batches, a.batch))

    def windows():
        for b in starts:
            w = np.stack([t[s:s + a.seq_len + 1] for s in b]).astype(np.int32)
        return w
    s = timed(windows, a.runs)
    out["token_windows"] = {"mb_per_s": a.batches * a.batch * (a.seq_len + 1) * t.itemsize / s / 1e6,
                            "examples_per_s": a.batches * a.batch / s}

    csv = os.path.join(a.dir, "train.csv")
    s = timed(lambda: np.loadtxt(csv, delimiter=",", skiprows=1, dtype=np.float32), 1)
    rows = sum(1 for _ in open(csv)) - 1
    out["csv"] = {"mb_per_s": os.path.getsize(csv) / s / 1e6, "examples_per_s": rows / s}

    try:
        from PIL import Image
        shards = sorted(f for f in os.listdir(a.dir) if f.endswith(".tar"))

        def png():
            n = 0
            for f in shards:
                with tarfile.open(os.path.join(a.dir, f)) as tf:
                    for m in tf:
                        if m.name.endswith(".png"):
                            np.asarray(Image.open(io.BytesIO(tf.extractfile(m).read())))
                            n += 1
            return n
        n = png()
        s = timed(png, a.runs)
        size = sum(os.path.getsize(os.path.join(a.dir, f)) for f in shards)
        out["png_shards"] = {"mb_per_s": size / s / 1e6, "examples_per_s": n / s}
    except ImportError:
        pass
    print(json.dumps(out))


main()
