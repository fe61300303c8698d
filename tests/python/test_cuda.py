"""libmas on PyTorch CUDA tensors: every output bit for bit equal to the CPU
backend on the same input (float32/float64/float16/bfloat16, both layouts,
non-contiguous views, tie-heavy and -inf inputs), the caller's current
stream, no host synchronisation, lazy errors naming the item, CUDA graph
capture, and tensors on a device other than the current one.

Skips cleanly without a GPU or without the CUDA backend."""

import numpy as np
import pytest

import libmas
from conftest import mask_from_lengths, random_lengths, random_values, sprinkle_neg_inf

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and libmas.has_cuda()),
    reason="needs a CUDA device and libmas built with its CUDA backend")

DTYPES = ["float32", "float64", "float16", "bfloat16"]
STYLES = ["contiguous", "transposed", "stepped", "sliced"]


def values(rng, shape, kind, dtype_name):
    """Exactly representable values of dtype_name as a CPU tensor."""
    base = random_values(rng, shape, kind, np.float32 if dtype_name == "bfloat16"
                         else np.dtype(dtype_name).type)
    return torch.from_numpy(base).to(getattr(torch, dtype_name))


def laid_out(logical, style, device):
    """The same logical tensor on `device`, in memory as style says."""
    x = logical.to(device)
    if style == "contiguous":
        return x.contiguous()
    if style == "transposed":
        return x.transpose(1, 2).contiguous().transpose(1, 2)
    b, m, n = x.shape
    if style == "stepped":
        base = torch.full((b, m, 2 * n), float("nan"), dtype=x.dtype, device=device)
        base[:, :, ::2] = x
        return base[:, :, ::2]
    base = torch.full((b + 1, m + 3, n + 5), float("nan"), dtype=x.dtype, device=device)
    base[1:, 3:, 5:] = x
    return base[1:, 3:, 5:]


def case(rng, dtype_name, layout, kind, batch=None, tokens=None, frames=None):
    batch = batch or int(rng.integers(1, 6))
    tokens = tokens or int(rng.integers(1, 160))
    frames = frames or int(rng.integers(tokens, 4 * tokens + 2))
    x_len, y_len = random_lengths(rng, batch, tokens, frames)
    logical = values(rng, (batch, tokens, frames), kind, dtype_name)
    if kind == "loglik" and rng.random() < 0.3:
        arr = logical.to(torch.float64).numpy()
        sprinkle_neg_inf(rng, arr, x_len, y_len, 0.2)
        logical = torch.from_numpy(arr).to(logical.dtype)
    value = logical if layout == "bts" else logical.transpose(1, 2)
    return value, x_len, y_len


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("layout", ["bts", "bst"])
@pytest.mark.parametrize("style", STYLES)
def test_align_cuda_equals_cpu(rng, dtype_name, layout, style):
    for kind in ("loglik", "halves"):
        value, x_len, y_len = case(rng, dtype_name, layout, kind)
        gpu_value = laid_out(value, style, "cuda")
        before = gpu_value.clone()
        got = libmas.align(gpu_value, torch.tensor(x_len, device="cuda"),
                           torch.tensor(y_len, device="cuda"), layout=layout)
        got.check()
        want = libmas.align(value.contiguous(), x_len, y_len, layout=layout, threads=1)
        assert got.durations.is_cuda and got.indices.is_cuda and got.score.is_cuda
        assert torch.equal(got.durations.cpu(), want.durations)
        assert torch.equal(got.indices.cpu(), want.indices)
        assert torch.equal(got.score.cpu().view(torch.int32 if want.score.dtype == torch.float32
                                                else torch.int64),
                           want.score.view(torch.int32 if want.score.dtype == torch.float32
                                           else torch.int64))
        assert torch.equal(got.path().cpu(), want.path())
        assert torch.equal(gpu_value, before)  # inputs are never modified


@pytest.mark.parametrize("layout", ["bts", "bst"])
@pytest.mark.parametrize("out_dtype", [None, "bool", "int32", "float16"])
def test_maximum_path_cuda_equals_cpu(rng, layout, out_dtype):
    value, x_len, y_len = case(rng, "float32", layout, "loglik", batch=4, tokens=70, frames=230)
    logical_shape = value.shape if layout == "bts" else value.transpose(1, 2).shape
    mask = torch.from_numpy(mask_from_lengths(x_len, y_len, logical_shape[1], logical_shape[2]))
    mask = mask.to(value.dtype)
    if layout == "bst":
        mask = mask.transpose(1, 2)
    dtype = getattr(torch, out_dtype) if out_dtype else None
    got = libmas.maximum_path(value.cuda(), mask.cuda(), layout=layout, dtype=dtype)
    want = libmas.maximum_path(value, mask, layout=layout, dtype=dtype)
    libmas.check_errors()
    assert got.is_cuda and got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("mask_dtype", ["float32", "bool", "bfloat16", "int64", "int16"])
