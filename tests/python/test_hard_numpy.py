"""libmas.align and libmas.maximum_path on NumPy arrays, against the
independent references in reference.py: bit-exact durations, indices, score
and path over random lengths, both layouts, strided views, dtypes, tie-heavy,
-inf and huge inputs; the Glow-TTS drop-in on masks; inputs never modified."""

import numpy as np
import pytest

import libmas
import reference as ref
from conftest import mask_from_lengths, random_lengths, random_values, sprinkle_neg_inf

NUMPY_DTYPES = [np.float32, np.float64, np.float16]
STYLES = ["contiguous", "transposed", "padded", "stepped", "reversed"]


def in_memory(rng, logical, style):
    """An array equal to `logical` whose memory is laid out by style; returns
    (view, base) where base owns every byte the view may touch or skip."""
    if style == "contiguous":
        base = np.ascontiguousarray(logical)
        return base, base
    if style == "transposed":
        # Stored with the last two axes swapped, then viewed back.
        base = np.ascontiguousarray(logical.transpose(0, 2, 1))
        return base.transpose(0, 2, 1), base
    if style == "padded":
        b, m, n = logical.shape
        base = np.full((b + 1, m + 3, n + 5), np.nan, dtype=logical.dtype)
        base[1:, 1:m + 1, 3:n + 3] = logical
        return base[1:, 1:m + 1, 3:n + 3], base
    if style == "stepped":
        b, m, n = logical.shape
        base = np.full((b, m, 2 * n), np.nan, dtype=logical.dtype)
        base[:, :, ::2] = logical
        return base[:, :, ::2], base
    if style == "reversed":
        # Negative strides on the last two axes, same logical content.
        base = np.ascontiguousarray(logical[:, ::-1, ::-1])
        return base[:, ::-1, ::-1], base
    raise AssertionError(style)


def as_layout(value_bts, layout):
    return value_bts if layout == "bts" else value_bts.transpose(0, 2, 1)


def assert_same_bits(got, want, what):
    got = np.asarray(got)
    want = np.asarray(want, dtype=got.dtype)
    assert got.dtype == want.dtype, what
    assert got.tobytes() == want.tobytes(), f"{what}: {got} != {want}"


def check_align(result, expected, layout, value_dtype):
    assert isinstance(result.durations, np.ndarray)
    assert result.durations.dtype == np.int32 and result.indices.dtype == np.int32
    np.testing.assert_array_equal(result.durations, expected.durations)
    np.testing.assert_array_equal(result.indices, expected.indices)
    assert result.score.dtype == ref.accumulation_dtype(value_dtype)
    assert_same_bits(result.score, expected.score, "score")
    path = result.path()
    assert path.dtype == np.dtype(value_dtype)
    np.testing.assert_array_equal(path, as_layout(expected.path, layout))


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("layout", ["bts", "bst"])
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("kind", ["loglik", "halves", "huge"])
def test_align_matches_reference(rng, dtype, layout, style, kind):
    for _ in range(3):
        batch = int(rng.integers(1, 6))
        tokens = int(rng.integers(1, 24))
        frames = int(rng.integers(tokens, 80))
        x_len, y_len = random_lengths(rng, batch, tokens, frames)
        value = random_values(rng, (batch, tokens, frames), kind, dtype)
        if rng.random() < 0.3:
            sprinkle_neg_inf(rng, value, x_len, y_len)
        if rng.random() < 0.5:
            # NaN and +inf outside the lengths are never read.
            outside = mask_from_lengths(x_len, y_len, tokens, frames) == 0
            value[outside] = np.where(rng.random(outside.sum()) < 0.5, np.nan, np.inf)
        expected = ref.hard_mas(value, x_len, y_len)
        view, _ = in_memory(rng, as_layout(value, layout), style)
        threads = [None, 1, 2, 3][int(rng.integers(0, 4))]
        result = libmas.align(view, x_len, y_len, layout=layout, threads=threads)
        check_align(result, expected, layout, dtype)


def test_align_invariants_on_large_batch(rng):
    batch, tokens, frames = 4, 300, 1200
    x_len = np.array([300, 1, 157, 200])
    y_len = np.array([1200, 1200, 700, 200])
    value = random_values(rng, (batch, tokens, frames), "loglik")
    result = libmas.align(value, x_len, y_len)
    expected = ref.hard_mas(value, x_len, y_len)
    check_align(result, expected, "bts", np.float32)
    for b in range(batch):
        assert result.durations[b].sum() == y_len[b]
        assert (result.durations[b, x_len[b]:] == 0).all()
        assert (result.durations[b, :x_len[b]] >= 1).all()
        idx = result.indices[b]
        assert (idx[y_len[b]:] == -1).all()
        steps = np.diff(idx[:y_len[b]])
        assert set(np.unique(steps)).issubset({0, 1})
        assert idx[0] == 0 and idx[y_len[b] - 1] == x_len[b] - 1


