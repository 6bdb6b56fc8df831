#!/usr/bin/env python3
"""Writes a token stream of your own the way nanoGPT lays one out: train.bin and val.bin, raw u16
token ids with no header, here drawn from a random Markov chain over 16 tokens (a fixed seed), and
prints the chain's entropy rate: the lowest loss per token any model can reach on it.

    python3 examples/own_data/make_tokens.py DIR
    troupe data inspect DIR
    troupe train --lib build-user/libuser_trainer.so --trainer bigram --data DIR --seq-len 32

troupe reads DIR as a dataset: train.bin is the split "train", val.bin the split "val" (the word in
the file name); --seq-len cuts each stream into windows, the next token at every position the target.
"""
import math
import os
import sys

import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else "own_tokens"
vocab = int(sys.argv[2]) if len(sys.argv) > 2 else 16
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(11)
P = rng.dirichlet(np.full(vocab, 0.3), size=vocab)  # P[i, j]: the chance that j follows i
# The stationary distribution pi (pi P = pi), then the entropy rate -sum_i pi_i sum_j P_ij log P_ij.
w, v = np.linalg.eig(P.T)
pi = np.real(v[:, np.argmin(np.abs(w - 1))])
pi = pi / pi.sum()
rate = -sum(pi[i] * sum(P[i, j] * math.log(P[i, j]) for j in range(vocab) if P[i, j] > 0) for i in range(vocab))
cum = np.cumsum(P, axis=1)
for split, n in (("train", 200000), ("val", 40000)):
    ids = np.empty(n, dtype=np.uint16)
    cur = int(rng.integers(vocab))
    u = rng.random(n)
    for t in range(n):
        ids[t] = cur
        cur = min(int(np.searchsorted(cum[cur], u[t], side="right")), vocab - 1)
    ids.tofile(os.path.join(out, split + ".bin"))
print("wrote %s/train.bin (200000 tokens) and val.bin (40000), vocabulary %d" % (out, vocab))
print("entropy rate %.6f nats/token" % rate)