@pytest.mark.parametrize("layout", ["bts", "bst"])
def test_maximum_path_cuda_mask_counted_by_the_kernel(rng, mask_dtype, layout):
    """The kernel counts the non-zero entries of the first column and row
    (mas_hard_cuda_mask; int16 has no C dtype and takes the reductions):
    equal to the CPU on prefix masks and on masks with holes and values
    other than 1, small T (one block an item) and T > 1000 (multi-kernel)."""
    for tokens, frames in ((60, 250), (1030, 1100)):
        value, x_len, y_len = case(rng, "float32", layout, "loglik", batch=3, tokens=tokens,
                                   frames=frames)
        mask = mask_from_lengths(x_len, y_len, tokens, frames).astype(np.float32)
        if rng.random() < 0.5:  # holes and other non-zero values in the first row/column
            mask[0, 1, 0] = 0.0           # x_len of item 0 one less (when >= 2)
            if y_len[1] > max(x_len[1], 2):
                mask[1, 0, 2] = 0.0       # y_len of item 1 one less
            mask[2, 0, 0] = 3.0           # counts as one
        mask = torch.from_numpy(mask).to(getattr(torch, mask_dtype))
        if layout == "bst":
            mask = mask.transpose(1, 2)
        # shortened lengths can leave no finite path (case() sprinkles -inf):
        # then both raise the same error
        got = libmas.maximum_path(value.cuda(), mask.cuda(), layout=layout)
        try:
            libmas.check_errors()
        except ValueError as e:
            got = str(e)
        try:
            want = libmas.maximum_path(value, mask, layout=layout)
        except ValueError as e:
            want = str(e)
        if isinstance(want, str) or isinstance(got, str):  # the same item and rule
            assert isinstance(got, str) and isinstance(want, str)
            assert got.split(": ", 1)[1] == want.split(": ", 1)[1], (got, want)
        else:
            assert torch.equal(got.cpu(), want)


def test_maximum_path_cuda_mask_length_errors(rng):
    value, x_len, y_len = case(rng, "float32", "bts", "loglik", batch=3, tokens=20, frames=50)
    mask = torch.from_numpy(mask_from_lengths(x_len, y_len, 20, 50))
    mask[1, :, 0] = 0  # x_len 0 for item 1
    libmas.maximum_path(value.cuda(), mask.cuda())
    with pytest.raises(ValueError, match="item 1"):
        libmas.check_errors()


def test_runs_on_current_stream_without_host_sync(rng):
    value, x_len, y_len = case(rng, "float32", "bts", "loglik", batch=3, tokens=120, frames=400)
    v = value.cuda()
    xl = torch.tensor(x_len, device="cuda")
    yl = torch.tensor(y_len, device="cuda")
    want = libmas.align(value, x_len, y_len, threads=1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.cuda.stream(side):
            got = libmas.align(v, xl, yl)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    side.synchronize()
    got.check()
    assert torch.equal(got.indices.cpu(), want.indices)
    assert torch.equal(got.durations.cpu(), want.durations)


@pytest.mark.parametrize("rule", ["nan", "inf", "x_gt_y", "no_path"])
def test_errors_name_the_item(rng, rule):
    value, x_len, y_len = case(rng, "float32", "bts", "loglik", batch=4, tokens=30, frames=90)
    bad = 2
    if rule in ("nan", "inf"):
        value[bad, 0, 0] = float("nan") if rule == "nan" else float("inf")
    elif rule == "x_gt_y":
        x_len[bad], y_len[bad] = 10, 9
    else:
        value[bad, x_len[bad] - 1, y_len[bad] - 1] = float("-inf")
    res = libmas.align(value.cuda(), x_len, y_len)
    with pytest.raises(ValueError, match=f"item {bad}"):
        res.check()
    # The failing item's outputs are those of the CPU: zeros, -1, -inf.
    assert torch.all(res.durations[bad] == 0)
    assert torch.all(res.indices[bad] == -1)
    assert res.score[bad].item() == float("-inf")
    libmas.check_errors()


def test_graph_capture_replays(rng):
    value, x_len, y_len = case(rng, "float32", "bts", "loglik", batch=3, tokens=64, frames=200)
    v = value.cuda()
    mask = torch.from_numpy(mask_from_lengths(x_len, y_len, 64, 200)).to(torch.float32).cuda()
    want = libmas.maximum_path(value, mask.cpu())
    libmas.check_errors()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        libmas.maximum_path(v, mask)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(side)
    libmas.check_errors()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = libmas.maximum_path(v, mask)
    for _ in range(2):
        out.fill_(7)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out.cpu(), want)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensor_on_other_device(rng):
    value, x_len, y_len = case(rng, "float32", "bts", "loglik", batch=2, tokens=50, frames=120)
    want = libmas.align(value, x_len, y_len, threads=1)
    with torch.cuda.device(0):
        got = libmas.align(value.to("cuda:1"), x_len, y_len)
        got.check()
    assert got.indices.device == torch.device("cuda:1")
    assert torch.equal(got.indices.cpu(), want.indices)


