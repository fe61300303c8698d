"""libmas.align_gaussian / forward_sum_gaussian / expand (mas.h section 8).

The exactness contract: align_gaussian(z, m, s, X, Y) == align(gaussian_loglik
(z, m, s, X, Y), X, Y) bit for bit (both layouts, uneven lengths, float32 and
float64, ties from repeated tokens and frames); forward_sum_gaussian's log Z
against float64 loops and its gradients by gradcheck; expand against a plain
gather loop and by gradcheck; bad input worded as the unfused calls."""

import math

import numpy as np
import pytest
from conftest import random_lengths

import libmas


def _tts(rng, b, d, t, s, dtype=np.float32, ties=False):
    z = rng.uniform(-2.5, 2.5, size=(b, d, s))
    m = rng.uniform(-2, 2, size=(b, d, t))
    ls = rng.uniform(-1, 0.5, size=(b, d, t))
    if ties:  # repeated tokens and frames: equal cells, tied paths
        for k in range(1, t):
            if rng.random() < 0.4:
                m[:, :, k] = m[:, :, k - 1]
                ls[:, :, k] = ls[:, :, k - 1]
        for k in range(1, s):
            if rng.random() < 0.4:
                z[:, :, k] = z[:, :, k - 1]
    return z.astype(dtype), m.astype(dtype), ls.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["bts", "bst"])
@pytest.mark.parametrize("ties", [False, True])
def test_align_gaussian_equals_unfused_numpy(rng, dtype, layout, ties):
    for _ in range(4):
        b, d = int(rng.integers(1, 5)), int(rng.choice([1, 3, 8, 80]))
        t = int(rng.integers(1, 60))
        s = int(rng.integers(t, 200))
        z, m, ls = _tts(rng, b, d, t, s, dtype, ties)
        x, y = random_lengths(rng, b, t, s)
        r1 = libmas.align_gaussian(z, m, ls, x, y, layout=layout)
        r2 = libmas.align(libmas.gaussian_loglik(z, m, ls, x, y, layout=layout), x, y,
                          layout=layout)
        np.testing.assert_array_equal(r1.durations, r2.durations)
        np.testing.assert_array_equal(r1.indices, r2.indices)
        assert r1.score.dtype == r2.score.dtype
        assert r1.score.tobytes() == r2.score.tobytes()
        np.testing.assert_array_equal(r1.path(), r2.path())


def test_align_gaussian_equals_unfused_torch(rng, torch):
    z, m, ls = _tts(rng, 3, 80, 40, 150, np.float32, True)
    x, y = random_lengths(rng, 3, 40, 150)
    zt, mt, lt = (torch.tensor(a) for a in (z, m, ls))
    r1 = libmas.align_gaussian(zt, mt.requires_grad_(), lt, torch.tensor(x), torch.tensor(y),
                               threads=2)
    r2 = libmas.align(libmas.gaussian_loglik(zt, mt.detach(), lt, x, y), x, y)
    assert torch.equal(r1.durations, r2.durations) and torch.equal(r1.indices, r2.indices)
    assert torch.equal(r1.score, r2.score)
    assert torch.equal(r1.path(dtype=torch.bool), r2.path(dtype=torch.bool))
    # default lengths: every token, every frame
    r3 = libmas.align_gaussian(zt, mt.detach(), lt)
    r4 = libmas.align(libmas.gaussian_loglik(zt, mt.detach(), lt), [40] * 3, [150] * 3)
    assert torch.equal(r3.indices, r4.indices) and torch.equal(r3.score, r4.score)


