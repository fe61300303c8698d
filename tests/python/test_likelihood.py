"""Likelihoods (libmas.GMM, gmm_loglik, gaussian_loglik) on NumPy and PyTorch
CPU arrays, against independent float64 references written from the
formulas: the direct form sum((x - mu)^2 / var) (not the expansion the
library uses) with a log-sum-exp over each state, and Glow-TTS's four-term
logp; gradients by torch.autograd.gradcheck in float64."""

import math

import numpy as np
import pytest

import libmas
from conftest import mask_from_lengths

LOG_2PI = math.log(2 * math.pi)


# ---------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------


def gauss_scores(x, mu, var, lw):
    """[..., M] log w + log N(x; mu, var) in float64, direct form."""
    x = np.asarray(x, np.float64)
    d = x[..., None, :] - mu
    return lw - 0.5 * (LOG_2PI + np.log(var) + d * d / var).sum(-1)


def gmm_reference(x, mu, var, lw, sizes, best=False):
    sc = gauss_scores(x, np.asarray(mu, np.float64), np.asarray(var, np.float64),
                      np.asarray(lw, np.float64))
    off = np.concatenate([[0], np.cumsum(sizes)])
    outs, idx = [], []
    for s in range(len(sizes)):
        seg = sc[..., off[s]:off[s + 1]]
        if best:
            outs.append(seg.max(-1))
            idx.append(seg.argmax(-1) + off[s])
        else:
            hi = seg.max(-1, keepdims=True)
            hi = np.where(hi == -np.inf, 0.0, hi)  # a state of weight 0 scores -inf
            with np.errstate(divide="ignore"):
                outs.append(hi[..., 0] + np.log(np.exp(seg - hi).sum(-1)))
    out = np.stack(outs, -1)
    return (out, np.stack(idx, -1)) if best else out


def glow_tts_logp(z, m, logs):
    """Glow-TTS models.py, in float64 NumPy: [B, T, S]."""
    z, m, logs = (np.asarray(a, np.float64) for a in (z, m, logs))
    s_p_sq_r = np.exp(-2 * logs)
    logp1 = np.sum(-0.5 * LOG_2PI - logs, 1)[:, :, None]
    logp2 = np.matmul(s_p_sq_r.transpose(0, 2, 1), -0.5 * (z ** 2))
    logp3 = np.matmul((m * s_p_sq_r).transpose(0, 2, 1), z)
    logp4 = np.sum(-0.5 * (m ** 2) * s_p_sq_r, 1)[:, :, None]
    return logp1 + logp2 + logp3 + logp4


def tts_direct_logp(z, m, logs, x_len, y_len):
    """The direct form, float64 NumPy: [B, T, S], 0 beyond the lengths.
    logp[b,t,s] = sum_d -log(2 pi)/2 - logs[b,d,t]
                        - (z[b,d,s] - m[b,d,t])^2 / (2 exp(2 logs[b,d,t]))"""
    z, m, logs = (np.asarray(a, np.float64) for a in (z, m, logs))
    d = z[:, :, None, :] - m[:, :, :, None]  # [B, D, T, S]
    var = np.exp(2 * logs)[:, :, :, None]
    out = (-0.5 * LOG_2PI - logs[:, :, :, None] - d * d / (2 * var)).sum(1)
    return np.where(mask_from_lengths(x_len, y_len, *out.shape[1:]) > 0, out, 0.0)


def random_model(rng, states, max_mix, dim, dtype=np.float64):
    sizes = [1 if rng.random() < 0.3 else int(rng.integers(1, max_mix + 1))
             for _ in range(states)]
    m = sum(sizes)
    mu = rng.uniform(-1.5, 1.5, (m, dim)).astype(dtype)
    var = rng.uniform(0.4, 2.5, (m, dim)).astype(dtype)
    lw = rng.uniform(-4, 0, m).astype(dtype)
    return mu, var, lw, sizes


def rel_err(got, want):
    got = np.asarray(got, np.float64)
    same = got == want  # equal infinities included
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(got - want) / (1 + np.abs(want)))
    return float(np.max(err)) if want.size else 0.0


def as_f64(a):
    if hasattr(a, "detach"):
        return a.detach().double().cpu().numpy()
    return np.asarray(a, np.float64)


