"""Eager tensor calls through libmas._torch (libmas._fast, issue 9): the
same bits as the general path (itself checked against the references) and
as the float64 reference, the general path taking every case the glue
leaves, and the same errors. CPU everywhere, CUDA where a GPU exists.

LIBMAS_EXPECT_GLUE=1 (make test) makes a missing glue a failure instead of
a skip."""

import os

import numpy as np
import pytest

import libmas
from libmas import _fast
from conftest import mask_from_lengths, random_lengths, random_values
from reference import hard_mas

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and libmas.has_cuda() else [])
needs_cuda = pytest.mark.skipif("cuda" not in DEVICES, reason="needs a CUDA device and backend")
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def glue():
    g = _fast.available()
    if g is None:
        if os.environ.get("LIBMAS_EXPECT_GLUE") == "1":
            pytest.fail("libmas._torch is missing or was built for another PyTorch "
                        f"({torch.__version__} imported)")
        pytest.skip("libmas._torch is not built here")
    yield g
    _fast.ENABLED = True


def general(fn):
    """fn() with the glue switched off."""
    _fast.ENABLED = False
    try:
        return fn()
    finally:
        _fast.ENABLED = True


def case(rng, device, dtype, shape=(5, 7, 19), bst=False, strided=False):
    B, T, S = shape
    x_len, y_len = random_lengths(rng, B, T, S)
    v = torch.from_numpy(random_values(rng, shape, "loglik", np.float64)).to(dtype)
    if strided:  # every other frame of a wider tensor, every other item of a longer batch
        wide = torch.zeros((2 * B, T, 2 * S), dtype=dtype)
        wide[::2, :, ::2] = v
        v = wide[::2, :, ::2]
        assert not v.is_contiguous()
    if bst:
        v = v.transpose(1, 2)
    return (v.to(device), torch.from_numpy(x_len).to(device), torch.from_numpy(y_len).to(device))


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device
    assert torch.equal(a, b) or (a.is_floating_point() and
                                 torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bst", [False, True])
@pytest.mark.parametrize("strided", [False, True])
def test_align_same_as_general_path(rng, device, dtype, bst, strided):
    value, x_len, y_len = case(rng, device, dtype, bst=bst, strided=strided)
    layout = "bst" if bst else "bts"
    assert _fast.align(value, x_len, y_len, bst, 0) is not None  # the glue took it
    fast = libmas.align(value, x_len, y_len, layout=layout)
    slow = general(lambda: libmas.align(value, x_len, y_len, layout=layout))
    libmas.check_errors()
    for name in ("durations", "indices", "score"):
        same(getattr(fast, name), getattr(slow, name))
    same(fast.path(), slow.path())
    assert torch.equal(fast.durations.sum(1), y_len.to(torch.int32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(5, 7, 19), (3, 400, 700)])
def test_align_outputs_are_tensors_of_their_own(rng, device, dtype, shape):
    # The glue makes the three outputs in one allocation; on CUDA it calls
    # without a workspace first (T=400 runs in no one block: then with one).
    value, x_len, y_len = case(rng, device, dtype, shape=shape)
    assert _fast.align(value, x_len, y_len, False, 0) is not None
    got = libmas.align(value, x_len, y_len)
    want = general(lambda: libmas.align(value, x_len, y_len))
    libmas.check_errors()
    B, T, S = shape
    for name, size, dt in (("durations", (B, T), torch.int32), ("indices", (B, S), torch.int32),
                           ("score", (B,), torch.float64 if dtype == torch.float64 else torch.float32)):
        t = getattr(got, name)
        assert t.shape == size and t.dtype == dt and t.is_contiguous() and not t.requires_grad
        same(t, getattr(want, name))
    indices, score = got.indices.clone(), got.score.clone()
    got.durations.fill_(-7)  # writing one output leaves the others alone
    assert torch.equal(got.indices, indices) and torch.equal(got.score, score)
    assert int(got.durations.sum()) == -7 * B * T


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("threads", [None, 1, 3])
def test_align_against_reference(rng, device, threads):
    value, x_len, y_len = case(rng, device, torch.float64, shape=(6, 9, 23))
    got = libmas.align(value, x_len, y_len, threads=threads)
    want = hard_mas(value.cpu().numpy(), x_len.cpu().numpy(), y_len.cpu().numpy())
    np.testing.assert_array_equal(got.durations.cpu().numpy(), want.durations)
    np.testing.assert_array_equal(got.indices.cpu().numpy(), want.indices)
    np.testing.assert_allclose(got.score.cpu().numpy(), want.score, rtol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bst", [False, True])
@pytest.mark.parametrize("mask_dtype", [torch.float32, torch.bool, torch.int64, "random"])
def test_maximum_path_same_as_general_path(rng, device, dtype, bst, mask_dtype):
    value, x_len, y_len = case(rng, device, dtype, bst=bst)
    B, T, S = 5, 7, 19
    if mask_dtype == "random":  # not a prefix mask: the counts of the first row and column
        mask = torch.from_numpy(rng.integers(0, 2, (B, T, S)).astype(np.float32))
        mask[:, :, 0] = torch.from_numpy(mask_from_lengths(x_len.cpu(), x_len.cpu(), T, T))[:, :, 0]
        for b in range(B):  # y_len non-zeros in the first row, frame 0 among them, scattered
            row = np.zeros(S, np.float32)
            row[0] = 1
            row[1 + rng.permutation(S - 1)[:int(y_len[b]) - 1]] = 2.5
            mask[b, 0, :] = torch.from_numpy(row)
    else:
        mask = torch.from_numpy(mask_from_lengths(x_len.cpu(), y_len.cpu(), T, S)).to(mask_dtype)
    if bst:
        mask = mask.transpose(1, 2)
    mask = mask.to(device)
    layout = "bst" if bst else "bts"
    assert _fast.maximum_path(value, mask, bst) is not None
    fast = libmas.maximum_path(value, mask, layout=layout)
    slow = general(lambda: libmas.maximum_path(value, mask, layout=layout))
    libmas.check_errors()
    same(fast, slow)
    if mask_dtype != "random":
        want = libmas.align(value, x_len, y_len, layout=layout).path()
        same(fast, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(2, 400, 700), (2, 100, 1400)])
def test_maximum_path_larger_shapes(rng, device, shape):
    # On CUDA neither runs without a workspace (T=400: not one block; T=100
    # S=1400: a float32 path over 128 KB an item): the glue's second try.
    value, x_len, y_len = case(rng, device, torch.float32, shape=shape)
    mask = torch.from_numpy(mask_from_lengths(x_len.cpu(), y_len.cpu(), shape[1], shape[2]))
    mask = mask.to(device)
    assert _fast.maximum_path(value, mask, False) is not None
    fast = libmas.maximum_path(value, mask)
    same(fast, general(lambda: libmas.maximum_path(value, mask)))
    same(fast, libmas.align(value, x_len, y_len).path())
    libmas.check_errors()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["one", "m2m"])
