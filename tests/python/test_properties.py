"""Property tests of the Python front over hostile input (issue 14), with a
seeded generator of our own: shapes with zero-sized axes, odd dtypes, NaN,
+-inf and huge values, zero strides, reversed and transposed views, lengths
as lists / floats / huge / negative / of the wrong count, thread counts 0,
-1, 10^9. Every call must either return results that keep the invariants or
raise ValueError/TypeError whose message names the function; inputs are
never modified. NumPy and PyTorch CPU.

Replay a failure with MAS_TEST_SEED=<seed> (printed with it)."""

import numpy as np
import pytest

import libmas

CALLS = 400  # per op and array library: seconds in all

OPS = ("maximum_path", "align", "forward_sum", "posterior", "monotonic_attention",
       "monotonic_attention_m2m")


def _dim(rng):
    r = rng.random()
    return 0 if r < 0.08 else int(rng.integers(1, 4)) if r < 0.5 else int(rng.integers(1, 13))


def _values(rng, shape):
    x = rng.integers(-64, 65, size=shape) / 8.0
    if x.size and rng.random() < 0.5:
        special = rng.random(shape) < rng.choice([0.02, 0.1, 0.3])
        pick = rng.choice(np.array([np.nan, np.inf, -np.inf, -np.inf, 1e300, -1e300, 5e-324]),
                          size=shape)
        x = np.where(special, pick, x)
    if x.size and rng.random() < 0.15:  # a -inf row
        x[(slice(None), int(rng.integers(0, shape[1]))) if shape[1] else ...] = -np.inf
    return x


def _array(rng, shape, lib):
    """A value array in an odd dtype and layout, and a copy to compare with."""
    x = _values(rng, shape)
    dtypes = ["float32", "float64", "float16", "int32", "bool"]
    if lib != "numpy":
        dtypes.append("bfloat16")
    dt = dtypes[int(rng.integers(0, len(dtypes)))] if rng.random() < 0.4 else "float32"
    layout = int(rng.integers(0, 5))
    if lib == "numpy":
        with np.errstate(all="ignore"):
            a = x.astype(dt)
        if layout == 1:
            a = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
        elif layout == 2:
            a = np.ascontiguousarray(a[:, ::-1, ::-1])[:, ::-1, ::-1]
        elif layout == 3 and shape[0]:
            a = np.broadcast_to(a[:1], a.shape)  # zero stride along the batch
        elif layout == 4:
            big = np.zeros((shape[0], shape[1], shape[2] + 3), a.dtype)
            big[:, :, :shape[2]] = a
            a = big[:, :, :shape[2]]
        return a, a.copy()
    import torch
    t = torch.from_numpy(np.ascontiguousarray(x)).to(getattr(torch, dt))
    if layout == 1:
        t = t.transpose(1, 2).contiguous().transpose(1, 2)
    elif layout == 2:
        t = t.flip(1, 2).contiguous().flip(1, 2)  # (torch has no negative strides)
    elif layout == 3 and shape[0]:
        t = t[:1].expand(shape)
    elif layout == 4:
        big = torch.zeros((shape[0], shape[1], shape[2] + 3), dtype=t.dtype)
        big[:, :, :shape[2]] = t
        t = big[:, :, :shape[2]]
    return t, t.clone()


def _lengths(rng, batch, dim, lib):
    r = rng.random()
    count = batch if rng.random() > 0.05 else batch + 1
    if r < 0.7:
        v = [int(rng.integers(1, dim + 1)) if dim else 0 for _ in range(count)]
    else:
        pool = [0, -1, dim + 1, 10 ** 12, -(2 ** 62), 2 ** 63 - 1]
        v = [int(rng.choice(pool)) if rng.random() < 0.5 else max(dim, 1)
             for _ in range(count)]
    kind = rng.random()
    if kind < 0.1:
        return [float(x) + (0.5 if rng.random() < 0.5 else 0) for x in v]
    if kind < 0.4:
        small = all(-2 ** 31 <= x < 2 ** 31 for x in v)
        return np.array(v, dtype=np.int32 if small and rng.random() < 0.2 else np.int64)
    if kind < 0.6 and lib != "numpy":
        import torch
        return torch.tensor(v, dtype=torch.int64)
    return v


def _threads(rng):
    return [None, None, 1, 2, 0, -1, 10 ** 9, 1.5, True][int(rng.integers(0, 9))]


def _np(x):
    if hasattr(x, "detach"):
        import torch
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _same(a, b):
    if hasattr(a, "detach"):
        import torch
        return bool(torch.equal(a, b) or torch.allclose(a.double(), b.double(), equal_nan=True,
                                                        rtol=0, atol=0))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    return a == b


def _copy(x):
    if hasattr(x, "clone"):
        return x.clone()
    if isinstance(x, np.ndarray):
        return x.copy()
    return list(x) if isinstance(x, list) else x


def _ints(lengths, batch):
    return np.asarray(_np(lengths) if not isinstance(lengths, list) else lengths,
                      dtype=np.int64)[:batch]


def _check_hard(path, x_len, y_len, shape):
    p = _np(path).astype(np.float64)
    assert p.shape == shape
    assert np.isin(p, (0, 1)).all()
    for b in range(shape[0]):
        ones = p[b].sum(0)
        assert (ones[:y_len[b]] == 1).all() and (ones[y_len[b]:] == 0).all()
        assert p[b, x_len[b]:].sum() == 0
        tok = p[b, :, :y_len[b]].argmax(0)
        assert tok[0] == 0 and tok[-1] == x_len[b] - 1 and set(np.diff(tok)) <= {0, 1}


