"""Independent references for the Python tests, written from the semantics in
include/mas.h (not from the library):

* ``hard_mas_item``: the exact recurrence with -inf, one max then one add per
  cell, in float32 for float32/float16/bfloat16 input (each element converted
  once) and float64 for float64; vectorised over tokens one frame at a time,
  which performs exactly the same scalar operations.
* ``hard_mas``: the same over a batch, returning what ``libmas.align`` returns.
* ``glow_tts_maximum_path``: the loop Glow-TTS runs (band of reachable
  cells, -1e9 sentinel instead of -inf, float32 in place), for the drop-in
  comparison of ``libmas.maximum_path``.
* ``brute_force``: every monotonic path of a tiny item, to check the above.
"""

import itertools

import numpy as np

GLOW_TTS_SENTINEL = np.float32(-1e9)


class ItemError(Exception):
    """The rule an invalid item breaks, as the library's status names it."""

    def __init__(self, rule):
        super().__init__(rule)
        self.rule = rule


def accumulation_dtype(dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def hard_mas_item(v, x_len, y_len, acc=None):
    """Hard MAS of one item v [T, S] (any float dtype NumPy can convert).

    Returns (indices [S] int32 with -1 beyond y_len, durations [T] int32,
    score as a NumPy scalar of the accumulation type). Raises ItemError with
    the rule ("length", "x_len > y_len", "nonfinite", "no finite path")."""
    v = np.asarray(v)
    tokens, frames = v.shape
    acc = accumulation_dtype(v.dtype) if acc is None else acc
    if not (1 <= x_len <= tokens and 1 <= y_len <= frames):
        raise ItemError("length")
    if x_len > y_len:
        raise ItemError("x_len > y_len")
    cells = np.asarray(v[:x_len, :y_len], dtype=acc)  # each element converted once
    # Only the band j - (y_len - x_len) <= i <= j can hold a path: a NaN
    # elsewhere is never read and is not an error.
    i, j = np.indices(cells.shape)
    band = (j >= i) & (j - (y_len - x_len) <= i)
    if np.isnan(cells[band]).any() or (cells[band] == np.inf).any():
        raise ItemError("nonfinite")
    neg_inf = acc(-np.inf)
    q = np.full((x_len, y_len), neg_inf, dtype=acc)
    q[0, 0] = cells[0, 0]
    for j in range(1, y_len):
        left = q[:, j - 1]
        diagonal = np.concatenate(([neg_inf], q[:-1, j - 1])).astype(acc)
        q[:, j] = np.maximum(left, diagonal) + cells[:, j]
    score = q[x_len - 1, y_len - 1]
    if score == -np.inf:
        raise ItemError("no finite path")
    indices = np.full(frames, -1, dtype=np.int32)
    i = x_len - 1
    for j in range(y_len - 1, -1, -1):
        indices[j] = i
        if i > 0 and (i == j or q[i, j - 1] < q[i - 1, j - 1]):
            i -= 1
    durations = np.bincount(indices[:y_len], minlength=tokens).astype(np.int32)
    return indices, durations, score


class HardResult:
    """durations [B,T], indices [B,S], score [B], path [B,T,S] (bts)."""

    def __init__(self, durations, indices, score, path):
        self.durations = durations
        self.indices = indices
        self.score = score
        self.path = path


def hard_mas(value_bts, x_len, y_len, acc=None):
    """Batch reference on a [B, T, S] NumPy array (float32/64/16)."""
    value_bts = np.asarray(value_bts)
    batch, tokens, frames = value_bts.shape
    acc = accumulation_dtype(value_bts.dtype) if acc is None else acc
    durations = np.zeros((batch, tokens), np.int32)
    indices = np.full((batch, frames), -1, np.int32)
    score = np.full(batch, -np.inf, acc)
    path = np.zeros((batch, tokens, frames), np.uint8)
    for b in range(batch):
        idx, dur, sc = hard_mas_item(value_bts[b], int(x_len[b]), int(y_len[b]), acc)
        durations[b], indices[b], score[b] = dur, idx, sc
        on = np.nonzero(idx >= 0)[0]
        path[b, idx[on], on] = 1
    return HardResult(durations, indices, score, path)


def glow_tts_maximum_path(value, mask):
    """The Glow-TTS ``maximum_path(value, mask)`` on NumPy [B, T, S] arrays:
    value*mask in float32, lengths from the mask, the band loop with the -1e9
    sentinel, updated in place; returns the int32 path."""
    value = (np.asarray(value, np.float32) * np.asarray(mask, np.float32)).astype(np.float32)
    mask = np.asarray(mask)
    path = np.zeros(value.shape, dtype=np.int32)
    t_x = mask.sum(1)[:, 0].astype(np.int32)
    t_y = mask.sum(2)[:, 0].astype(np.int32)
    for b in range(value.shape[0]):
        _glow_tts_item(path[b], value[b], int(t_x[b]), int(t_y[b]))
    return path


def _glow_tts_item(path, value, t_x, t_y):
    sentinel = GLOW_TTS_SENTINEL
    for y in range(t_y):
        xs = np.arange(max(0, t_x + y - t_y), min(t_x, y + 1))
        if xs.size == 0:
            continue
        if y == 0:
            v_cur = np.full(xs.size, sentinel, np.float32)
            v_prev = np.where(xs == 0, np.float32(0.0), sentinel).astype(np.float32)
        else:
            v_cur = np.where(xs == y, sentinel, value[xs, y - 1]).astype(np.float32)
            v_prev = np.where(xs == 0, sentinel, value[np.maximum(xs - 1, 0), y - 1])
            v_prev = v_prev.astype(np.float32)
        value[xs, y] = np.maximum(v_cur, v_prev) + value[xs, y]
    index = t_x - 1
    for y in range(t_y - 1, -1, -1):
        path[index, y] = 1
        if index != 0 and (index == y or value[index, y - 1] < value[index - 1, y - 1]):
            index -= 1


def path_sum(v, indices, acc):
    """Sum of v [T, S] along a path, frame by frame in the accumulation type."""
    total = acc(v[indices[0], 0])
    for j in range(1, len(indices)):
        total = acc(total + acc(v[indices[j], j]))
    return total


def brute_force(v, x_len, y_len, acc=None):
    """(best score, best paths) over every monotonic path of v [T, S]; each
    path a tuple of y_len token indices."""
    v = np.asarray(v)
    acc = accumulation_dtype(v.dtype) if acc is None else acc
    best, best_paths = None, []
    for ups in itertools.combinations(range(1, y_len), x_len - 1):
        indices = [0] * y_len
        for j in range(1, y_len):
            indices[j] = indices[j - 1] + (1 if j in ups else 0)
        total = path_sum(v, indices, acc)
        if best is None or total > best:
            best, best_paths = total, [tuple(indices)]
        elif total == best:
            best_paths.append(tuple(indices))
    return best, best_paths


def tie_rule_choice(paths):
    """Among equally good paths, the one the backtrack keeps: walking frames
    from the last down, the first difference goes to the higher token
    (ties stay on the same token)."""
    return max(paths, key=lambda p: tuple(reversed(p)))