# ---------------------------------------------------------------------------
# GMM, NumPy
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_gmm_numpy_matches_direct_reference(rng, dtype):
    for _ in range(6):
        dim = int(rng.integers(1, 40))
        mu, var, lw, sizes = random_model(rng, int(rng.integers(1, 30)),
                                          int(rng.choice([1, 4, 16, 200])), dim)
        x = rng.uniform(-2.5, 2.5, (int(rng.integers(1, 90)), dim)).astype(dtype)
        x_before = x.copy()
        model = libmas.GMM(mu, var, lw, sizes)
        out = model.loglik(x)
        assert out.dtype == (np.float64 if dtype == np.float64 else np.float32)
        assert out.shape == (x.shape[0], len(sizes))
        want = gmm_reference(x, mu, var, lw, sizes)
        assert rel_err(out, want) <= (1e-10 if dtype == np.float64 else 1e-4)
        np.testing.assert_array_equal(x, x_before)


def test_gmm_attributes_and_functional_form(rng):
    mu, var, lw, sizes = random_model(rng, 7, 5, 3, np.float32)
    model = libmas.GMM(mu, var, lw, sizes)
    assert model.n_states == 7 and model.n_gaussians == sum(sizes) and model.dim == 3
    assert model.coef.shape == (7, sum(sizes)) and model.coef.dtype == np.float32
    np.testing.assert_array_equal(model.offsets, np.concatenate([[0], np.cumsum(sizes)]))
    # coef rows: K, mu/var, -1/(2 var)
    np.testing.assert_allclose(model.coef[1:4], (mu / var).T, rtol=1e-6)
    np.testing.assert_allclose(model.coef[4:7], (-0.5 / var).T, rtol=1e-6)
    x = rng.standard_normal((11, 3)).astype(np.float32)
    np.testing.assert_array_equal(libmas.gmm_loglik(x, mu, var, lw, sizes), model.loglik(x))


def test_gmm_batched_and_strided_views(rng):
    mu, var, lw, sizes = random_model(rng, 9, 6, 5)
    model = libmas.GMM(mu, var, lw, sizes)
    base = rng.standard_normal((3, 40, 12))
    views = [base[:, ::2, 3:8], base[::-1, 5:25, 7:12], base.transpose(1, 0, 2)[:, :, :5],
             np.asfortranarray(base[0, :, :5])]
    for x in views:
        out = model.loglik(x)
        assert out.shape == x.shape[:-1] + (9,)
        assert rel_err(out, gmm_reference(x, mu, var, lw, sizes)) <= 1e-10
    # read-only input
    ro = base[0, :, :5].copy()
    ro.setflags(write=False)
    assert rel_err(model.loglik(ro), gmm_reference(ro, mu, var, lw, sizes)) <= 1e-10


def test_gmm_large_mixtures_cross_chunks(rng):
    sizes = [1, 300, 2, 513, 7]
    m = sum(sizes)
    mu = rng.uniform(-1, 1, (m, 4))
    var = rng.uniform(0.5, 2, (m, 4))
    lw = rng.uniform(-3, 0, m)
    x = rng.standard_normal((37, 4))
    for dt in (np.float32, np.float64):
        out = libmas.gmm_loglik(x.astype(dt), mu, var, lw, sizes)
        assert rel_err(out, gmm_reference(x.astype(dt), mu, var, lw, sizes)) <= \
            (1e-4 if dt == np.float32 else 1e-10)
        best, idx = libmas.gmm_loglik(x.astype(dt), mu, var, lw, sizes, best=True)
        want, want_idx = gmm_reference(x.astype(dt), mu, var, lw, sizes, best=True)
        assert rel_err(best, want) <= (1e-4 if dt == np.float32 else 1e-10)
        np.testing.assert_array_equal(idx, want_idx)


def test_gmm_best_is_the_max_and_its_gaussian(rng):
    mu, var, lw, sizes = random_model(rng, 20, 9, 6)
    x = rng.standard_normal((2, 30, 6))
    out, idx = libmas.gmm_loglik(x, mu, var, lw, sizes, best=True)
    assert idx.dtype == np.int32
    want, want_idx = gmm_reference(x, mu, var, lw, sizes, best=True)
    assert rel_err(out, want) <= 1e-10
    np.testing.assert_array_equal(idx, want_idx)
    off = np.concatenate([[0], np.cumsum(sizes)])
    assert np.all((idx >= off[:-1]) & (idx < off[1:]))