@pytest.mark.parametrize("lengths", [False, True])
def test_attention_same_as_general_path(rng, device, dtype, kind, lengths):
    fn = libmas.monotonic_attention if kind == "one" else libmas.monotonic_attention_m2m
    logits, n_len, m_len = case(rng, device, dtype, shape=(4, 11, 13))
    if not lengths:
        n_len = m_len = None
    else:  # any 1 <= n <= N, 1 <= m <= M
        n_len = torch.randint(1, 12, (4,), generator=torch.Generator().manual_seed(
            int(rng.integers(1 << 31)))).to(device)
    code = 0 if kind == "one" else 1
    fname = "libmas.monotonic_attention"
    assert _fast.attention(fname, code, logits, n_len, m_len, 0) is not None
    same(fn(logits, n_len, m_len), general(lambda: fn(logits, n_len, m_len)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bst", [False, True])
def test_forward_sum_same_as_general_path(rng, device, dtype, bst):
    value, x_len, y_len = case(rng, device, dtype, bst=bst, strided=bool(rng.integers(2)))
    layout = "bst" if bst else "bts"
    for want in ((True, False), (False, True), (True, True)):
        assert _fast.forward_sum("f", value, x_len, y_len, bst, 0, *want) is not None
    same(libmas.forward_sum(value, x_len, y_len, layout=layout),
         general(lambda: libmas.forward_sum(value, x_len, y_len, layout=layout)))
    same(libmas.posterior(value, x_len, y_len, layout=layout),
         general(lambda: libmas.posterior(value, x_len, y_len, layout=layout)))
    libmas.check_errors()


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_forwards_through_the_glue(rng, device):
    """forward_sum and the attentions with a value that requires grad: the
    autograd functions' forwards take the glue; log_z, log_phi and the
    gradients are the general path's bits."""
    value, x_len, y_len = case(rng, device, torch.float64, shape=(3, 6, 14))

    def run():
        v = value.clone().requires_grad_(True)
        log_z = libmas.forward_sum(v, x_len, y_len)
        log_z.sum().backward()
        x = value.clone().requires_grad_(True)
        log_phi = libmas.monotonic_attention(x, x_len, y_len)
        torch.where(torch.isfinite(log_phi), log_phi, 0).sum().backward()
        return log_z.detach(), v.grad, log_phi.detach(), x.grad

    for a, b in zip(run(), general(run)):
        same(a, b)
    v = value.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: libmas.forward_sum(t, x_len, y_len), (v,))
    libmas.check_errors()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["one", "m2m"])
