"""Shared fixtures: a seeded NumPy generator per test whose seed is printed
(pytest shows it with the failure), and helpers for building inputs.

Replay a failure with MAS_TEST_SEED=<seed> pytest tests/python -k <test>.
"""

import os
import random
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_SESSION_SEED = int(os.environ.get("MAS_TEST_SEED", random.SystemRandom().randrange(1 << 32)))


def pytest_report_header(config):
    return f"libmas tests: MAS_TEST_SEED={_SESSION_SEED}"


@pytest.fixture
def seed(request):
    """This test's seed: the session seed mixed with the test's name, so each
    test is reproducible alone."""
    value = (_SESSION_SEED + zlib.crc32(request.node.nodeid.encode())) % (1 << 32)
    print(f"seed: MAS_TEST_SEED={_SESSION_SEED} (test seed {value})")
    return value


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def random_lengths(rng, batch, tokens, frames):
    """Per-item (x_len, y_len) with 1 <= x_len <= min(T, y_len), y_len <= S,
    favouring the edges: x == y, x == 1, y == S, x == T."""
    most = min(tokens, frames)
    x_len = np.empty(batch, np.int64)
    y_len = np.empty(batch, np.int64)
    for b in range(batch):
        kind = rng.integers(0, 6)
        y = int(rng.integers(1, frames + 1))
        if kind == 0:
            y = frames
            x = int(rng.integers(1, most + 1))
        elif kind == 1:
            x = y = int(rng.integers(1, most + 1))
        elif kind == 2:
            x = 1
        elif kind == 3:
            x = most
            y = int(rng.integers(x, frames + 1))
        else:
            x = int(rng.integers(1, min(tokens, y) + 1))
        x_len[b], y_len[b] = x, y
    return x_len, y_len


def random_values(rng, shape, kind, dtype=np.float32):
    """Values exactly representable in dtype (NumPy float16/32/64), no -0.0.
    kind: "loglik", "halves" (ties everywhere), "huge" (magnitudes ~1e6)."""
    if kind == "halves":
        x = np.floor(rng.uniform(-6, 7, size=shape)) * 0.5
    elif kind == "huge":
        scale = 6e4 if np.dtype(dtype) == np.float16 else 1e6
        x = rng.uniform(-scale, scale, size=shape)
    else:
        x = rng.uniform(-8, 2, size=shape)
    return (np.asarray(x).astype(dtype) + dtype(0)).astype(dtype)


def sprinkle_neg_inf(rng, value_bts, x_len, y_len, fraction=0.3):
    """-inf on random cells inside the lengths, keeping one random monotonic
    path per item finite. value_bts is modified (a test's own array)."""
    for b in range(value_bts.shape[0]):
        x, y = int(x_len[b]), int(y_len[b])
        ups = set(rng.choice(np.arange(1, y), size=x - 1, replace=False).tolist()) if x > 1 else set()
        keep = np.cumsum([0] + [1 if j in ups else 0 for j in range(1, y)])
        hit = rng.random((x, y)) < fraction
        hit[keep, np.arange(y)] = False
        block = value_bts[b, :x, :y]
        block[hit] = -np.inf


def mask_from_lengths(x_len, y_len, tokens, frames, dtype=np.float32):
    """Glow-TTS attention mask [B, T, S]: 1 where i < x_len and j < y_len."""
    i = np.arange(tokens)[None, :, None]
    j = np.arange(frames)[None, None, :]
    return ((i < np.asarray(x_len)[:, None, None]) & (j < np.asarray(y_len)[:, None, None])).astype(dtype)
