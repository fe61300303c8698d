"""The public ops as registered PyTorch custom operators (libmas._ops):
torch.library.opcheck for every op, torch.compile(fullgraph=True) and
torch.export of a module calling align and forward_sum, CUDA graph capture
through the op, the mixed-device error, and lengths taken from a mask."""

import numpy as np
import pytest

import libmas
from conftest import mask_from_lengths, random_lengths, random_values

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and libmas.has_cuda() else [])
needs_cuda = pytest.mark.skipif("cuda" not in DEVICES, reason="needs a CUDA device and backend")


def case(rng, device, batch=3, tokens=5, frames=12, dtype=np.float64):
    x_len, y_len = random_lengths(rng, batch, tokens, frames)
    value = torch.from_numpy(random_values(rng, (batch, tokens, frames), "loglik", dtype))
    return (value.to(device), torch.from_numpy(x_len).to(device),
            torch.from_numpy(y_len).to(device))


@pytest.fixture(scope="module")
def ops():
    return libmas.torch_ops()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bst", [False, True])
def test_opcheck_hard(rng, ops, device, bst):
    value, x_len, y_len = case(rng, device, dtype=np.float32)
    if bst:
        value = value.transpose(1, 2)
    mask = torch.from_numpy(mask_from_lengths(x_len.cpu(), y_len.cpu(), 5, 12)).to(device)
    if bst:
        mask = mask.transpose(1, 2)
    torch.library.opcheck(ops.align, (value, x_len, y_len, bst, 1))
    torch.library.opcheck(ops.maximum_path, (value, mask, bst, torch.float32))
    torch.library.opcheck(ops.maximum_path, (value, mask, bst, torch.bool))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_forward_sum_posterior(rng, ops, device):
    value, x_len, y_len = case(rng, device)
    torch.library.opcheck(ops.posterior, (value, x_len, y_len, False, 1))
    for with_posterior in (False, True):
        v = value.clone().requires_grad_(True)
        torch.library.opcheck(ops.forward_sum, (v, x_len, y_len, False, 1, with_posterior))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["monotonic_attention", "monotonic_attention_m2m"])
@pytest.mark.parametrize("lengths", [False, True])
def test_opcheck_attention(rng, ops, device, name, lengths):
    logits, n, m = case(rng, device, tokens=6, frames=9)
    if not lengths:
        n = m = None
    else:
        n = torch.clamp(n, max=6)
        m = torch.clamp(m, max=9)
    op = getattr(ops, name)
    torch.library.opcheck(op, (logits.clone().requires_grad_(True), n, m, 1))
    kind = 0 if name == "monotonic_attention" else 1
    log_phi = op(logits, n, m, 1)
    grad = torch.randn_like(log_phi)
    torch.library.opcheck(ops.monotonic_attention_backward, (logits, n, m, log_phi, grad, kind, 1))


def test_op_path_equals_direct_path(rng, ops):
    """The registered ops run the same code: results equal bit for bit,
    and gradients too."""
    from libmas import _ops

    value, x_len, y_len = case(rng, "cpu")
    mask = torch.from_numpy(mask_from_lengths(x_len, y_len, 5, 12))
    results = []
    for always in (False, True):
        _ops.ALWAYS = always
        try:
            res = libmas.align(value, x_len, y_len)
            v = value.clone().requires_grad_(True)
            log_z = libmas.forward_sum(v, x_len, y_len)
            log_z.sum().backward()
            a = value.clone().requires_grad_(True)
            log_phi = libmas.monotonic_attention_m2m(a, x_len, y_len)
            log_phi[torch.isfinite(log_phi)].sum().backward()
            results.append((libmas.maximum_path(value, mask), res.durations, res.indices,
                            res.score, res.path(), log_z.detach(), v.grad,
                            libmas.posterior(value, x_len, y_len), log_phi.detach(), a.grad))
        finally:
            _ops.ALWAYS = False
    for direct, through_op in zip(*results):
        assert torch.equal(direct, through_op)