def test_attention_backward_same_as_general_path(rng, device, dtype, kind):
    fn = libmas.monotonic_attention if kind == "one" else libmas.monotonic_attention_m2m
    logits, n_len, m_len = case(rng, device, dtype, shape=(4, 9, 12))
    lengths = bool(rng.integers(2))
    if not lengths:
        n_len = m_len = None
    upstream = [torch.ones(()).expand(4, 9, 12),                 # stride 0, as sum() gives
                torch.from_numpy(rng.standard_normal((4, 12, 9))).transpose(1, 2)]

    def grads(up):
        x = logits.clone().requires_grad_(True)
        log_phi = fn(x, n_len, m_len)
        log_phi.backward(up.to(device=device, dtype=log_phi.dtype))
        return x.grad

    for up in upstream:
        same(grads(up), general(lambda: grads(up)))
    x = logits.detach()
    log_phi = fn(x, n_len, m_len)
    g = upstream[1].to(device=device, dtype=log_phi.dtype)
    code = 0 if kind == "one" else 1
    assert _fast.attention_backward("f", code, x, n_len, m_len, log_phi, g, 0) is not None
    assert _fast.attention_backward("f", code, x, n_len, m_len, log_phi[:, :, :5], g, 0) is None
    libmas.check_errors()


@pytest.mark.parametrize("device", DEVICES)
def test_general_path_takes_the_rest(rng, device):
    """What the glue leaves gives the general path's result (and the glue
    says None for it)."""
    value, x_len, y_len = case(rng, device, torch.float32)
    want = general(lambda: libmas.align(value, x_len, y_len))
    others = [
        (value, x_len.to(torch.int32), y_len),              # int32 lengths
        (value, x_len.cpu().numpy(), y_len.cpu().tolist()),  # NumPy and a list
        (torch.nn.Parameter(value), x_len, y_len),           # a subclass
        (value, x_len[None, :].expand(2, -1)[1], y_len),     # lengths of stride 0 rows: fine
        (value, torch.stack([x_len, x_len], 1)[:, 0], y_len),  # strided lengths
    ]
    if device == "cuda":
        others.append((value, x_len.cpu(), y_len.cpu()))     # host lengths, CUDA value
    for v, xl, yl in others:
        got = libmas.align(v, xl, yl)
        same(got.durations, want.durations)
        same(got.indices, want.indices)
        same(got.score, want.score)
    assert _fast.align(value, x_len.to(torch.int32), y_len, False, 0) is None
    assert _fast.align(torch.nn.Parameter(value), x_len, y_len, False, 0) is None
    assert _fast.align(value, torch.stack([x_len, x_len], 1)[:, 0], y_len, False, 0) is None
    assert _fast.align(value[:, :, :0], x_len, y_len, False, 0) is None  # empty axis
    mask = torch.from_numpy(mask_from_lengths(x_len.cpu(), y_len.cpu(), 7, 19)).to(device)
    assert _fast.maximum_path(value, mask[:, :, :5], False) is None  # another shape
    assert _fast.maximum_path(value, mask.to(torch.complex64), False) is None
    same(libmas.maximum_path(value, mask, dtype=torch.bool),
         want.path(torch.bool))                               # dtype given: the general path
    # a workspace budget is the general path's (the glue is never asked)
    got = libmas.align(value, x_len, y_len, max_workspace_bytes=1 << 30)
    same(got.durations, want.durations)
    libmas.check_errors()


