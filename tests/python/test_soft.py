"""Soft alignment from Python: forward-sum, posterior and monotonic attention
against float64 references written from the formulas (plain loops), brute
force on tiny sizes, torch.autograd.gradcheck (float64 finite differences),
and hard MAS for the max-plus limit. Seeds come from the conftest fixtures
and are printed."""

import itertools
import math

import numpy as np
import pytest
from conftest import random_lengths, sprinkle_neg_inf

import libmas

NINF = -math.inf


# ---------------------------------------------------------------------------
# References (float64, plain loops over the formulas)
# ---------------------------------------------------------------------------


def lse(a, b):
    hi, lo = max(a, b), min(a, b)
    return hi if hi == NINF else hi + math.log1p(math.exp(lo - hi))


def log_sig(x):
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


def ref_forward_sum(v, x, y):
    """(log_z, gamma [x, y]) for one item v [T, S] (only the band is read)."""
    def cell(i, j):
        return v[i, j] if j - (y - x) <= i <= j else NINF

    al = np.full((x, y), NINF)
    be = np.full((x, y), NINF)
    for j in range(y):
        for i in range(x):
            stay = al[i, j - 1] if j > 0 else NINF
            move = al[i - 1, j - 1] if i > 0 and j > 0 else (0.0 if i == j == 0 else NINF)
            al[i, j] = lse(stay, move) + cell(i, j)
    for j in reversed(range(y)):
        for i in reversed(range(x)):
            stay = be[i, j + 1] if j < y - 1 else NINF
            last = i == x - 1 and j == y - 1
            move = be[i + 1, j + 1] if i < x - 1 and j < y - 1 else (0.0 if last else NINF)
            be[i, j] = lse(stay, move) + cell(i, j)
    log_z = al[x - 1, y - 1]
    gamma = np.zeros((x, y))
    for i in range(x):
        for j in range(y):
            if al[i, j] > NINF and be[i, j] > NINF:
                gamma[i, j] = math.exp(al[i, j] + be[i, j] - cell(i, j) - log_z)
    return log_z, gamma


def ref_attention(kind, xs, n, m):
    """log phi [n, m] of one item's logits xs (formulas of mas.h)."""
    lp = np.full((n, m), NINF)
    for i in range(n):
        for j in range(m):
            if i == j == 0:
                lp[i, j] = 0.0
            elif kind == "one":
                if i > 0:
                    stay = lp[i - 1, j] + log_sig(xs[i - 1, j])
                    move = lp[i - 1, j - 1] + log_sig(-xs[i - 1, j - 1]) if j > 0 else NINF
                    lp[i, j] = lse(stay, move)
            else:
                right = lp[i, j - 1] + log_sig(xs[i, j - 1]) if j > 0 else NINF
                down = lp[i - 1, j] + log_sig(-xs[i - 1, j]) if i > 0 else NINF
                lp[i, j] = lse(right, down)
    return lp


def brute_m2m(xs, i, j):
    """phi(i, j) as the sum over every right/down path of its probability."""
    total = 0.0
    for downs in itertools.combinations(range(i + j), i):
        r = c = 0
        p = 1.0
        for k in range(i + j):
            s = 1 / (1 + math.exp(-xs[r, c]))
            if k in downs:
                p *= 1 - s
                r += 1
            else:
                p *= s
                c += 1
        total += p
    return total


def brute_forward_sum(v, x, y):
    total = NINF
    for ups in itertools.combinations(range(1, y), x - 1):
        i, s = 0, v[0, 0]
        for j in range(1, y):
            i += j in ups
            s += v[i, j]
        total = lse(total, s)
    return total


ATTENTION = {"one": libmas.monotonic_attention, "m2m": libmas.monotonic_attention_m2m}


def tol(dtype):
    return 1e-10 if dtype == np.float64 else 2e-4


# ---------------------------------------------------------------------------
# Forward-sum and posterior
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("layout", ["bts", "bst"])
def test_forward_sum_and_posterior_numpy(rng, dtype, layout):
    for _ in range(6):
        B, T, S = int(rng.integers(1, 4)), int(rng.integers(1, 20)), int(rng.integers(1, 40))
        x_len, y_len = random_lengths(rng, B, T, S)
        v = rng.uniform(-3, 1, size=(B, T, S)).astype(dtype)
        if rng.random() < 0.5:
            sprinkle_neg_inf(rng, v, x_len, y_len)
        arg = v.transpose(0, 2, 1) if layout == "bst" else v
        log_z = libmas.forward_sum(arg, x_len, y_len, layout=layout)
        gamma = libmas.posterior(arg, x_len, y_len, layout=layout)
        acc = np.float64 if dtype == np.float64 else np.float32
        assert log_z.dtype == acc and gamma.dtype == acc
        assert gamma.shape == arg.shape
        if layout == "bst":
            gamma = gamma.transpose(0, 2, 1)
        for b in range(B):
            x, y = int(x_len[b]), int(y_len[b])
            want_z, want_g = ref_forward_sum(v[b].astype(np.float64), x, y)
            assert abs(log_z[b] - want_z) <= tol(dtype) * (1 + abs(want_z)) * math.sqrt(x + y)
            np.testing.assert_allclose(gamma[b, :x, :y], want_g, atol=tol(dtype) * 3, rtol=0)
            assert not gamma[b, x:, :].any() and not gamma[b, :, y:].any()
            np.testing.assert_allclose(gamma[b, :, :y].sum(0), 1.0, atol=tol(dtype) * 10)