def test_gmm_zero_weight_gaussian_and_precision_names(rng):
    mu, var, lw, sizes = random_model(rng, 4, 3, 2)
    lw[0] = -np.inf
    x = rng.standard_normal((5, 2))
    out = libmas.gmm_loglik(x, mu, var, lw, sizes)
    assert rel_err(out, gmm_reference(x, mu, var, lw, sizes)) <= 1e-10
    for p in ("tf32", "bf16"):  # the CPU computes the default precision
        np.testing.assert_array_equal(libmas.gmm_loglik(x, mu, var, lw, sizes, precision=p), out)


def test_gmm_precision_on_standardised_data(rng):
    """The issue's rule: float32 within 1e-4 relative of the float64 direct
    form, J=36, 16 Gaussians per state."""
    states, mix, dim = 60, 16, 36
    mu = rng.standard_normal((states * mix, dim)) * 0.5
    var = rng.uniform(0.5, 1.5, (states * mix, dim))
    lw = np.full(states * mix, -math.log(mix))
    x = rng.standard_normal((100, dim)).astype(np.float32)
    out = libmas.gmm_loglik(x, mu.astype(np.float32), var.astype(np.float32),
                            lw.astype(np.float32), [mix] * states)
    want = gmm_reference(x, mu.astype(np.float32), var.astype(np.float32),
                         lw.astype(np.float32), [mix] * states)
    assert float(np.max(np.abs(out - want) / np.abs(want))) <= 1e-4


# ---------------------------------------------------------------------------
# GMM, PyTorch
# ---------------------------------------------------------------------------


def test_gmm_torch_dtypes(torch, rng):
    mu, var, lw, sizes = random_model(rng, 12, 5, 7)
    x = rng.standard_normal((2, 20, 7))
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        xt = torch.tensor(x).to(dt)
        model = libmas.GMM(torch.tensor(mu), torch.tensor(var), torch.tensor(lw),
                           torch.tensor(sizes))
        out = model.loglik(xt)
        assert isinstance(out, torch.Tensor)
        assert out.dtype == (torch.float64 if dt == torch.float64 else torch.float32)
        want = gmm_reference(as_f64(xt), mu, var, lw, sizes)
        assert rel_err(as_f64(out), want) <= (1e-10 if dt == torch.float64 else 1e-4)


def uneven_sizes(rng, states, max_mix):
    """Mixture sizes in [1, max_mix], at least one state of 1 and one larger."""
    sizes = [1, int(rng.integers(2, max_mix + 1))] + \
        [int(rng.integers(1, max_mix + 1)) for _ in range(states - 2)]
    return [int(v) for v in rng.permutation(sizes)]


@pytest.mark.parametrize("kind, param_dtype", [("numpy", "float16"), ("torch", "float16"),
                                               ("torch", "bfloat16")])
def test_gmm_half_precision_parameters(rng, request, kind, param_dtype):
    """Means, variances and log-weights in float16 / bfloat16 (NumPy has no
    bfloat16). The reference sees the same rounded parameters, converted
    exactly to float64, so only the library's arithmetic is measured."""
    if kind == "torch":
        torch = request.getfixturevalue("torch")
        half = getattr(torch, param_dtype)
        convert = lambda a, dt: torch.tensor(a).to(dt)  # noqa: E731
        copy, same = torch.clone, torch.equal
        # float64 frames: float64 arithmetic on the same model
        frame_tols = ((torch.float32, 1e-4), (torch.float64, 1e-10), (half, 1e-4))
    else:
        half = np.float16
        convert = lambda a, dt: a.astype(dt)  # noqa: E731
        copy, same = np.copy, np.array_equal
        frame_tols = ((np.float32, 1e-4), (np.float64, 1e-10), (half, 1e-4))
    rounding_seen = 0.0  # how far off the unrounded model would be
    for _ in range(4):
        dim = int(rng.integers(8, 40))
        sizes = uneven_sizes(rng, int(rng.integers(2, 25)), int(rng.choice([3, 16, 70])))
        m = sum(sizes)
        raw = [rng.uniform(-1.5, 1.5, (m, dim)), rng.uniform(0.4, 2.5, (m, dim)),
               rng.uniform(-4, 0, m)]
        params = [convert(a, half) for a in raw]
        exact = [as_f64(a) for a in params]  # the rounded values, exactly
        before = [copy(a) for a in params]
        model = libmas.GMM(*params, sizes)
        frames = rng.standard_normal((2, int(rng.integers(1, 40)), dim))
        for dt, tol in frame_tols:
            x = convert(frames, dt)
            x_before = copy(x)
            want = gmm_reference(as_f64(x), *exact, sizes)
            out = model.loglik(x)
            assert out.shape == want.shape
            assert rel_err(as_f64(out), want) <= tol
            assert rel_err(as_f64(libmas.gmm_loglik(x, *params, sizes)), want) <= tol
            assert same(x, x_before)
        for a, b0 in zip(params, before):
            assert same(a, b0)
        rounding_seen = max(rounding_seen, rel_err(as_f64(out), gmm_reference(as_f64(x), *raw,
                                                                              sizes)))
    if param_dtype == "bfloat16":
        # the check can fail: a model that ignored bfloat16's rounding would be off by more
        assert rounding_seen > 1e-4