def test_long_item_pipelined_over_blocks(rng):
    """An item with more tokens than one block takes, so several blocks hand
    scores over through the global ring (the >2^31-element case is in
    tests/cuda/test_hard_cuda.cu --large)."""
    value, x_len, y_len = case(rng, "float32", "bts", "halves", batch=2, tokens=1500, frames=3100)
    x_len[0], y_len[0] = 1500, 3100
    got = libmas.align(value.cuda(), x_len, y_len)
    got.check()
    want = libmas.align(value, x_len, y_len)
    assert torch.equal(got.indices.cpu(), want.indices)
    assert torch.equal(got.score.cpu(), want.score)


@pytest.mark.parametrize("dtype_name", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("layout", ["bts", "bst"])
def test_align_cuda_long_form_equals_unbounded(rng, dtype_name, layout):
    """align(..., max_workspace_bytes=) on CUDA below the unbounded size runs
    the long form (the k = 1 chain's checkpointed Viterbi): the same bits as
    the unbounded call and the CPU's, at the smallest budget and one between;
    one byte less raises ValueError stating the smallest."""
    import re
    value, x_len, y_len = case(rng, dtype_name, layout, "loglik", batch=3, tokens=40, frames=300)
    gv = value.cuda()
    base = libmas.align(gv, x_len, y_len, layout=layout)
    cpu = libmas.align(value, x_len, y_len, layout=layout, threads=1)
    with pytest.raises(ValueError, match="needs on the GPU") as info:
        libmas.align(gv, x_len, y_len, layout=layout, max_workspace_bytes=1)
    least = int(re.search(r"needs on the GPU: (\d+) bytes", str(info.value)).group(1))
    full = int(re.search(r"unbounded: (\d+) bytes", str(info.value)).group(1))
    assert least < full
    for budget in (least, (least + full) // 2):
        r = libmas.align(gv, x_len, y_len, layout=layout, max_workspace_bytes=budget)
        r.check()
        for got, want in ((r, base), (r, cpu)):
            assert torch.equal(got.durations.cpu(), want.durations.cpu())
            assert torch.equal(got.indices.cpu(), want.indices.cpu())
            assert got.score.cpu().numpy().tobytes() == want.score.cpu().numpy().tobytes()
            assert torch.equal(got.path().cpu(), want.path().cpu())
    with pytest.raises(ValueError, match=f"needs on the GPU: {least} bytes"):
        libmas.align(gv, x_len, y_len, layout=layout, max_workspace_bytes=least - 1)


def test_align_cuda_long_form_errors_name_the_item(rng):
    value, x_len, y_len = case(rng, "float32", "bts", "loglik", batch=4, tokens=30, frames=90)
    value[1, 0, 0] = float("nan")
    x_len[2], y_len[2] = 10, 9
    with pytest.raises(ValueError, match="needs on the GPU") as info:
        libmas.align(value.cuda(), x_len, y_len, max_workspace_bytes=1)
    import re
    least = int(re.search(r"needs on the GPU: (\d+) bytes", str(info.value)).group(1))
    res = libmas.align(value.cuda(), x_len, y_len, max_workspace_bytes=least)
    with pytest.raises(ValueError, match="item 1"):
        res.check()
    assert torch.all(res.durations[1:3] == 0) and torch.all(res.indices[1:3] == -1)
    libmas.check_errors()
