#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target: tests/fuzz/corpus/<target>/.

The targets read their arguments byte by byte (tests/fuzz/fuzz_common.h) and
fall back on a generator seeded by the input when the bytes run out, so a
seed is a short prefix steering the first decisions: dims (small, zero,
huge), dtype, thread count, which outputs, then a few bytes of lengths.
Seeds are drawn from a fixed random.Random seed: the same corpus every run.

    python3 tests/fuzz/make_corpus.py [--count N]
"""
import argparse
import os
import random

TARGETS = ["fuzz_hard", "fuzz_forward_sum", "fuzz_attention_forward",
           "fuzz_attention_backward", "fuzz_likelihood", "fuzz_topology", "fuzz_fused"]

# First bytes of the decoder: three dims, the dtype, the thread count.
DIM_BYTES = [0, 1, 3, 7, 11, 15, 199, 205, 216, 221, 230, 245, 255]
DTYPE_BYTES = [0, 1, 2, 3, 250, 251]
THREAD_BYTES = [0, 160, 215, 230, 240, 250, 251]


def dims(rng, n):
    return [rng.choice(DIM_BYTES) if rng.random() < 0.3 else rng.randrange(0, 199)
            for _ in range(n)]


def seed(rng, target):
    if target == "fuzz_likelihood":
        # B, N, J, M; dtype; threads; coefficients from a model (< 128) or
        # filled; shared model (< 100); offsets (< 95 none, < 235 valid, else
        # broken); a mismatch (>= 200); best / lengths / flags / precision bits
        head = dims(rng, 4) + [rng.choice(DTYPE_BYTES), rng.choice(THREAD_BYTES),
                               rng.choice([0, 1, 3, 64, 121, 127, 130, 200]),
                               rng.choice([0, 99, 150]), rng.choice([0, 96, 120, 200, 240]),
                               rng.choice([0, 0, 0, 200, 203, 205, 207, 208, 209]),
                               rng.randrange(256)]
    elif target == "fuzz_topology":
        # B, tokens + 1, frames; dtype; threads; k (< 240: 1..3); topology
        # (% 3: blanks / token skips / plain; bit 2 gathered); outputs (bit 0
        # soft); a mismatch (>= 220)
        head = dims(rng, 3) + [rng.choice(DTYPE_BYTES), rng.choice(THREAD_BYTES),
                               rng.choice([0, 1, 2, 241, 250]), rng.randrange(256),
                               rng.randrange(256), rng.choice([0, 0, 0, 221, 226, 231, 236,
                                                               241, 246, 251])]
    elif target == "fuzz_fused":
        # B, T, S, J; x dtype; threads; op (bit 0 soft, bits 1-4 outputs);
        # params dtype (< 128 as x); spread kind (< 110 variance, < 250
        # log-std); model (bit 0 shared, 1 log weights, 4 moderate values);
        # a mismatch or NULL (>= 200, % 16 picks it)
        # (mostly valid calls: the argument errors are a byte away)
        head = dims(rng, 4) + [rng.choice([0, 1, 2, 3, 0, 1, 250]), rng.choice(THREAD_BYTES),
                               rng.randrange(256), rng.choice([0, 0, 0, 130, 200, 251]),
                               rng.choice([0, 120, 120, 0, 250]), rng.randrange(256),
                               0 if rng.random() < 0.75 else rng.randrange(200, 216)]
    else:
        head = dims(rng, 3) + [rng.choice(DTYPE_BYTES), rng.choice(THREAD_BYTES)]
    tail = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 24)))
    return bytes(head) + tail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=64)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "corpus"))
    args = ap.parse_args()
    for t, target in enumerate(TARGETS):
        rng = random.Random(1400 + t)
        d = os.path.join(args.out, target)
        os.makedirs(d, exist_ok=True)
        for k in range(args.count):
            with open(os.path.join(d, f"seed-{k:03d}"), "wb") as f:
                f.write(seed(rng, target))
    print(f"make_corpus: {args.count} seeds for each of {len(TARGETS)} targets in {args.out}")


if __name__ == "__main__":
    main()