@pytest.mark.parametrize("layout", ["bts", "bst"])
def test_maximum_path_is_the_glow_tts_drop_in(rng, layout):
    """Normal inputs: the -1e9 sentinel never decides, so the paths agree
    exactly with the Glow-TTS loop."""
    for _ in range(6):
        batch = int(rng.integers(1, 6))
        tokens = int(rng.integers(1, 30))
        frames = int(rng.integers(tokens, 100))
        x_len, y_len = random_lengths(rng, batch, tokens, frames)
        value = rng.standard_normal((batch, tokens, frames)).astype(np.float32)
        if rng.random() < 0.5:
            value = np.round(value * 2) / 2 + np.float32(0)  # ties
        mask = mask_from_lengths(x_len, y_len, tokens, frames)
        glow = ref.glow_tts_maximum_path(value, mask)
        path = libmas.maximum_path(as_layout(value, layout), as_layout(mask, layout),
                                   layout=layout)
        assert isinstance(path, np.ndarray) and path.dtype == np.float32
        np.testing.assert_array_equal(path, as_layout(glow, layout))
        np.testing.assert_array_equal(path, as_layout(ref.hard_mas(value, x_len, y_len).path, layout))


def test_maximum_path_where_the_sentinel_decides():
    """Scores below -1e9: the Glow-TTS loop's sentinel picks a worse path;
    libmas returns the true optimum (checked by brute force)."""
    v = np.zeros((1, 3, 4), np.float32)
    v[0, 0, 1] = -3e9
    v[0, 1, 1] = -2e9
    v[0, 1, 2] = 1e8
    mask = np.ones_like(v)
    glow = ref.glow_tts_maximum_path(v, mask)
    ours = libmas.maximum_path(v, mask)
    best, paths = ref.brute_force(v[0], 3, 4)
    want = ref.tie_rule_choice(paths)
    assert tuple(np.argmax(ours[0], axis=0)) == want == (0, 1, 1, 2)
    assert tuple(np.argmax(glow[0], axis=0)) != want  # the case is meaningful
    assert libmas.align(v, [3], [4]).score[0] == best


@pytest.mark.parametrize("out_dtype", [None, np.float32, np.float64, np.float16, np.int32,
                                       np.int64, np.uint8, np.bool_])
def test_path_dtypes(rng, out_dtype):
    value = random_values(rng, (2, 7, 19), "halves")
    x_len, y_len = np.array([7, 3]), np.array([19, 11])
    expected = ref.hard_mas(value, x_len, y_len).path
    mask = mask_from_lengths(x_len, y_len, 7, 19)
    for path in (libmas.maximum_path(value, mask, dtype=out_dtype),
                 libmas.align(value, x_len, y_len).path(dtype=out_dtype)):
        assert path.dtype == np.dtype(np.float32 if out_dtype is None else out_dtype)
        np.testing.assert_array_equal(path.astype(np.int64), expected)


def test_threads_give_identical_results(rng):
    value = random_values(rng, (5, 40, 150), "halves")
    x_len, y_len = random_lengths(rng, 5, 40, 150)
    runs = [libmas.align(value, x_len, y_len, threads=t) for t in (1, 2, 3, None)]
    for other in runs[1:]:
        assert other.durations.tobytes() == runs[0].durations.tobytes()
        assert other.indices.tobytes() == runs[0].indices.tobytes()
        assert other.score.tobytes() == runs[0].score.tobytes()
    # One long item: more threads than items splits tokens, not items.
    one = random_values(rng, (1, 200, 800), "loglik")
    a = libmas.align(one, [200], [800], threads=1)
    b = libmas.align(one, [200], [800], threads=None)
    assert a.indices.tobytes() == b.indices.tobytes() and a.score.tobytes() == b.score.tobytes()


@pytest.mark.parametrize("style", STYLES)
def test_inputs_are_not_modified(rng, style):
    value = random_values(rng, (3, 9, 30), "loglik")
    x_len, y_len = random_lengths(rng, 3, 9, 30)
    mask = mask_from_lengths(x_len, y_len, 9, 30)
    view, base = in_memory(rng, value, style)
    before = base.tobytes()
    x_before, y_before, mask_before = x_len.tobytes(), y_len.tobytes(), mask.tobytes()
    libmas.align(view, x_len, y_len)
    libmas.maximum_path(view, mask)
    assert base.tobytes() == before
    assert x_len.tobytes() == x_before and y_len.tobytes() == y_before
    assert mask.tobytes() == mask_before


def test_read_only_input(rng):
    value = random_values(rng, (2, 5, 12), "loglik")
    value.setflags(write=False)
    result = libmas.align(value, [5, 2], [12, 4])
    np.testing.assert_array_equal(result.indices, ref.hard_mas(value, [5, 2], [12, 4]).indices)


def test_lengths_accept_lists_and_int32(rng):
    value = random_values(rng, (2, 5, 12), "loglik")
    a = libmas.align(value, [5, 2], [12, 4])
    b = libmas.align(value, np.array([5, 2], np.int32), np.array([12, 4], np.int32))
    assert a.indices.tobytes() == b.indices.tobytes()


def test_python_reference_against_brute_force(rng):
    """The Python reference is itself checked, as the C one is."""
    for _ in range(200):
        y = int(rng.integers(1, 8))
        x = int(rng.integers(1, y + 1))
        kind = ["halves", "loglik"][int(rng.integers(0, 2))]
        dtype = [np.float32, np.float64][int(rng.integers(0, 2))]
        v = random_values(rng, (x, y), kind, dtype)
        best, paths = ref.brute_force(v, x, y)
        indices, durations, score = ref.hard_mas_item(v, x, y)
        assert score == best
        assert ref.path_sum(v, indices[:y], ref.accumulation_dtype(dtype)) == score
        if kind == "halves":  # exact sums: the tie rule is a property of the path set
            assert tuple(indices[:y]) == ref.tie_rule_choice(paths)
        assert durations.sum() == y