def _ref_log_z(z, m, ls, x, y):
    """Forward-sum in float64 loops from the formulas."""
    out = []
    for b in range(z.shape[0]):
        X, Y = int(x[b]), int(y[b])
        zz, mm, ll = (a.astype(np.float64) for a in (z[b], m[b], ls[b]))
        v = np.zeros((X, Y))
        for i in range(X):
            for j in range(Y):
                v[i, j] = np.sum(-0.5 * math.log(2 * math.pi) - ll[:, i]
                                 - 0.5 * (zz[:, j] - mm[:, i]) ** 2 * np.exp(-2 * ll[:, i]))
        a = np.full((X, Y), -np.inf)
        a[0, 0] = v[0, 0]
        for j in range(1, Y):
            for i in range(X):
                prev = np.logaddexp(a[i, j - 1], a[i - 1, j - 1] if i > 0 else -np.inf)
                a[i, j] = prev + v[i, j]
        out.append(a[X - 1, Y - 1])
    return np.array(out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_sum_gaussian_log_z(rng, dtype):
    z, m, ls = _tts(rng, 3, 4, 9, 40, dtype)
    x, y = random_lengths(rng, 3, 9, 40)
    got = libmas.forward_sum_gaussian(z, m, ls, x, y)
    ref = _ref_log_z(z, m, ls, x, y)
    tol = 1e-9 if dtype == np.float64 else 2e-4
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    # the same sweep as forward_sum on the unfused matrix: the same bits
    unfused = libmas.forward_sum(libmas.gaussian_loglik(z, m, ls, x, y), x, y)
    assert got.tobytes() == unfused.tobytes()


def test_forward_sum_gaussian_gradcheck(rng, torch):
    z, m, ls = _tts(rng, 2, 3, 6, 25, np.float64)
    x, y = np.array([6, 3]), np.array([25, 11])
    args = tuple(torch.tensor(a, requires_grad=True) for a in (z, m, ls))
    assert torch.autograd.gradcheck(
        lambda a, b, c: libmas.forward_sum_gaussian(a, b, c, x, y), args)
    # the same gradients as autograd through the unfused path
    lz = libmas.forward_sum_gaussian(*args, x, y)
    g1 = torch.autograd.grad(lz.sum() * 1.5, args)
    lz2 = libmas.forward_sum(libmas.gaussian_loglik(*args, x, y), x, y)
    g2 = torch.autograd.grad(lz2.sum() * 1.5, args)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


def test_forward_sum_gaussian_float32_grad(rng, torch):
    """float32 gradients as close to float64's as the unfused float32 path's
    (the posterior of a long item is only as exact as alpha + beta - log Z
    in float32)."""
    z, m, ls = _tts(rng, 2, 80, 30, 120, np.float32)
    args = tuple(torch.tensor(a, requires_grad=True) for a in (z, m, ls))
    g1 = torch.autograd.grad(libmas.forward_sum_gaussian(*args).sum(), args)
    g_unf = torch.autograd.grad(libmas.forward_sum(libmas.gaussian_loglik(*args), [30] * 2,
                                                   [120] * 2).sum(), args)
    args64 = tuple(a.detach().double().requires_grad_() for a in args)
    g64 = torch.autograd.grad(libmas.forward_sum_gaussian(*args64).sum(), args64)
    for a, u, r in zip(g1, g_unf, g64):
        err = (a.double() - r).abs().max().item()
        err_unfused = (u.double() - r).abs().max().item()
        assert err <= 2 * err_unfused + 1e-4 * r.abs().max().item(), (err, err_unfused)


def test_expand_numpy_torch(rng, torch):
    b, d, t, s = 3, 5, 7, 20
    stats = rng.standard_normal((b, d, t))
    idx = rng.integers(-1, t, size=(b, s)).astype(np.int32)
    ref = np.zeros((b, d, s))
    for i in range(b):
        for j in range(s):
            if idx[i, j] >= 0:
                ref[i, :, j] = stats[i, :, idx[i, j]]
    np.testing.assert_array_equal(libmas.expand(stats, idx), ref)
    st = torch.tensor(stats, requires_grad=True)
    out = libmas.expand(st, torch.tensor(idx))
    assert torch.equal(out.detach(), torch.tensor(ref))
    assert torch.autograd.gradcheck(lambda a: libmas.expand(a, torch.tensor(idx)), (st,))
    with pytest.raises(TypeError, match="libmas.expand: indices must be an integer array"):
        libmas.expand(stats, idx.astype(np.float32))
    with pytest.raises(ValueError, match="indices must have shape"):
        libmas.expand(stats, idx[:2])


def test_durations_indices_round_trip(rng, torch):
    z, m, ls = _tts(rng, 4, 3, 12, 50)
    x, y = random_lengths(rng, 4, 12, 50)
    r = libmas.align_gaussian(z, m, ls, x, y)
    np.testing.assert_array_equal(libmas.indices_to_durations(r.indices, 12), r.durations)
    np.testing.assert_array_equal(libmas.durations_to_indices(r.durations, 50), r.indices)
    ti, td = torch.tensor(r.indices), torch.tensor(r.durations)
    assert torch.equal(libmas.indices_to_durations(ti, 12), td)
    assert torch.equal(libmas.durations_to_indices(td, 50), ti)


def _message(fn):
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value).split(": ", 1)[1]