def _check_align(res, x_len, y_len, shape):
    d, ix = _np(res.durations), _np(res.indices)
    assert d.shape == shape[:2] and ix.shape == (shape[0], shape[2])
    for b in range(shape[0]):
        X, Y = x_len[b], y_len[b]
        assert d[b].sum() == Y and (d[b, :X] >= 1).all() and (d[b, X:] == 0).all()
        assert ix[b, 0] == 0 and ix[b, Y - 1] == X - 1 and (ix[b, Y:] == -1).all()
        assert set(np.diff(ix[b, :Y])) <= {0, 1}


def _call(rng, op, lib):
    shape = (_dim(rng), _dim(rng), _dim(rng))
    value, before = _array(rng, shape, lib)
    b, t, s = shape
    args, kwargs = [value], {}
    if op == "maximum_path":
        lens_x = rng.integers(0, t + 1, size=b) if t else np.zeros(b, int)
        lens_y = rng.integers(0, s + 1, size=b) if s else np.zeros(b, int)
        mask = (np.arange(t)[None, :, None] < lens_x[:, None, None]) & \
               (np.arange(s)[None, None, :] < lens_y[:, None, None])
        if lib != "numpy":
            import torch
            mask = torch.from_numpy(mask).float()
        args.append(mask)
        x_in, y_in = lens_x, lens_y
    elif op.startswith("monotonic"):
        x_in = _lengths(rng, b, t, lib) if rng.random() < 0.6 else None
        y_in = _lengths(rng, b, s, lib) if rng.random() < 0.6 else None
        args += [x_in, y_in]
        kwargs["threads"] = _threads(rng)
    else:
        x_in, y_in = _lengths(rng, b, t, lib), _lengths(rng, b, s, lib)
        args += [x_in, y_in]
        kwargs["threads"] = _threads(rng)
    if op in ("maximum_path", "align", "forward_sum", "posterior") and rng.random() < 0.3:
        kwargs["layout"] = "bst" if rng.random() < 0.9 else "xyz"
    kept = [_copy(a) for a in args[1:]]
    fn = getattr(libmas, op)
    try:
        with np.errstate(all="ignore"):
            out = fn(*args, **kwargs)
    except (ValueError, TypeError) as e:
        assert f"libmas.{op}" in str(e), f"message does not name the function: {e}"
        out = None
    assert _same(value, before), "value was modified"
    for a, k in zip(args[1:], kept):
        if a is not None:
            assert _same(a, k), "an argument was modified"
    if out is None:
        return
    bst = kwargs.get("layout") == "bst"
    tb = (b, s, t) if bst else shape  # [B, T, S] as the op sees it
    if op == "maximum_path":
        p = _np(out)
        p = p.transpose(0, 2, 1) if bst else p
        m = _np(args[1]).astype(np.int64)
        if not b:
            assert p.shape[0] == 0
            return
        if bst:  # the op reads the lengths as Glow-TTS does, axes swapped
            x_len, y_len = m[:, 0, :].sum(1), m[:, :, 0].sum(1)
        else:
            x_len, y_len = m[:, :, 0].sum(1), m[:, 0, :].sum(1)
        if b:
            _check_hard(p, x_len, y_len, tb)
        return
    x_len = _ints(x_in, b) if x_in is not None else np.full(b, tb[1])
    y_len = _ints(y_in, b) if y_in is not None else np.full(b, tb[2])
    if op == "align":
        _check_align(out, x_len, y_len, tb)
    elif op == "forward_sum":
        assert _np(out).shape == (b,)
    elif op == "posterior":
        g = _np(out).astype(np.float64)
        g = g.transpose(0, 2, 1) if bst else g
        for i in range(b):
            X, Y = x_len[i], y_len[i]
            assert (g[i, X:] == 0).all() and (g[i, :, Y:] == 0).all()
            v = _np(value).astype(np.float64)
            v = v.transpose(0, 2, 1) if bst else v
            if np.isfinite(v[i, :X, :Y]).all() and np.abs(v[i, :X, :Y]).max() < 100:
                np.testing.assert_allclose(g[i, :X, :Y].sum(0), 1, atol=1e-3)
    else:
        lp = _np(out).astype(np.float64)
        assert lp.shape == shape
        for i in range(b):
            n, m = x_len[i], y_len[i]
            assert (lp[i, n:] == -np.inf).all() and (lp[i, :, m:] == -np.inf).all()
            inside = lp[i, :n, :m]
            assert not (inside > 1e-4).any()


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("op", OPS)
def test_hostile_calls(op, lib, rng):
    if lib == "torch":
        pytest.importorskip("torch")
    for _ in range(CALLS):
        _call(rng, op, lib)


@pytest.mark.parametrize("shape", [(3, 0, 3), (0, 1, 0), (2, 3, 0), (0, 0, 0)])
def test_maximum_path_zero_sized_axes(shape):
    """Regression (issue 14): a zero-sized T or S raised a bare IndexError."""
    value = np.zeros(shape, np.float32)
    if shape[0] == 0:
        path = libmas.maximum_path(value, np.ones(shape, np.float32))
        assert path.shape == shape
    else:
        with pytest.raises(ValueError, match="libmas.maximum_path"):
            libmas.maximum_path(value, np.ones(shape, np.float32))