def test_gmm_gradcheck(torch, rng):
    mu, var, lw, sizes = random_model(rng, 4, 4, 3)
    mu, var, lw = mu[:-1], var[:-1], lw[:-1]  # the last state loses a Gaussian...
    sizes = [1] + sizes[:-1] + ([sizes[-1] - 1] if sizes[-1] > 1 else [])  # ...one of 1 first
    mu = np.concatenate([mu[:0], rng.uniform(-1, 1, (1, 3)), mu])
    var = np.concatenate([rng.uniform(0.5, 2, (1, 3)), var])
    lw = np.concatenate([[-0.5], lw])
    x = rng.standard_normal((2, 5, 3))
    args = [torch.tensor(a, requires_grad=True) for a in (x, mu, var, lw)]
    f = lambda x_, m_, v_, w_: libmas.gmm_loglik(x_, m_, v_, w_, sizes)  # noqa: E731
    assert torch.autograd.gradcheck(f, args)
    g = lambda x_, m_, v_, w_: libmas.gmm_loglik(x_, m_, v_, w_, sizes, best=True)[0]  # noqa
    assert torch.autograd.gradcheck(g, args)
    # 2-D frames, gradient to x only
    x2 = torch.tensor(x[0], requires_grad=True)
    model = libmas.GMM(*(torch.tensor(a) for a in (mu, var, lw)), sizes)
    assert torch.autograd.gradcheck(lambda x_: model.loglik(x_), (x2,))


def test_gmm_backward_chunks_match_one_pass(torch, rng, monkeypatch):
    from libmas import likelihood

    mu, var, lw, sizes = random_model(rng, 30, 8, 4)
    x = rng.standard_normal((40, 4))

    def grads():
        args = [torch.tensor(a, requires_grad=True) for a in (x, mu, var, lw)]
        libmas.gmm_loglik(*args, sizes).sum().backward()
        return [a.grad.clone() for a in args]

    full = grads()
    monkeypatch.setattr(likelihood, "_GRAD_CHUNK_ELEMENTS", 64)
    chunked = grads()
    for a, b in zip(full, chunked):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_gmm_float32_grad_dtypes(torch, rng):
    mu, var, lw, sizes = random_model(rng, 5, 3, 3, np.float32)
    x = torch.tensor(rng.standard_normal((6, 3)), dtype=torch.bfloat16, requires_grad=True)
    m = torch.tensor(mu, requires_grad=True)
    out = libmas.gmm_loglik(x, m, torch.tensor(var), torch.tensor(lw), sizes)
    out.sum().backward()
    assert x.grad.dtype == torch.bfloat16 and m.grad.dtype == torch.float32


# ---------------------------------------------------------------------------
# Glow-TTS Gaussians
# ---------------------------------------------------------------------------


def tts_inputs(rng, b=3, d=6, t=7, s=19):
    z = rng.standard_normal((b, d, s))
    m = rng.standard_normal((b, d, t))
    logs = 0.4 * rng.standard_normal((b, d, t))
    return z, m, logs


@pytest.mark.parametrize("layout", ["bts", "bst"])
def test_gaussian_loglik_equals_glow_tts(rng, layout):
    z, m, logs = tts_inputs(rng)
    want = glow_tts_logp(z, m, logs)
    if layout == "bst":
        want = want.transpose(0, 2, 1)
    for dt, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        out = libmas.gaussian_loglik(z.astype(dt), m.astype(dt), logs.astype(dt), layout=layout)
        assert out.shape == want.shape and out.dtype == dt
        want_dt = glow_tts_logp(z.astype(dt), m.astype(dt), logs.astype(dt))
        if layout == "bst":
            want_dt = want_dt.transpose(0, 2, 1)
        assert rel_err(out, want_dt) <= tol