def test_forward_sum_brute_force(rng):
    for _ in range(20):
        T, S = int(rng.integers(1, 6)), int(rng.integers(1, 9))
        x_len, y_len = random_lengths(rng, 1, T, S)
        v = rng.normal(size=(1, T, S))
        want = brute_forward_sum(v[0], int(x_len[0]), int(y_len[0]))
        got = libmas.forward_sum(v, x_len, y_len)[0]
        assert abs(got - want) <= 1e-12 * (1 + abs(want))


def test_forward_sum_gradient_is_posterior(rng, torch):
    B, T, S = 3, 9, 25
    x_len, y_len = random_lengths(rng, B, T, S)
    v = torch.tensor(rng.normal(size=(B, T, S)), requires_grad=True)
    w = torch.tensor(rng.uniform(0.5, 2, size=B))
    (libmas.forward_sum(v, x_len, y_len) * w).sum().backward()
    gamma = libmas.posterior(v.detach(), x_len, y_len)
    torch.testing.assert_close(v.grad, gamma * w[:, None, None], rtol=0, atol=1e-12)
    for b in range(B):
        sums = gamma[b, :, : int(y_len[b])].sum(0)
        torch.testing.assert_close(sums, torch.ones_like(sums), rtol=0, atol=1e-12)


@pytest.mark.parametrize("layout", ["bts", "bst"])
def test_forward_sum_gradcheck(rng, torch, layout):
    B, T, S = 2, 4, 7
    x_len, y_len = random_lengths(rng, B, T, S)
    v = torch.tensor(rng.normal(size=(B, T, S)))
    if layout == "bst":
        v = v.transpose(1, 2).contiguous()
    v.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda t: libmas.forward_sum(t, x_len, y_len, layout=layout), (v,), eps=1e-6, atol=1e-8)


def test_forward_sum_max_plus_limit(rng):
    """tau * log_z(v / tau) -> hard MAS's score, within tau * log(#paths)."""
    B, T, S = 4, 30, 80
    x_len, y_len = random_lengths(rng, B, T, S)
    v = rng.uniform(-3, 1, size=(B, T, S))
    score = libmas.align(v, x_len, y_len).score
    for tau in (1e-1, 1e-3, 1e-5):
        gap = tau * libmas.forward_sum(v / tau, x_len, y_len) - score
        bound = tau * (y_len - 1) * math.log(2) + 1e-9 * (1 + np.abs(score))
        assert np.all(gap >= -1e-9 * (1 + np.abs(score))) and np.all(gap <= bound), (tau, gap)


def test_forward_sum_neg_inf_no_nan(rng, torch):
    B, T, S = 3, 40, 100
    x_len, y_len = random_lengths(rng, B, T, S)
    v = rng.uniform(-3, 1, size=(B, T, S)).astype(np.float32)
    sprinkle_neg_inf(rng, v, x_len, y_len, fraction=0.7)
    vt = torch.tensor(v, requires_grad=True)
    log_z = libmas.forward_sum(vt, x_len, y_len)
    log_z.sum().backward()
    assert torch.isfinite(log_z).all()
    assert not torch.isnan(vt.grad).any()
    assert (vt.grad[torch.isinf(vt.detach())] == 0).all()


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_forward_sum_half_inputs(rng, torch, name):
    dtype = getattr(torch, name)
    B, T, S = 2, 10, 30
    x_len, y_len = random_lengths(rng, B, T, S)
    v = torch.tensor(rng.uniform(-3, 1, size=(B, T, S))).to(dtype).requires_grad_(True)
    log_z = libmas.forward_sum(v, x_len, y_len)
    assert log_z.dtype == torch.float32
    # float16/bfloat16 widen exactly, so the float32 call does the same arithmetic
    torch.testing.assert_close(log_z.detach(), libmas.forward_sum(v.detach().float(), x_len, y_len),
                               rtol=0, atol=0)
    log_z.sum().backward()
    assert v.grad.dtype == dtype