class Aligner(torch.nn.Module):
    """A small training-step piece: hard durations and the forward-sum loss."""

    def forward(self, value, x_len, y_len):
        res = libmas.align(value.detach(), x_len, y_len)
        log_z = libmas.forward_sum(value, x_len, y_len)
        return res.durations, res.score, -log_z.sum()


def test_compile_fullgraph_has_no_graph_break(rng):
    value, x_len, y_len = case(rng, "cpu", batch=4, tokens=6, frames=15)
    model = Aligner()
    v_eager = value.clone().requires_grad_(True)
    want = model(v_eager, x_len, y_len)
    want[2].backward()
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    v = value.clone().requires_grad_(True)
    got = compiled(v, x_len, y_len)
    got[2].backward()
    for a, b in zip(want, got):
        assert torch.equal(a, b)
    assert torch.equal(v_eager.grad, v.grad)


def test_compile_inductor_attention(rng):
    logits, n, m = case(rng, "cpu", tokens=6, frames=9)

    def step(x):
        return libmas.monotonic_attention(x, None, None, threads=1).exp().sum()

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True)
    x = logits.clone().requires_grad_(True)
    compiled(x).backward()
    y = logits.clone().requires_grad_(True)
    step(y).backward()
    assert torch.allclose(x.grad, y.grad, rtol=1e-12, atol=1e-12)


def test_export(rng):
    value, x_len, y_len = case(rng, "cpu", batch=4, tokens=6, frames=15)
    model = Aligner()
    exported = torch.export.export(model, (value, x_len, y_len))
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert "libmas.align.default" in targets and "libmas.forward_sum.default" in targets
    got = exported.module()(value, x_len, y_len)
    want = model(value, x_len, y_len)
    for a, b in zip(want, got):
        assert torch.equal(a, b)
    other, ox, oy = case(rng, "cpu", batch=4, tokens=6, frames=15)
    for a, b in zip(model(other, ox, oy), exported.module()(other, ox, oy)):
        assert torch.equal(a, b)


def test_cpu_errors_raise_through_the_op(rng, ops):
    value, x_len, y_len = case(rng, "cpu")
    value[1, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"libmas.align: item 1\b"):
        ops.align(value, x_len, y_len, False, 1)


# -- devices -------------------------------------------------------------------

def test_device_check_names_argument_and_devices():
    from libmas._arrays import check_device

    cuda0, cuda1, cpu = torch.device("cuda:0"), torch.device("cuda:1"), torch.device("cpu")
    with pytest.raises(ValueError, match=r"libmas.align: x_lengths is on cuda:1 but value "
                                         r"is on cuda:0"):
        check_device("libmas.align: x_lengths", cuda1, cuda0)
    check_device("x", cpu, cuda0)    # host lengths with CUDA values: copied
    check_device("x", cuda0, cuda0)
    check_device("x", cpu, cpu)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_mixed_devices_raise(rng):
    value, x_len, y_len = case(rng, "cuda:0")
    with pytest.raises(ValueError, match=r"x_lengths is on cuda:1 but value is on cuda:0"):
        libmas.align(value, x_len.to("cuda:1"), y_len)
    with pytest.raises(ValueError, match=r"y_lengths is on cuda:1 but value is on cuda:0"):
        libmas.forward_sum(value, x_len, y_len.to("cuda:1"))
    mask = torch.ones_like(value)
    with pytest.raises(ValueError, match=r"mask is on cuda:1 but value is on cuda:0"):
        libmas.maximum_path(value, mask.to("cuda:1"))


@needs_cuda
def test_cpu_lengths_with_cuda_values_no_host_sync(rng):
    value, x_len, y_len = case(rng, "cpu", batch=4, tokens=20, frames=60)
    want = libmas.align(value, x_len, y_len)
    v = value.cuda()
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = libmas.align(v, x_len, y_len)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    got.check()
    assert torch.equal(got.durations.cpu(), want.durations)