def test_errors_worded_as_unfused(rng):
    z, m, ls = _tts(rng, 3, 4, 10, 30)
    x, y = np.array([10, 4, 9]), np.array([30, 12, 5])   # item 2: x_len > y_len
    fused = _message(lambda: libmas.align_gaussian(z, m, ls, x, y))
    unfused = _message(lambda: libmas.align(libmas.gaussian_loglik(z, m, ls, x, y), x, y))
    assert fused == unfused and "item 2" in fused
    assert _message(lambda: libmas.forward_sum_gaussian(z, m, ls, x, y)) == fused
    m2 = m.copy()
    m2[1, 2, 8] = np.nan                                  # beyond x_len: still an error
    x2 = np.array([10, 4, 5])
    fused = _message(lambda: libmas.align_gaussian(z, m2, ls, x2, y))
    assert fused == _message(lambda: libmas.gaussian_loglik(z, m2, ls, x2, y))
    assert "item 1: token 8" in fused
    for bad_x in (np.array([11, 4, 5]), np.array([-1, 4, 5])):
        assert _message(lambda: libmas.align_gaussian(z, m, ls, bad_x, y)) == \
            _message(lambda: libmas.gaussian_loglik(z, m, ls, bad_x, y))
    x0 = np.array([0, 4, 5])                              # in range for logp, not for align
    assert _message(lambda: libmas.align_gaussian(z, m, ls, x0, y)) == \
        _message(lambda: libmas.align(libmas.gaussian_loglik(z, m, ls, x0, y), x0, y))
    z2 = z.copy()
    z2[0, 1, 3] = np.nan                                  # a NaN frame on item 0's band
    assert _message(lambda: libmas.align_gaussian(z2, m, ls, x2, y)) == \
        _message(lambda: libmas.align(libmas.gaussian_loglik(z2, m, ls, x2, y), x2, y))
    with pytest.raises(ValueError, match="libmas.align_gaussian: mean must have shape"):
        libmas.align_gaussian(z, m[:, :2], ls, x, y)
    with pytest.raises(TypeError, match="libmas.align_gaussian: z must be float32"):
        libmas.align_gaussian(z.astype(np.int32), m, ls, x, y)
    with pytest.raises(ValueError, match="libmas.align_gaussian: precision must be"):
        libmas.align_gaussian(z, m, ls, x, y, precision="fp8")
    np.testing.assert_array_equal(  # the CPU computes the default whatever is asked
        libmas.align_gaussian(z, m, ls, x2, y, precision="tf32").indices,
        libmas.align_gaussian(z, m, ls, x2, y).indices)


def _cuda(torch):
    if not torch.cuda.is_available() or not libmas.has_cuda():
        pytest.skip("no CUDA")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("ties", [False, True])
