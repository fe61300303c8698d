"""Bad input raises ValueError or TypeError naming the item and the rule,
for NumPy arrays and PyTorch tensors; values outside the lengths are never
an error; inputs are unchanged even when the call fails."""

import re

import numpy as np
import pytest

import libmas
from conftest import mask_from_lengths, random_values

ARRAY_KINDS = ["numpy", "torch"]


def make(kind, arr):
    if kind == "numpy":
        return arr
    torch = pytest.importorskip("torch")
    return torch.from_numpy(arr)


def snapshot(x):
    if isinstance(x, np.ndarray):
        return x.tobytes()
    return x.numpy().tobytes()


def base_case(rng, batch=4, tokens=6, frames=20):
    value = random_values(rng, (batch, tokens, frames), "loglik")
    x_len = np.array([tokens, 3, 2, 1][:batch] + [1] * max(0, batch - 4), np.int64)
    y_len = np.array([frames, 10, 7, 5][:batch] + [5] * max(0, batch - 4), np.int64)
    return value, x_len, y_len


def raises_for_item(kind, value, x_len, y_len, item, rule, *, mask=None):
    """align (and maximum_path when a mask is given) raise ValueError naming
    the item and the rule; the inputs are unchanged."""
    v = make(kind, value)
    before = snapshot(v)
    pattern = rf"item {item}\b.*{rule}"
    with pytest.raises(ValueError, match=pattern):
        libmas.align(v, x_len, y_len)
    with pytest.raises(ValueError, match=pattern):
        libmas.align(v, x_len, y_len, threads=1)
    if mask is not None:
        with pytest.raises(ValueError, match=pattern):
            libmas.maximum_path(v, make(kind, mask))
    assert snapshot(v) == before


NONFINITE = re.escape("NaN or +inf")


@pytest.mark.parametrize("kind", ARRAY_KINDS)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nonfinite_inside_the_lengths(rng, kind, bad):
    value, x_len, y_len = base_case(rng)
    value[2, 1, 4] = bad  # inside item 2 (x_len 2, y_len 7), on a path
    mask = mask_from_lengths(x_len, y_len, 6, 20)
    raises_for_item(kind, value, x_len, y_len, 2, NONFINITE, mask=mask)


@pytest.mark.parametrize("kind", ARRAY_KINDS)
def test_nonfinite_outside_the_lengths_is_fine(rng, kind):
    value, x_len, y_len = base_case(rng)
    clean = libmas.align(value.copy(), x_len, y_len)
    outside = mask_from_lengths(x_len, y_len, 6, 20) == 0
    value[outside] = np.where(np.arange(outside.sum()) % 2 == 0, np.nan, np.inf)
    result = libmas.align(make(kind, value), x_len, y_len)
    np.testing.assert_array_equal(np.asarray(result.indices), clean.indices)
    path = libmas.maximum_path(make(kind, value), make(kind, mask_from_lengths(x_len, y_len, 6, 20)))
    np.testing.assert_array_equal(np.asarray(path), clean.path())


@pytest.mark.parametrize("kind", ARRAY_KINDS)
def test_no_finite_path(rng, kind):
    value, x_len, y_len = base_case(rng)
    value[1, :3, 5] = -np.inf  # a whole frame of item 1 (x_len 3)
    mask = mask_from_lengths(x_len, y_len, 6, 20)
    raises_for_item(kind, value, x_len, y_len, 1, "no finite path", mask=mask)


@pytest.mark.parametrize("kind", ARRAY_KINDS)
def test_neg_inf_cells_with_a_finite_path_are_fine(rng, kind):
    value, x_len, y_len = base_case(rng)
    value[0, 1:, 0] = -np.inf  # unreachable anyway
    value[0, 0, 1:4] = -np.inf  # forces a move at frame 1
    result = libmas.align(make(kind, value), x_len, y_len)
    assert np.isfinite(np.asarray(result.score)).all()
    assert list(np.asarray(result.indices)[0, :2]) == [0, 1]