def test_errors_same_wording(rng):
    value, x_len, y_len = case(rng, "cpu", torch.float32)
    x_len[2] = y_len[2] + 1  # x_len > y_len
    with pytest.raises(ValueError) as fast:
        libmas.align(value, x_len, y_len)
    with pytest.raises(ValueError) as slow:
        general(lambda: libmas.align(value, x_len, y_len))
    assert str(fast.value) == str(slow.value) and "libmas.align: item 2" in str(fast.value)
    logits = value.clone()
    logits[1, 0, 0] = float("nan")
    with pytest.raises(ValueError) as fast:
        libmas.monotonic_attention(logits)
    with pytest.raises(ValueError) as slow:
        general(lambda: libmas.monotonic_attention(logits))
    assert str(fast.value) == str(slow.value) and "item 1" in str(fast.value)
    with pytest.raises(ValueError, match="threads"):
        libmas.monotonic_attention(logits, threads=0)
    mask = torch.ones_like(value)
    mask[4, :, 0] = 0  # x_len 0
    with pytest.raises(ValueError) as fast:
        libmas.maximum_path(value, mask)
    with pytest.raises(ValueError) as slow:
        general(lambda: libmas.maximum_path(value, mask))
    assert str(fast.value) == str(slow.value) and "item 4" in str(fast.value)