def test_cuda_fused_is_exact(rng, torch, dtype, ties):
    """The fused CUDA kernel: the unfused CUDA path's and the CPU's bits
    (indices, durations, score, path), uneven lengths, long items (several
    blocks an item), a transposed z and one model for all items."""
    _cuda(torch)
    for b, d, t, s in ((2, 80, 30, 90), (3, 80, 200, 700), (2, 5, 130, 131), (1, 192, 70, 300)):
        z, m, ls = (torch.tensor(a).to(getattr(torch, dtype)) for a in _tts(rng, b, d, t, s,
                                                                           ties=ties))
        x = torch.tensor(rng.integers(1, t + 1, size=b))
        y = torch.maximum(torch.tensor(rng.integers(1, s + 1, size=b)), x)
        x[0], y[0] = t, s
        if b > 1:
            m[1:], ls[1:] = m[:1].clone(), ls[:1].clone()
        zc, mc, lc, xc, yc = (a.cuda() for a in (z, m, ls, x, y))
        if d == 5:
            zc = zc.transpose(1, 2).contiguous().transpose(1, 2)  # frames-major storage
        r1 = libmas.align_gaussian(zc, mc, lc, xc, yc)
        r2 = libmas.align(libmas.gaussian_loglik(zc, mc, lc, xc, yc), xc, yc)
        r3 = libmas.align_gaussian(z, m, ls, x, y)
        for r in (r2, r3):
            assert torch.equal(r1.indices.cpu(), r.indices.cpu())
            assert torch.equal(r1.durations.cpu(), r.durations.cpu())
            assert torch.equal(r1.score.cpu(), r.score.cpu())
        assert torch.equal(r1.path().cpu(), r3.path())


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cuda_fused_tf32_is_unfused_tf32(rng, torch, dtype):
    """precision="tf32": the cells of gaussian_loglik(precision="tf32"), bit
    for bit (indices, durations, score), through the op's three kernel forms
    (short items, many 128-token slabs, 2J in slices); the TF32 scores are
    near the float64 path score and not the default's bits (tensor cores)."""
    _cuda(torch)
    for b, d, t, s in ((2, 80, 30, 90), (3, 80, 300, 700), (40, 80, 260, 600), (1, 192, 70, 300)):
        z, m, ls = (torch.tensor(a).to(getattr(torch, dtype)).cuda()
                    for a in _tts(rng, b, d, t, s, ties=True))
        x = torch.tensor(rng.integers(1, t + 1, size=b), device="cuda")
        y = torch.maximum(torch.tensor(rng.integers(1, s + 1, size=b), device="cuda"), x)
        x[0], y[0] = t, s
        r1 = libmas.align_gaussian(z, m, ls, x, y, precision="tf32")
        v = libmas.gaussian_loglik(z, m, ls, x, y, precision="tf32")
        r2 = libmas.align(v, x, y)
        assert torch.equal(r1.indices, r2.indices) and torch.equal(r1.durations, r2.durations)
        assert torch.equal(r1.score, r2.score)
        r0 = libmas.align_gaussian(z, m, ls, x, y)
        assert not torch.equal(r1.score, r0.score)
        # the TF32 path's score against the float64 cells of the same path
        v64 = libmas.gaussian_loglik(z.double(), m.double(), ls.double(), x, y)
        on_path = (v64 * r1.path().double()).sum(dim=(1, 2))
        scale = v64.abs().amax() * y.double()
        assert torch.all((on_path - r1.score.double()).abs() <= 2e-3 * scale)
    # "bf16" computes as "tf32"; the CPU computes the default whatever is asked
    assert torch.equal(libmas.align_gaussian(z, m, ls, x, y, precision="bf16").score, r1.score)
    zc, mc, lc = (a.float().cpu() for a in (z, m, ls))
    assert torch.equal(libmas.align_gaussian(zc, mc, lc, x.cpu(), y.cpu(), precision="tf32").score,
                       libmas.align_gaussian(zc, mc, lc, x.cpu(), y.cpu()).score)


