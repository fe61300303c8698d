"""libmas on PyTorch CPU tensors: float32/float64/float16/bfloat16, both
layouts, non-contiguous views (transposes, steps, batch broadcast), torch in
and torch out, the Glow-TTS drop-in on masks, inputs never modified."""

import numpy as np
import pytest

import libmas
import reference as ref
from conftest import mask_from_lengths, random_lengths, random_values, sprinkle_neg_inf

TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16"]
STYLES = ["contiguous", "transposed", "stepped", "sliced", "broadcast"]


def exact_values(rng, torch, shape, kind, dtype_name):
    """A torch tensor of dtype_name whose values are exactly representable
    (float16 generated through NumPy, bfloat16 rounded through float32), and
    its float64 NumPy copy for the reference."""
    if dtype_name == "bfloat16":
        base = random_values(rng, shape, kind, np.float32)
        t = torch.from_numpy(base).to(torch.bfloat16)
    else:
        t = torch.from_numpy(random_values(rng, shape, kind, np.dtype(dtype_name).type))
    return t


def to_numpy_for_reference(t):
    """float32 for the narrow types (exact widening), float64 stays."""
    torch = pytest.importorskip("torch")
    if t.dtype == torch.float64:
        return t.numpy().copy()
    return t.to(torch.float32).numpy().copy()


def in_memory(torch, logical, style):
    """A tensor equal to `logical` laid out by style."""
    if style == "contiguous":
        return logical.contiguous()
    if style == "transposed":
        return logical.transpose(1, 2).contiguous().transpose(1, 2)
    if style == "stepped":
        b, m, n = logical.shape
        base = torch.full((b, m, 2 * n), float("nan"), dtype=logical.dtype)
        base[:, :, ::2] = logical
        return base[:, :, ::2]
    if style == "sliced":
        b, m, n = logical.shape
        base = torch.full((b + 2, m + 1, n + 4), float("nan"), dtype=logical.dtype)
        base[2:, 1:, 4:] = logical
        return base[2:, 1:, 4:]
    raise AssertionError(style)


def as_layout(x, layout):
    return x if layout == "bts" else x.transpose(1, 2)


def check_align(torch, result, expected, layout, value):
    assert isinstance(result.durations, torch.Tensor)
    assert result.durations.dtype == torch.int32 and result.indices.dtype == torch.int32
    assert result.durations.device == value.device
    np.testing.assert_array_equal(result.durations.numpy(), expected.durations)
    np.testing.assert_array_equal(result.indices.numpy(), expected.indices)
    want_score = torch.float64 if value.dtype == torch.float64 else torch.float32
    assert result.score.dtype == want_score
    got = result.score.numpy()
    assert got.tobytes() == np.asarray(expected.score, dtype=got.dtype).tobytes(), (
        f"score {got} != {expected.score}")
    path = result.path()
    assert path.dtype == value.dtype
    np.testing.assert_array_equal(path.to(torch.int64).numpy(), as_layout_np(expected.path, layout))


def as_layout_np(x, layout):
    return x if layout == "bts" else x.transpose(0, 2, 1)


@pytest.mark.parametrize("dtype_name", TORCH_DTYPES)
@pytest.mark.parametrize("layout", ["bts", "bst"])
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("kind", ["loglik", "halves", "huge"])
def test_align_matches_reference(torch, rng, dtype_name, layout, style, kind):
    for _ in range(2):
        batch = int(rng.integers(1, 6))
        tokens = int(rng.integers(1, 20))
        frames = int(rng.integers(tokens, 70))
        x_len, y_len = random_lengths(rng, batch, tokens, frames)
        if style == "broadcast":
            # One item's data shared by every item (batch stride 0).
            one = exact_values(rng, torch, (1, tokens, frames), kind, dtype_name)
            value = one.expand(batch, tokens, frames)
            logical = as_layout(value, layout)
            passed = logical
        else:
            value = exact_values(rng, torch, (batch, tokens, frames), kind, dtype_name)
            if rng.random() < 0.3:
                arr = to_numpy_for_reference(value)
                sprinkle_neg_inf(rng, arr, x_len, y_len)
                value = torch.from_numpy(arr).to(value.dtype)
            passed = in_memory(torch, as_layout(value, layout), style)
        expected = ref.hard_mas(to_numpy_for_reference(value.contiguous()), x_len, y_len)
        lengths = [(x_len, y_len), (torch.from_numpy(x_len), torch.from_numpy(y_len)),
                   (x_len.tolist(), y_len.tolist())][int(rng.integers(0, 3))]
        threads = [None, 1, 2][int(rng.integers(0, 3))]
        result = libmas.align(passed, *lengths, layout=layout, threads=threads)
        check_align(torch, result, expected, layout, value)


