"""Long-form alignment within a workspace budget (max_workspace_bytes on
align, viterbi, forced_align): below the unbounded size the CPU runs the
checkpointed algorithm, whose results must equal the unbounded run's bit for
bit and the plain reference's (reference.py); a budget below the smallest
that works raises ValueError stating it; bad budgets raise TypeError /
ValueError naming the argument."""

import re

import numpy as np
import pytest

import libmas
from libmas import _C
import reference
from test_topology import ctc_inputs, random_topology


def _minimum(fn):
    """The smallest budget, read from the ValueError a budget of 0 raises."""
    with pytest.raises(ValueError, match="max_workspace_bytes=0 is below") as info:
        fn(0)
    return int(re.search(r"needs on the CPU: (\d+) bytes", str(info.value)).group(1))


def _budgets(rng, minimum, full):
    if minimum >= full:  # nothing to save on this shape (many threads: the team's share)
        return [full, full * 2]
    return sorted({b for b in (minimum, minimum + 1, int(rng.integers(minimum, full)),
                               (minimum + full) // 2, full - 1, full, full * 2) if b >= minimum})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_align_budgets_equal_unbounded(rng, dtype):
    for _ in range(4):
        B = int(rng.integers(1, 4))
        T = int(rng.integers(1, 60))
        S = T + int(rng.integers(0, 900))
        v = rng.choice(np.arange(-3, 3.5, 0.5), size=(B, T, S)).astype(dtype)  # ties
        y = rng.integers(1, S + 1, B)
        x = np.array([rng.integers(1, min(T, yb) + 1) for yb in y])
        ref = reference.hard_mas(v, x, y)
        threads = int(rng.integers(1, 4))
        code = {np.float32: _C.FLOAT32, np.float64: _C.FLOAT64, np.float16: _C.FLOAT16}[dtype]
        full = _C.hard_cpu_workspace_size(B, T, S, code, threads)
        base = libmas.align(v, x, y, threads=threads)
        minimum = _minimum(lambda n: libmas.align(v, x, y, threads=threads,
                                                  max_workspace_bytes=n))
        assert minimum == _C.hard_cpu_min_workspace_size(B, T, S, code, threads) <= full
        for budget in _budgets(rng, minimum, full):
            r = libmas.align(v, x, y, threads=threads, max_workspace_bytes=budget)
            np.testing.assert_array_equal(r.durations, base.durations)
            np.testing.assert_array_equal(r.indices, base.indices)
            assert r.score.tobytes() == base.score.tobytes()
            np.testing.assert_array_equal(r.durations, ref.durations)
            np.testing.assert_array_equal(r.indices, ref.indices)
            np.testing.assert_array_equal(r.score, ref.score.astype(r.score.dtype))


def test_align_long_item_small_budget(rng):
    """One item many segments long, within a small fraction of the
    unbounded workspace."""
    T, S = 300, 6000
    v = rng.standard_normal((1, T, S)).astype(np.float32)
    full = _C.hard_cpu_workspace_size(1, T, S, _C.FLOAT32, 1)
    minimum = _C.hard_cpu_min_workspace_size(1, T, S, _C.FLOAT32, 1)
    assert minimum < full // 5
    a = libmas.align(v, [T], [S], threads=1)
    b = libmas.align(v, [T], [S], threads=1, max_workspace_bytes=minimum)
    np.testing.assert_array_equal(a.durations, b.durations)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert a.score.tobytes() == b.score.tobytes()
    with pytest.raises(ValueError, match=f"below the smallest workspace .*: {minimum} bytes"):
        libmas.align(v, [T], [S], max_workspace_bytes=minimum - 1)


def test_align_torch_and_registered_op(rng, torch):
    T, S = 40, 700
    v = torch.from_numpy(rng.standard_normal((2, T, S)).astype(np.float32))
    x, y = torch.tensor([T, 17]), torch.tensor([S, 500])
    base = libmas.align(v, x, y)
    minimum = _C.hard_cpu_min_workspace_size(2, T, S, _C.FLOAT32, 0)
    r = libmas.align(v, x, y, max_workspace_bytes=minimum)
    assert torch.equal(r.durations, base.durations) and torch.equal(r.indices, base.indices)
    assert torch.equal(r.score, base.score)
    from libmas import _ops
    old = _ops.ALWAYS
    _ops.ALWAYS = True  # through torch.ops.libmas.align
    try:
        r = libmas.align(v, x, y, max_workspace_bytes=minimum)
        assert torch.equal(r.durations, base.durations)
        with pytest.raises(ValueError, match="max_workspace_bytes=1 is below"):
            libmas.align(v, x, y, max_workspace_bytes=1)
    finally:
        _ops.ALWAYS = old


def _tts(rng, B, T, S, D, dtype):
    z = rng.uniform(-2, 2, (B, D, S)).astype(dtype)
    mean = rng.uniform(-2, 2, (B, D, T)).astype(dtype)
    log_std = rng.uniform(-1, 0.5, (B, D, T)).astype(dtype)
    y = rng.integers(1, S + 1, B)
    x = np.array([rng.integers(1, min(T, yb) + 1) for yb in y])
    return z, mean, log_std, x, y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_align_gaussian_budgets_equal_unbounded(rng, dtype):
    """The fused op long-form: the same bits as unbounded, and as align on
    the materialised likelihood."""
    for _ in range(3):
        B, T, D = int(rng.integers(1, 4)), int(rng.integers(1, 50)), int(rng.integers(1, 9))
        S = T + int(rng.integers(0, 700))
        z, mean, log_std, x, y = _tts(rng, B, T, S, D, dtype)
        threads = int(rng.integers(1, 4))
        base = libmas.align_gaussian(z, mean, log_std, x, y, threads=threads)
        ref = libmas.align(libmas.gaussian_loglik(z, mean, log_std, x, y), x, y)
        np.testing.assert_array_equal(base.indices, ref.indices)
        minimum = _minimum(lambda n: libmas.align_gaussian(z, mean, log_std, x, y,
                                                           threads=threads,
                                                           max_workspace_bytes=n))
        full = minimum * 4  # any budget above the minimum must give the same bits
        for budget in sorted({minimum, minimum + 1, (minimum * 3) // 2, full}):
            r = libmas.align_gaussian(z, mean, log_std, x, y, threads=threads,
                                      max_workspace_bytes=budget)
            np.testing.assert_array_equal(r.durations, base.durations)
            np.testing.assert_array_equal(r.indices, base.indices)
            assert r.score.tobytes() == base.score.tobytes()


def test_align_gaussian_long_item_budget(rng, torch):
    """One long item in a fraction of the unbounded workspace; through the
    registered op too."""
    T, S, D = 200, 5000, 8
    z, mean, log_std, _, _ = _tts(rng, 1, T, S, D, np.float32)
    z, mean, log_std = (torch.from_numpy(a) for a in (z, mean, log_std))
    base = libmas.align_gaussian(z, mean, log_std, threads=1)
    minimum = _minimum(lambda n: libmas.align_gaussian(z, mean, log_std, threads=1,
                                                       max_workspace_bytes=n))
    r = libmas.align_gaussian(z, mean, log_std, threads=1, max_workspace_bytes=minimum)
    assert torch.equal(r.durations, base.durations) and torch.equal(r.indices, base.indices)
    assert torch.equal(r.score, base.score)
    from libmas import _ops
    old = _ops.ALWAYS
    _ops.ALWAYS = True  # through torch.ops.libmas.align_gaussian
    try:
        r = libmas.align_gaussian(z, mean, log_std, threads=1, max_workspace_bytes=minimum)
        assert torch.equal(r.indices, base.indices)
        with pytest.raises(ValueError, match="max_workspace_bytes=1 is below"):
            libmas.align_gaussian(z, mean, log_std, threads=1, max_workspace_bytes=1)
    finally:
        _ops.ALWAYS = old
    with pytest.raises(TypeError, match="libmas.align_gaussian: max_workspace_bytes"):
        libmas.align_gaussian(z, mean, log_std, max_workspace_bytes=2.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forced_align_budgets_equal_unbounded(rng, dtype):
    for _ in range(3):
        B, S, V, L = int(rng.integers(1, 4)), int(rng.integers(40, 700)), 7, 30
        lp, tg, il, tl = ctc_inputs(rng, B, S, V, L, dtype=dtype)
        base = libmas.forced_align(lp, tg, il, tl)
        minimum = _minimum(lambda n: libmas.forced_align(lp, tg, il, tl, max_workspace_bytes=n))
        for budget in sorted({minimum, minimum + 64, 4 * minimum, 1 << 40}):
            r = libmas.forced_align(lp, tg, il, tl, max_workspace_bytes=budget)
            for name in ("frame_labels", "token_spans", "state_ids"):
                np.testing.assert_array_equal(getattr(r, name), getattr(base, name))
            assert r.score.tobytes() == base.score.tobytes()
            assert r.token_scores.tobytes() == base.token_scores.tobytes()


@pytest.mark.parametrize("k,kind,gathered", [(1, "plain", False), (2, "skips", False),
                                             (3, "plain", True), (2, "blanks", True)])
def test_viterbi_budgets_equal_unbounded(rng, k, kind, gathered):
    blank = 0 if kind == "blanks" else None
    topo = random_topology(rng, k, blank, kind == "skips")
    B, L, V = 2, 12, 6
    n = topo.states(L)
    S = n + int(rng.integers(0, 500))
    labels = rng.integers(1, V, (B, L * k))
    e = (rng.standard_normal((B, S, V)) if gathered else rng.standard_normal((B, n, S)))
    tl = np.array([L, int(rng.integers(1, L + 1))])
    fl = np.array([S, S - int(rng.integers(0, S - n + 1))])
    kw = dict(labels=labels if (gathered or blank is not None) else None,
              gathered=gathered)
    base = libmas.viterbi(e, tl, fl, topo, **kw)
    minimum = _minimum(lambda m: libmas.viterbi(e, tl, fl, topo, max_workspace_bytes=m, **kw))
    for budget in (minimum, 2 * minimum + 7):
        r = libmas.viterbi(e, tl, fl, topo, max_workspace_bytes=budget, **kw)
        np.testing.assert_array_equal(r.state_ids, base.state_ids)
        np.testing.assert_array_equal(r.token_spans, base.token_spans)
        assert r.score.tobytes() == base.score.tobytes()


def test_bad_budgets(rng):
    v = rng.standard_normal((1, 3, 8)).astype(np.float32)
    for bad in (1.5, "100", True):
        with pytest.raises(TypeError, match="max_workspace_bytes"):
            libmas.align(v, [3], [8], max_workspace_bytes=bad)
    with pytest.raises(ValueError, match="max_workspace_bytes must be >= 0"):
        libmas.align(v, [3], [8], max_workspace_bytes=-1)
    lp, tg, il, tl = ctc_inputs(rng, 1, 20, 5, 4)
    with pytest.raises(TypeError, match="libmas.forced_align: max_workspace_bytes"):
        libmas.forced_align(lp, tg, il, tl, max_workspace_bytes=2.0)
    # a budget above the unbounded size is simply the unbounded run
    r = libmas.align(v, [3], [8], max_workspace_bytes=1 << 40)
    assert r.durations.sum() == 8