def _captured(torch, call):
    """call's output from a CUDA graph of it, replayed once (warmed up
    outside the capture on a side stream)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        call()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = call()
    g.replay()
    torch.cuda.synchronize()
    return out


def _fsg_grads(torch, z, m, ls, x, y, dev):
    args = tuple(a.to(dev).requires_grad_() for a in (z, m, ls))
    lz = libmas.forward_sum_gaussian(*args, x.to(dev), y.to(dev))
    grads = torch.autograd.grad(lz.sum(), args)
    return (lz.detach().cpu(),) + tuple(g.cpu() for g in grads)


def test_cuda_forward_sum_gaussian(rng, torch):
    """The fused CUDA forward-sum: log_z bit for bit the unfused CUDA path's
    (gaussian_loglik then forward_sum); float64 log_z and gradients the CPU
    op's; float32 gradients as close to float64's as the unfused float32
    path's. Items over many blocks of frames and segments of tokens, uneven
    lengths, one model for all items."""
    _cuda(torch)
    for b, d, t, s in ((2, 80, 30, 90), (3, 16, 200, 700), (2, 5, 130, 131), (2, 80, 150, 800)):
        z, m, ls = (torch.tensor(a) for a in _tts(rng, b, d, t, s, np.float64))
        x = torch.tensor(rng.integers(1, t + 1, size=b))
        y = torch.maximum(torch.tensor(rng.integers(1, s + 1, size=b)), x)
        x[0], y[0] = t, s
        if d == 16:
            m, ls = m[:1].expand(b, -1, -1), ls[:1].expand(b, -1, -1)
        ref = _fsg_grads(torch, z, m, ls, x, y, "cpu")
        got = _fsg_grads(torch, z, m, ls, x, y, "cuda")
        for a, r in zip(got, ref):
            torch.testing.assert_close(a, r, rtol=1e-9, atol=1e-9)
        z32, m32, l32 = (a.float() for a in (z, m, ls))
        got32 = _fsg_grads(torch, z32, m32, l32, x, y, "cuda")
        xc, yc = x.cuda(), y.cuda()
        for zz, mm, ll, lz in ((z, m, ls, got[0]), (z32, m32, l32, got32[0])):
            args = tuple(a.cuda().requires_grad_() for a in (zz, mm, ll))
            unfused = libmas.forward_sum(libmas.gaussian_loglik(*args, xc, yc), xc, yc)
            assert torch.equal(lz, unfused.detach().cpu())
            if zz.dtype == torch.float32:
                g_unf = torch.autograd.grad(unfused.sum(), args)
                for a, u, r in zip(got32[1:], g_unf, ref[1:]):
                    err = (a.double() - r).abs().max().item()
                    err_unfused = (u.cpu().double() - r).abs().max().item()
                    assert err <= 2 * err_unfused + 1e-4 * r.abs().max().item(), (err, err_unfused)


def test_cuda_forward_sum_gaussian_gradcheck_and_errors(rng, torch):
    _cuda(torch)
    z, m, ls = (torch.tensor(a, device="cuda") for a in _tts(rng, 2, 3, 6, 70, np.float64))
    x, y = torch.tensor([6, 3], device="cuda"), torch.tensor([70, 11], device="cuda")
    args = tuple(a.clone().requires_grad_() for a in (z, m, ls))
    assert torch.autograd.gradcheck(
        lambda a, b, c: libmas.forward_sum_gaussian(a, b, c, x, y), args)
    torch.library.opcheck(libmas.torch_ops().forward_sum_gaussian, args + (x, y, 0, True))
    bad = z.clone()
    bad[1, 2, 5] = float("nan")  # inside item 1's frames
    messages = []
    for dev in ("cpu", "cuda"):
        with pytest.raises(ValueError, match="libmas.forward_sum_gaussian.*: item 1: ") as e:
            libmas.forward_sum_gaussian(bad.to(dev), m.to(dev), ls.to(dev), x.to(dev), y.to(dev))
            libmas.check_errors()
        messages.append(str(e.value).split("item 1: ")[1])
    assert messages[0] == messages[1]


def test_cuda_forward_sum_gaussian_capture_and_host_lengths(rng, torch):
    """Graph capture and replay equal to eager; lengths on the CPU with CUDA
    inputs give the same bits."""
    _cuda(torch)
    z, m, ls = (torch.tensor(a, device="cuda") for a in _tts(rng, 2, 80, 60, 250))
    x, y = torch.tensor([60, 31]), torch.tensor([250, 100])
    want = libmas.forward_sum_gaussian(z, m, ls, x.cuda(), y.cuda())
    assert torch.equal(libmas.forward_sum_gaussian(z, m, ls, x, y), want)
    xc, yc = x.cuda(), y.cuda()
    out = _captured(torch, lambda: libmas.forward_sum_gaussian(z, m, ls, xc, yc))
    assert torch.equal(out, want)


def test_cuda_fused_errors_and_budget(rng, torch):
    _cuda(torch)
    z, m, ls = (torch.tensor(a, device="cuda") for a in _tts(rng, 3, 8, 40, 120))
    x, y = torch.tensor([40, 7, 20], device="cuda"), torch.tensor([120, 40, 60], device="cuda")
    bad = z.clone()
    bad[1, 3, 5] = float("nan")  # inside item 1's frames
    with pytest.raises(ValueError, match="libmas.align_gaussian.*: item 1: ") as fused_err:
        libmas.align_gaussian(bad, m, ls, x, y)
        libmas.check_errors()
    with pytest.raises(ValueError, match="libmas.align.*: item 1: ") as unfused_err:
        libmas.align(libmas.gaussian_loglik(bad, m, ls, x, y), x, y)
        libmas.check_errors()
    assert str(fused_err.value).split("item 1: ")[1] == str(unfused_err.value).split("item 1: ")[1]
    with pytest.raises(ValueError, match="libmas.align_gaussian.*: item 1: "):
        libmas.align_gaussian(z, m, ls, torch.tensor([40, 41, 20], device="cuda"), y)
        libmas.check_errors()  # lengths on the device are checked there
    need = libmas.align_gaussian(z, m, ls, x, y)  # a working call after the errors
    r = libmas.align_gaussian(z, m, ls, x, y, max_workspace_bytes=1 << 30)
    assert torch.equal(r.indices, need.indices)
    with pytest.raises(ValueError, match="on the CUDA device"):
        libmas.align_gaussian(z, m, ls, x, y, max_workspace_bytes=1000)


def test_cuda_fused_graph_capture(rng, torch):
    _cuda(torch)
    z, m, ls = (torch.tensor(a, device="cuda") for a in _tts(rng, 2, 80, 60, 250))
    x, y = torch.tensor([60, 31], device="cuda"), torch.tensor([250, 100], device="cuda")
    want = libmas.align_gaussian(z, m, ls, x, y).indices.clone()
    out = _captured(torch, lambda: libmas.align_gaussian(z, m, ls, x, y).indices)
    assert torch.equal(out, want)


def test_registered_ops(rng, torch):
    """torch.ops.libmas.align_gaussian / forward_sum_gaussian: opcheck, the
    op path equal to the direct path, and torch.compile(fullgraph=True)."""
    from libmas import _ops

    ops = libmas.torch_ops()
    z, m, ls = (torch.tensor(a) for a in _tts(rng, 2, 4, 7, 20, np.float64))
    x, y = torch.tensor([7, 3]), torch.tensor([20, 9])
    torch.library.opcheck(ops.align_gaussian, (z, m, ls, x, y, 1))
    torch.library.opcheck(ops.forward_sum_gaussian,
                          (z.clone().requires_grad_(), m.clone().requires_grad_(), ls, x, y, 1,
                           True))
    results = []
    for always in (False, True):
        _ops.ALWAYS = always
        try:
            r = libmas.align_gaussian(z, m, ls, x, y)
            args = tuple(a.clone().requires_grad_() for a in (z, m, ls))
            lz = libmas.forward_sum_gaussian(*args, x, y)
            lz.sum().backward()
            results.append((r.durations, r.indices, r.score, lz.detach()) +
                           tuple(a.grad for a in args))
        finally:
            _ops.ALWAYS = False
    for direct, through_op in zip(*results):
        assert torch.equal(direct, through_op)

    def step(z, m, ls, x, y):
        r = libmas.align_gaussian(z.detach(), m.detach(), ls.detach(), x, y)
        return r.indices, -libmas.forward_sum_gaussian(z, m, ls, x, y).sum()

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    args = tuple(a.clone().requires_grad_() for a in (z, m, ls))
    idx, loss = compiled(*args, x, y)
    loss.backward()
    assert torch.equal(idx, results[0][1])
    assert torch.equal(args[0].grad, -results[0][4])