@pytest.mark.parametrize("layout", ["bts", "bst"])
def test_gaussian_loglik_direct_form_with_lengths(rng, layout):
    """Against the direct formula (not Glow-TTS's four terms), standardised
    frames, uneven lengths (one item full, one empty); the documented bound
    is 1e-4 relative for float32 arithmetic."""
    b, d, t, s = 4, int(rng.integers(20, 90)), int(rng.integers(5, 30)), int(rng.integers(30, 90))
    z = rng.standard_normal((b, d, s))
    m = 0.5 * rng.standard_normal((b, d, t))
    logs = 0.2 * rng.standard_normal((b, d, t))
    x_len = np.array([t, 0] + [int(rng.integers(1, t + 1)) for _ in range(b - 2)])
    y_len = np.array([s, int(rng.integers(0, s + 1))] +
                     [int(rng.integers(1, s + 1)) for _ in range(b - 2)])
    for dt, tol in ((np.float64, 1e-12), (np.float32, 1e-4)):
        args = [a.astype(dt) for a in (z, m, logs)]
        before = [a.copy() for a in args]
        out = libmas.gaussian_loglik(*args, x_len, y_len, layout=layout)
        assert out.dtype == dt
        got = np.asarray(out, np.float64)
        if layout == "bst":
            got = got.transpose(0, 2, 1)
        want = tts_direct_logp(*args, x_len, y_len)
        assert got.shape == want.shape == (b, t, s)
        inside = mask_from_lengths(x_len, y_len, t, s) > 0
        assert np.all(got[~inside] == 0)
        assert float(np.max(np.abs(got[inside] - want[inside]) / np.abs(want[inside]))) <= tol
        for a, b0 in zip(args, before):
            np.testing.assert_array_equal(a, b0)


def test_gaussian_loglik_lengths_and_views(torch, rng):
    z, m, logs = tts_inputs(rng, b=3, d=5, t=8, s=20)
    x_len = np.array([8, 3, 0])
    y_len = np.array([20, 11, 4])
    want = glow_tts_logp(z, m, logs)
    # z as a zero-copy view of a [B, S, D] tensor (VITS keeps frames first)
    zt = torch.tensor(z.transpose(0, 2, 1).copy()).transpose(1, 2)
    for layout in ("bts", "bst"):
        out = libmas.gaussian_loglik(zt, torch.tensor(m), torch.tensor(logs),
                                     torch.tensor(x_len), torch.tensor(y_len), layout=layout)
        o = as_f64(out)
        if layout == "bst":
            o = o.transpose(0, 2, 1)
        for b in range(3):
            xl, yl = x_len[b], y_len[b]
            assert rel_err(o[b, :xl, :yl], want[b, :xl, :yl]) <= 1e-12
            assert np.all(o[b, xl:, :] == 0) and np.all(o[b, :, yl:] == 0)


def test_gaussian_loglik_torch_dtypes_and_unmodified(torch, rng):
    z, m, logs = tts_inputs(rng)
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        args = [torch.tensor(a).to(dt) for a in (z, m, logs)]
        before = [a.clone() for a in args]
        out = libmas.gaussian_loglik(*args)
        assert out.dtype == torch.float32
        want = glow_tts_logp(*(as_f64(a) for a in args))
        assert rel_err(as_f64(out), want) <= 1e-5
        for a, b0 in zip(args, before):
            assert torch.equal(a, b0)


@pytest.mark.parametrize("layout", ["bts", "bst"])
def test_gaussian_loglik_gradcheck(torch, rng, layout):
    z, m, logs = tts_inputs(rng, b=2, d=3, t=4, s=6)
    args = [torch.tensor(a, requires_grad=True) for a in (z, m, logs)]
    x_len = torch.tensor([4, 2])
    y_len = torch.tensor([6, 3])
    f = lambda a, b, c: libmas.gaussian_loglik(a, b, c, x_len, y_len, layout=layout)  # noqa
    assert torch.autograd.gradcheck(f, args)
    assert torch.autograd.gradcheck(lambda a, b, c: libmas.gaussian_loglik(a, b, c), args)