@pytest.mark.parametrize("kind", ARRAY_KINDS)
@pytest.mark.parametrize("case", ["x_gt_y", "x_zero", "x_negative", "x_gt_T", "y_gt_S", "y_zero"])
def test_bad_lengths(rng, kind, case):
    value, x_len, y_len = base_case(rng, tokens=6, frames=20)
    item = 3
    if case == "x_gt_y":
        x_len[item], y_len[item] = 5, 4
        rule = re.escape("x_len > y_len")
    else:
        x_len[item], y_len[item] = {"x_zero": (0, 5), "x_negative": (-2, 5), "x_gt_T": (7, 12),
                                    "y_gt_S": (2, 21), "y_zero": (0, 0)}[case]
        rule = "bad length"
    raises_for_item(kind, value, x_len, y_len, item, rule)


@pytest.mark.parametrize("kind", ARRAY_KINDS)
def test_x_gt_y_through_the_mask(rng, kind):
    value = random_values(rng, (2, 6, 4), "loglik")
    mask = mask_from_lengths([2, 5], [4, 3], 6, 4)
    with pytest.raises(ValueError, match=r"item 1\b.*" + re.escape("x_len > y_len")):
        libmas.maximum_path(make(kind, value), make(kind, mask))


@pytest.mark.parametrize("kind", ARRAY_KINDS)
def test_lowest_bad_item_is_named(rng, kind):
    value, x_len, y_len = base_case(rng)
    value[3, 0, 2] = np.nan
    x_len[1], y_len[1] = 4, 3
    raises_for_item(kind, value, x_len, y_len, 1, re.escape("x_len > y_len"))


@pytest.mark.parametrize("kind", ARRAY_KINDS)
def test_bad_shapes_and_arguments(rng, kind):
    value, x_len, y_len = base_case(rng)
    v = make(kind, value)
    with pytest.raises(ValueError, match="dimensions"):
        libmas.align(make(kind, value[0]), x_len[:1], y_len[:1])
    with pytest.raises(ValueError, match="dimensions"):
        libmas.maximum_path(make(kind, value[None]), make(kind, value[None]))
    with pytest.raises(ValueError, match="layout"):
        libmas.align(v, x_len, y_len, layout="tbs")
    with pytest.raises(ValueError, match="x_lengths"):
        libmas.align(v, x_len[:3], y_len)
    with pytest.raises(ValueError, match="y_lengths"):
        libmas.align(v, x_len, y_len.reshape(2, 2))
    with pytest.raises(TypeError, match="integers"):
        libmas.align(v, x_len.astype(np.float32), y_len)
    with pytest.raises(ValueError, match="mask"):
        libmas.maximum_path(v, make(kind, np.ones((4, 6, 19), np.float32)))
    for threads in (0, -1, True):
        with pytest.raises(ValueError, match="threads"):
            libmas.align(v, x_len, y_len, threads=threads)
    with pytest.raises(ValueError):
        libmas.align(make(kind, np.zeros((2, 0, 5), np.float32)), [1, 1], [1, 1])


@pytest.mark.parametrize("kind", ARRAY_KINDS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_])
def test_bad_value_dtype(rng, kind, dtype):
    value = np.zeros((2, 3, 5), dtype=dtype)
    with pytest.raises(TypeError, match="float32"):
        libmas.align(make(kind, value), [3, 2], [5, 4])
    with pytest.raises(TypeError, match="float32"):
        libmas.maximum_path(make(kind, value), make(kind, np.ones((2, 3, 5), np.float32)))


def test_bad_output_dtype_and_value_type(rng):
    value, x_len, y_len = base_case(rng)
    mask = mask_from_lengths(x_len, y_len, 6, 20)
    with pytest.raises(TypeError):
        libmas.maximum_path(value, mask, dtype=np.complex64)
    with pytest.raises(TypeError, match="value"):
        libmas.align(value.tolist(), x_len, y_len)


def test_torch_bad_output_dtype(torch, rng):
    value, x_len, y_len = base_case(rng)
    mask = torch.from_numpy(mask_from_lengths(x_len, y_len, 6, 20))
    with pytest.raises(TypeError):
        libmas.maximum_path(torch.from_numpy(value), mask, dtype=torch.complex64)
    with pytest.raises(TypeError):
        libmas.maximum_path(torch.from_numpy(value), mask, dtype="no_such_dtype")