@pytest.mark.parametrize("layout", ["bts", "bst"])
@pytest.mark.parametrize("dtype_name", TORCH_DTYPES)
def test_maximum_path_is_the_glow_tts_drop_in(torch, rng, layout, dtype_name):
    for _ in range(4):
        batch = int(rng.integers(1, 5))
        tokens = int(rng.integers(1, 25))
        frames = int(rng.integers(tokens, 90))
        x_len, y_len = random_lengths(rng, batch, tokens, frames)
        value = exact_values(rng, torch, (batch, tokens, frames), "loglik", dtype_name)
        mask_np = mask_from_lengths(x_len, y_len, tokens, frames)
        mask = torch.from_numpy(mask_np).to(value.dtype)
        path = libmas.maximum_path(as_layout(value, layout), as_layout(mask, layout),
                                   layout=layout)
        assert isinstance(path, torch.Tensor) and path.dtype == value.dtype
        assert tuple(path.shape) == tuple(as_layout(value, layout).shape)
        expected = ref.hard_mas(to_numpy_for_reference(value), x_len, y_len).path
        np.testing.assert_array_equal(as_layout(path, layout).to(torch.int64).numpy(), expected)
        if dtype_name == "float32":
            glow = ref.glow_tts_maximum_path(value.numpy(), mask_np)
            np.testing.assert_array_equal(as_layout(path, layout).numpy(), glow)


@pytest.mark.parametrize("out_dtype", ["bool", "int32", "int64", "uint8", "float16",
                                       "bfloat16", "float64"])
def test_path_dtypes(torch, rng, out_dtype):
    value = exact_values(rng, torch, (2, 6, 17), "halves", "float32")
    x_len, y_len = np.array([6, 2]), np.array([17, 9])
    mask = torch.from_numpy(mask_from_lengths(x_len, y_len, 6, 17))
    want = ref.hard_mas(value.numpy(), x_len, y_len).path
    dt = getattr(torch, out_dtype)
    for path in (libmas.maximum_path(value, mask, dtype=dt),
                 libmas.align(value, x_len, y_len).path(dtype=dt)):
        assert path.dtype == dt
        np.testing.assert_array_equal(path.to(torch.int64).numpy(), want)


def test_threads_give_identical_results(torch, rng):
    value = exact_values(rng, torch, (4, 30, 120), "halves", "float32")
    x_len, y_len = random_lengths(rng, 4, 30, 120)
    a = libmas.align(value, x_len, y_len, threads=1)
    b = libmas.align(value, x_len, y_len, threads=None)
    assert torch.equal(a.durations, b.durations) and torch.equal(a.indices, b.indices)
    assert a.score.numpy().tobytes() == b.score.numpy().tobytes()


@pytest.mark.parametrize("style", ["contiguous", "transposed", "stepped", "sliced"])
def test_inputs_are_not_modified(torch, rng, style):
    value = exact_values(rng, torch, (3, 8, 25), "loglik", "float32")
    x_len, y_len = random_lengths(rng, 3, 8, 25)
    mask = torch.from_numpy(mask_from_lengths(x_len, y_len, 8, 25))
    view = in_memory(torch, value, style)
    # Snapshot the whole storage the view lives in, gaps included.
    storage_before = view.untyped_storage().tolist() if hasattr(view, "untyped_storage") else None
    xs, ys = torch.from_numpy(x_len.copy()), torch.from_numpy(y_len.copy())
    xs_before, ys_before, mask_before = xs.clone(), ys.clone(), mask.clone()
    libmas.align(view, xs, ys)
    libmas.maximum_path(view, mask)
    if storage_before is not None:
        assert view.untyped_storage().tolist() == storage_before
    assert torch.equal(view, value)
    assert torch.equal(xs, xs_before) and torch.equal(ys, ys_before)
    assert torch.equal(mask, mask_before)


def test_requires_grad_input_is_accepted_and_untouched(torch, rng):
    """Training code calls maximum_path on a tensor that is part of a graph
    (usually under no_grad); the result carries no gradient."""
    value = exact_values(rng, torch, (2, 5, 14), "loglik", "float32").requires_grad_(True)
    mask = torch.ones(2, 5, 14)
    with torch.no_grad():
        path = libmas.maximum_path(value, mask)
    assert not path.requires_grad
    want = ref.hard_mas(value.detach().numpy(), [5, 5], [14, 14]).path
    np.testing.assert_array_equal(path.to(torch.int64).numpy(), want)