def test_gaussian_loglik_masked_cells_get_no_gradient(torch, rng):
    z, m, logs = tts_inputs(rng, b=2, d=3, t=4, s=6)
    z[1, :, 3:] = np.nan  # padding that must not leak into any gradient
    args = [torch.tensor(a, requires_grad=True) for a in (z, m, logs)]
    out = libmas.gaussian_loglik(*args, torch.tensor([4, 2]), torch.tensor([6, 3]))
    assert not torch.isnan(out).any()
    out.sum().backward()
    for a in args:
        assert torch.isfinite(a.grad).all()
    assert torch.all(args[0].grad[1, :, 3:] == 0)
    assert torch.all(args[1].grad[1, :, 2:] == 0)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_gmm_errors(rng):
    mu, var, lw, sizes = random_model(rng, 3, 2, 2)
    m = len(lw)
    with pytest.raises(ValueError, match=r"libmas.GMM: variances must have the shape"):
        libmas.GMM(mu, var[:, :1], lw, sizes)
    with pytest.raises(ValueError, match=r"log_weights must have shape"):
        libmas.GMM(mu, var, lw[:-1], sizes)
    with pytest.raises(ValueError, match=r"means must have shape \[M, J\]"):
        libmas.GMM(mu[None], var, lw, sizes)
    with pytest.raises(ValueError, match=rf"mixture_sizes sum to {m + 1}"):
        libmas.GMM(mu, var, lw, list(sizes[:-1]) + [sizes[-1] + 1])
    with pytest.raises(ValueError, match=r"mixture_sizes\[1\] = 0"):
        libmas.GMM(mu, var, lw, [m, 0])
    bad = var.copy()
    bad[1, 0] = 0.0
    with pytest.raises(ValueError, match=r"variances of Gaussian 1 .*non-positive"):
        libmas.GMM(mu, bad, lw, sizes)
    bad = mu.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"means of Gaussian 2 hold NaN"):
        libmas.GMM(bad, var, lw, sizes)
    bad = lw.copy()
    bad[0] = np.inf
    with pytest.raises(ValueError, match=r"log_weights\[0\]"):
        libmas.GMM(mu, var, bad, sizes)
    with pytest.raises(TypeError, match=r"means must be float32"):
        libmas.GMM(mu.astype(np.int64), var, lw, sizes)
    model = libmas.GMM(mu, var, lw, sizes)
    with pytest.raises(ValueError, match=r"x has J = 3 dimensions per frame, the model 2"):
        model.loglik(np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"x must have shape"):
        model.loglik(np.zeros(4))
    with pytest.raises(ValueError, match=r"precision must be"):
        model.loglik(np.zeros((4, 2)), precision="fp8")
    with pytest.raises(ValueError, match=r"coefficients are not finite in float32"):
        tiny = var.copy()
        tiny[0, 0] = 1e-40
        libmas.GMM(mu.astype(np.float32), tiny, lw, sizes)


def test_gaussian_loglik_errors(rng):
    z, m, logs = tts_inputs(rng, b=2, d=3, t=4, s=6)
    fn = "libmas.gaussian_loglik"
    with pytest.raises(ValueError, match=rf"{fn}: mean must have shape"):
        libmas.gaussian_loglik(z, m[:, :2], logs)
    with pytest.raises(ValueError, match=r"log_std must have the shape of mean"):
        libmas.gaussian_loglik(z, m, logs[:, :, :3])
    with pytest.raises(ValueError, match=r"z must have shape \[B, D, S\]"):
        libmas.gaussian_loglik(z[0], m, logs)
    with pytest.raises(ValueError, match=r"layout must be"):
        libmas.gaussian_loglik(z, m, logs, layout="tbs")
    with pytest.raises(ValueError, match=r"item 1: x_lengths = 5 is outside \[0, 4\]"):
        libmas.gaussian_loglik(z, m, logs, [4, 5], [6, 6])
    with pytest.raises(ValueError, match=r"item 0: y_lengths = -1"):
        libmas.gaussian_loglik(z, m, logs, [4, 4], [-1, 6])
    bad = m.copy()
    bad[1, 2, 3] = np.inf
    with pytest.raises(ValueError, match=r"item 1: token 3: mean or log_std is NaN or inf"):
        libmas.gaussian_loglik(z, bad, logs)
    with pytest.raises(TypeError, match=r"z must be float32"):
        libmas.gaussian_loglik(z.astype(np.int32), m, logs)