@needs_cuda
def test_graph_capture_of_ops_equals_eager(rng, ops):
    value, x_len, y_len = case(rng, "cuda", batch=3, tokens=20, frames=60, dtype=np.float32)
    mask = torch.from_numpy(mask_from_lengths(x_len.cpu(), y_len.cpu(), 20, 60)).cuda()
    eager = (libmas.maximum_path(value, mask), libmas.align(value, x_len, y_len).durations,
             libmas.forward_sum(value, x_len, y_len), libmas.monotonic_attention(value))
    libmas.check_errors()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture
        ops.maximum_path(value, mask, False, torch.float32)
        ops.align(value, x_len, y_len, False, 0)
        ops.forward_sum(value, x_len, y_len, False, 0, False)
        ops.monotonic_attention(value, None, None, 0)
    torch.cuda.current_stream().wait_stream(side)
    libmas.check_errors()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = (ops.maximum_path(value, mask, False, torch.float32),
               ops.align(value, x_len, y_len, False, 0)[0],
               ops.forward_sum(value, x_len, y_len, False, 0, False)[0],
               ops.monotonic_attention(value, None, None, 0))
    for _ in range(2):
        for o in out:
            o.fill_(7)
        graph.replay()
        torch.cuda.synchronize()
        for a, b in zip(eager, out):
            assert torch.equal(a, b)


@needs_cuda
def test_compile_and_export_cuda(rng):
    value, x_len, y_len = case(rng, "cuda", batch=4, tokens=6, frames=15)
    model = Aligner()
    want = model(value, x_len, y_len)
    torch._dynamo.reset()
    got = torch.compile(model, fullgraph=True)(value, x_len, y_len)
    exported = torch.export.export(model, (value, x_len, y_len)).module()(value, x_len, y_len)
    libmas.check_errors()
    # libmas's outputs bit for bit; the loss is a sum that inductor's CUDA
    # reduction may add in another order
    for a, b, c in zip(want[:2], got[:2], exported[:2]):
        assert torch.equal(a, b) and torch.equal(a, c)
    torch.testing.assert_close(got[2], want[2], rtol=1e-12, atol=0)
    torch.testing.assert_close(exported[2], want[2], rtol=1e-12, atol=0)


# -- lengths from a mask -------------------------------------------------------

@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("bst", [False, True])
def test_lengths_from_mask_equal_the_masks(rng, kind, bst):
    from libmas import _arrays

    batch, tokens, frames = 7, 9, 30
    x_len, y_len = random_lengths(rng, batch, tokens, frames)
    mask = mask_from_lengths(x_len, y_len, tokens, frames, dtype=rng.choice(
        [np.float32, np.bool_, np.int64]))
    if bst:
        mask = np.ascontiguousarray(mask.transpose(0, 2, 1))
    if kind == "torch":
        mask = torch.from_numpy(mask)
        frame = _arrays.TorchFrame(mask)
    else:
        frame = _arrays.NumpyFrame()
    got_x, got_y = _arrays.lengths_from_mask(frame, mask, bst, "test")
    assert np.array_equal(np.asarray(got_x), x_len)
    assert np.array_equal(np.asarray(got_y), y_len)


def test_non_prefix_mask_uses_first_row_and_column_sums(rng):
    """Documented: x_len is the number of non-zero cells in the first frame's
    column, y_len in the first token's row (Glow-TTS's sums), wherever they are."""
    value = torch.from_numpy(random_values(rng, (1, 4, 10), "loglik"))
    mask = torch.zeros(1, 4, 10)
    mask[0, :3, 0] = 1          # x_len 3
    mask[0, 0, [0, 2, 5, 9]] = 1  # y_len 4 (holes: not a prefix)
    mask[0, 3, 8] = 1           # a cell off the first row/column: ignored
    got = libmas.maximum_path(value, mask)
    want = libmas.align(value, [3], [4]).path()
    assert torch.equal(got, want)