def test_forward_sum_errors(rng):
    v = rng.normal(size=(3, 4, 6)).astype(np.float32)
    with pytest.raises(ValueError, match="item 1"):
        libmas.forward_sum(v, [2, 5, 2], [6, 6, 6])
    with pytest.raises(ValueError, match="item 2"):
        libmas.forward_sum(v, [2, 2, 4], [6, 6, 3])
    bad = v.copy()
    bad[0, 1, 2] = np.nan
    with pytest.raises(ValueError, match="item 0"):
        libmas.posterior(bad, [3, 3, 3], [6, 6, 6])
    bad = v.copy()
    bad[1, :, 3] = -np.inf
    with pytest.raises(ValueError, match="item 1.*no finite path"):
        libmas.forward_sum(bad, [3, 3, 3], [6, 6, 6])
    with pytest.raises(TypeError):
        libmas.forward_sum(v.astype(np.int32), [3, 3, 3], [6, 6, 6])
    with pytest.raises(ValueError):
        libmas.forward_sum(v, [3, 3, 3], [6, 6, 6], layout="tbs")
    with pytest.raises(ValueError):
        libmas.forward_sum(v, [3, 3], [6, 6])


# ---------------------------------------------------------------------------
# Monotonic attention
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["one", "m2m"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_attention_values(rng, kind, dtype):
    for k in range(6):
        B, N, M = int(rng.integers(1, 4)), int(rng.integers(1, 30)), int(rng.integers(1, 30))
        xs = rng.uniform(-4, 4, size=(B, N, M)).astype(dtype)
        given = k % 3 != 0
        n = rng.integers(1, N + 1, size=B) if given else None
        m = rng.integers(1, M + 1, size=B) if given else None
        if k % 3 == 1:
            xs = np.asfortranarray(xs)  # any strides
        lp = ATTENTION[kind](xs, n, m)
        assert lp.dtype == (np.float64 if dtype == np.float64 else np.float32)
        for b in range(B):
            nb = int(n[b]) if given else N
            mb = int(m[b]) if given else M
            want = ref_attention(kind, xs[b].astype(np.float64), nb, mb)
            finite = np.isfinite(want)
            assert np.array_equal(np.isfinite(lp[b, :nb, :mb]), finite)
            np.testing.assert_allclose(lp[b, :nb, :mb][finite], want[finite],
                                       rtol=tol(dtype) * 5, atol=tol(dtype) * 5)
            assert np.all(lp[b, nb:, :] == NINF) and np.all(lp[b, :, mb:] == NINF)


def test_m2m_brute_force(rng):
    for _ in range(10):
        N, M = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        xs = rng.normal(scale=2, size=(1, N, M))
        phi = np.exp(libmas.monotonic_attention_m2m(xs)[0])
        for i in range(N):
            for j in range(M):
                assert abs(phi[i, j] - brute_m2m(xs[0], i, j)) <= 1e-13


@pytest.mark.parametrize("kind", ["one", "m2m"])
def test_attention_gradcheck(rng, torch, kind):
    B, N, M = 2, 5, 6
    n = torch.tensor(rng.integers(1, N + 1, size=B))
    m = torch.tensor(rng.integers(1, M + 1, size=B))
    xs = torch.tensor(rng.normal(scale=2, size=(B, N, M)), requires_grad=True)
    finite = torch.isfinite(ATTENTION[kind](xs.detach(), n, m))

    def f(t):
        # -inf cells are constants; compare the finite ones only
        return ATTENTION[kind](t, n, m).masked_fill(~finite, 0.0)

    assert torch.autograd.gradcheck(f, (xs,), eps=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind", ["one", "m2m"])
def test_attention_gradient_masking(rng, torch, kind):
    B, N, M = 3, 20, 17
    n = rng.integers(1, N + 1, size=B)
    m = rng.integers(1, M + 1, size=B)
    xs = torch.tensor(rng.normal(size=(B, N, M)), dtype=torch.float32, requires_grad=True)
    lp = ATTENTION[kind](xs, n, m)
    g = torch.tensor(rng.normal(size=(B, N, M)), dtype=torch.float32)
    (lp.masked_fill(torch.isinf(lp), 0) * g).sum().backward()
    for b in range(B):
        assert (xs.grad[b, n[b]:, :] == 0).all() and (xs.grad[b, :, m[b]:] == 0).all()
    # float32 gradient against the float64 one
    x64 = xs.detach().double().requires_grad_(True)
    lp64 = ATTENTION[kind](x64, n, m)
    (lp64.masked_fill(torch.isinf(lp64), 0) * g.double()).sum().backward()
    torch.testing.assert_close(xs.grad.double(), x64.grad, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("kind", ["one", "m2m"])
@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_attention_extremes_no_nan(rng, torch, kind, name):
    dtype = getattr(torch, name)
    B, N, M = 2, 40, 50
    r = rng.random((B, N, M))
    base = rng.normal(size=(B, N, M))
    xs = np.where(r < 0.3, 1e4, np.where(r < 0.6, -1e4, np.where(r < 0.7, -np.inf, base)))
    xt = torch.tensor(xs).to(dtype).requires_grad_(True)
    lp = ATTENTION[kind](xt)
    assert lp.dtype == torch.float32
    assert not torch.isnan(lp).any()
    lp.masked_fill(torch.isinf(lp), 0).sum().backward()
    assert xt.grad.dtype == dtype
    assert torch.isfinite(xt.grad.float()).all()
    # every cell: the upstream gradient of a -inf cell must not make NaN either
    xt.grad = None
    ATTENTION[kind](xt).backward(torch.ones(B, N, M))
    assert torch.isfinite(xt.grad.float()).all()


def test_attention_half_inputs_match_float32(rng, torch):
    xs = torch.tensor(rng.normal(size=(2, 12, 15))).to(torch.bfloat16)
    for f in ATTENTION.values():
        torch.testing.assert_close(f(xs), f(xs.float()), rtol=0, atol=0)


def test_attention_errors(rng):
    xs = rng.normal(size=(3, 5, 6)).astype(np.float32)
    for f in ATTENTION.values():
        with pytest.raises(ValueError, match="item 1"):
            f(xs, [5, 0, 5], None)
        with pytest.raises(ValueError, match="item 2"):
            f(xs, None, [6, 6, 7])
        bad = xs.copy()
        bad[2, 1, 1] = np.nan
        with pytest.raises(ValueError, match="item 2"):
            f(bad)
        with pytest.raises(TypeError):
            f(xs.astype(np.int64))
        with pytest.raises(ValueError):
            f(xs[0])


def test_numpy_inputs_give_numpy(rng):
    xs = rng.normal(size=(2, 4, 5)).astype(np.float32)
    assert isinstance(libmas.monotonic_attention(xs), np.ndarray)
    assert isinstance(libmas.forward_sum(xs, [2, 3], [5, 4]), np.ndarray)


# ---------------------------------------------------------------------------
# CUDA against the CPU (skipped without a GPU)
# ---------------------------------------------------------------------------


def _cuda_ready(torch):
    return libmas.has_cuda() and torch.cuda.is_available()


@pytest.mark.parametrize("kind", ["one", "m2m"])
def test_attention_cuda_matches_cpu(rng, torch, kind):
    if not _cuda_ready(torch):
        pytest.skip("no CUDA")
    B, N, M = 3, 300, 200
    n = torch.tensor(rng.integers(1, N + 1, size=B))
    m = torch.tensor(rng.integers(1, M + 1, size=B))
    xs = torch.tensor(rng.normal(size=(B, N, M)), dtype=torch.float32)
    g = torch.tensor(rng.normal(size=(B, N, M)), dtype=torch.float32)
    out = {}
    for dev in ("cpu", "cuda"):
        x = xs.to(dev).requires_grad_(True)
        lp = ATTENTION[kind](x, n.to(dev), m.to(dev))
        (lp.masked_fill(torch.isinf(lp), 0) * g.to(dev)).sum().backward()
        out[dev] = (lp.detach().cpu(), x.grad.cpu())
    libmas.check_errors()
    torch.testing.assert_close(out["cuda"][0], out["cpu"][0], rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(out["cuda"][1], out["cpu"][1], rtol=1e-3, atol=1e-3)


def test_forward_sum_cuda_matches_cpu(rng, torch):
    if not _cuda_ready(torch):
        pytest.skip("no CUDA")
    B, T, S = 4, 100, 400
    x_len, y_len = random_lengths(rng, B, T, S)
    v = torch.tensor(rng.uniform(-3, 1, size=(B, T, S)), dtype=torch.float32)
    out = {}
    for dev in ("cpu", "cuda"):
        vt = v.to(dev).requires_grad_(True)
        lz = libmas.forward_sum(vt, torch.tensor(x_len).to(dev), torch.tensor(y_len).to(dev))
        lz.sum().backward()
        out[dev] = (lz.detach().cpu(), vt.grad.cpu())
    libmas.check_errors()
    torch.testing.assert_close(out["cuda"][0], out["cpu"][0], rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(out["cuda"][1], out["cpu"][1], rtol=0, atol=1e-4)