def gaussian_case(rng, device, zt, mt, shape=(5, 6, 9, 31), frame_major=False):
    """Glow-TTS's z [B, D, S], mean and log_std [B, D, T] and lengths."""
    B, D, T, S = shape
    x_len, y_len = random_lengths(rng, B, T, S)
    z = torch.from_numpy(rng.standard_normal((B, D, S))).to(zt)
    if frame_major:  # stored [B, S, D]: the frames' values strided
        z = z.transpose(1, 2).contiguous().transpose(1, 2)
    mean = torch.from_numpy(rng.standard_normal((B, D, T))).to(mt)
    log_std = torch.from_numpy(0.3 * rng.standard_normal((B, D, T))).to(mt)
    return tuple(a.to(device) for a in (z, mean, log_std, torch.from_numpy(x_len),
                                        torch.from_numpy(y_len)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("zt", DTYPES)
@pytest.mark.parametrize("mt", [torch.float32, torch.float64])
@pytest.mark.parametrize("precision", ["float32", "tf32"])
@pytest.mark.parametrize("frame_major", [False, True])
def test_align_gaussian_same_as_general_path(rng, device, zt, mt, precision, frame_major):
    from libmas.likelihood import _precision_arg
    z, mean, log_std, x_len, y_len = gaussian_case(rng, device, zt, mt, frame_major=frame_major)
    code = _precision_arg(precision, "test")
    assert _fast.align_gaussian(z, mean, log_std, x_len, y_len, code, 0) is not None
    fast = libmas.align_gaussian(z, mean, log_std, x_len, y_len, precision=precision)
    slow = general(lambda: libmas.align_gaussian(z, mean, log_std, x_len, y_len,
                                                 precision=precision))
    libmas.check_errors()
    for name in ("durations", "indices", "score"):
        same(getattr(fast, name), getattr(slow, name))
    same(fast.path(), slow.path())
    # the exactness contract, through the glue: align on gaussian_loglik's cells
    cells = libmas.gaussian_loglik(z, mean, log_std, x_len, y_len, precision=precision)
    ref = libmas.align(cells, x_len, y_len)
    same(fast.indices, ref.indices)
    same(fast.score, ref.score)


@pytest.mark.parametrize("device", DEVICES)
def test_align_gaussian_general_path_takes_the_rest(rng, device):
    z, mean, log_std, x_len, y_len = gaussian_case(rng, device, torch.float32, torch.float32)
    S, T = z.shape[2], mean.shape[2]
    full = general(lambda: libmas.align_gaussian(z, mean, log_std,
                                                 torch.full_like(x_len, T),
                                                 torch.full_like(y_len, S)))
    got = libmas.align_gaussian(z, mean, log_std)  # no lengths: the general path's
    same(got.indices, full.indices)
    same(got.score, full.score)
    assert _fast.align_gaussian(z, mean, log_std, None, None, 0, 0) is None
    assert _fast.align_gaussian(z, mean, log_std, x_len.to(torch.int32), y_len, 0, 0) is None
    assert _fast.align_gaussian(z, mean[:1], log_std[:1], x_len, y_len, 0, 0) is None
    assert _fast.align_gaussian(z[:, :0], mean[:, :0], log_std[:, :0], x_len, y_len, 0,
                                0) is None  # D = 0: the unfused path's
    assert _fast.align_gaussian(z.to(torch.int32), mean, log_std, x_len, y_len, 0, 0) is None
    want = general(lambda: libmas.align_gaussian(z, mean, log_std, x_len, y_len))
    for args in ((z, mean, log_std, x_len.to(torch.int32), y_len),
                 (torch.nn.Parameter(z), mean, log_std, x_len, y_len)):
        got = libmas.align_gaussian(*args)
        same(got.indices, want.indices)
        same(got.score, want.score)
    got = libmas.align_gaussian(z, mean, log_std, x_len, y_len, max_workspace_bytes=1 << 30)
    same(got.indices, want.indices)
    with pytest.raises(ValueError) as fast:
        libmas.align_gaussian(z, mean[:1], log_std[:1], x_len, y_len)
    with pytest.raises(ValueError) as slow:
        general(lambda: libmas.align_gaussian(z, mean[:1], log_std[:1], x_len, y_len))
    assert str(fast.value) == str(slow.value) and "mean must have shape" in str(fast.value)
    libmas.check_errors()


def test_align_gaussian_errors_same_wording(rng):
    """A CPU call the library refuses runs again on the general path, which
    words it (a bad model names its token)."""
    z, mean, log_std, x_len, y_len = gaussian_case(rng, "cpu", torch.float32, torch.float32)
    bad_mean = mean.clone()
    bad_mean[2, 1, 3] = float("nan")
    x_big = x_len.clone()
    x_big[1] = mean.shape[2] + 1  # beyond T
    x_over = x_len.clone()
    x_over[4] = y_len[4] + 1  # x_len > y_len
    for args, words in (((z, bad_mean, log_std, x_len, y_len), "item 2: token 3"),
                        ((z, mean, log_std, x_big, y_len), "item 1"),
                        ((z, mean, log_std, x_over, y_len), "item 4")):
        with pytest.raises(ValueError) as fast:
            libmas.align_gaussian(*args)
        with pytest.raises(ValueError) as slow:
            general(lambda: libmas.align_gaussian(*args))
        assert str(fast.value) == str(slow.value) and words in str(fast.value)


@needs_cuda
def test_align_gaussian_cuda_errors_are_lazy_and_named(rng):
    z, mean, log_std, x_len, y_len = gaussian_case(rng, "cuda", torch.float32, torch.float32)
    libmas.check_errors()
    x_len[3] = y_len[3] + 1
    assert _fast.align_gaussian(z, mean, log_std, x_len, y_len, 0, 0) is not None
    with pytest.raises(ValueError, match=r"libmas\.align_gaussian on cuda:\d+ .*item 3"):
        libmas.check_errors()
    libmas.check_errors()  # reported once


def test_glue_of_another_pytorch_is_not_used(rng, monkeypatch):
    """A glue built against another PyTorch version is never called: every
    call takes the general path, with the same results."""
    value, x_len, y_len = case(rng, "cpu", torch.float32)
    want = libmas.align(value, x_len, y_len)
    monkeypatch.setattr(_fast, "_glue", None)
    monkeypatch.setattr(torch, "__version__", "0.0.0+other")
    assert _fast.available() is None
    assert _fast.align(value, x_len, y_len, False, 0) is None
    got = libmas.align(value, x_len, y_len)
    same(got.durations, want.durations)
    same(got.score, want.score)
    monkeypatch.undo()
    _fast._glue = None
    assert _fast.available() is not None


@needs_cuda
def test_cuda_errors_are_lazy_and_named(rng):
    value, x_len, y_len = case(rng, "cuda", torch.float32)
    libmas.check_errors()
    x_len[3] = y_len[3] + 1
    assert _fast.align(value, x_len, y_len, False, 0) is not None
    with pytest.raises(ValueError, match=r"libmas\.align on cuda:\d+ .*item 3"):
        libmas.check_errors()
    libmas.check_errors()  # reported once


@needs_cuda
def test_cuda_graph_capture_takes_general_path(rng):
    value, x_len, y_len = case(rng, "cuda", torch.float32)
    want = libmas.align(value, x_len, y_len)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        libmas.align(value, x_len, y_len)  # warm-up outside the capture
        with torch.cuda.graph(graph, stream=stream):
            got = libmas.align(value, x_len, y_len)
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    torch.cuda.synchronize()
    same(got.durations, want.durations)
    same(got.indices, want.indices)
    libmas.check_errors()


@needs_cuda
def test_cuda_other_stream_and_device(rng):
    value, x_len, y_len = case(rng, "cuda", torch.float32, shape=(8, 40, 160))
    want = libmas.align(value, x_len, y_len)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        got = libmas.align(value, x_len, y_len)
    torch.cuda.current_stream().wait_stream(stream)
    same(got.durations, want.durations)
    if torch.cuda.device_count() > 1:
        with pytest.raises(ValueError, match="x_lengths is on cuda:1"):
            libmas.align(value, x_len.to("cuda:1"), y_len)
    libmas.check_errors()
