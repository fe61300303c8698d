"""Soft alignment: the monotonic-alignment dynamic program in the log
semiring (mas.h section 5, experimental).

  forward_sum(value, x_lengths, y_lengths)  log of the summed weight of every
      hard-MAS path; differentiable (its gradient is the posterior).
  posterior(value, x_lengths, y_lengths)    the probability that the path
      visits each cell.
  monotonic_attention(logits, n, m)         one-to-many monotonic attention,
      log phi [B, N, M]; differentiable.
  monotonic_attention_m2m(logits, n, m)     many-to-many (right/down) monotonic
      attention, log phi [B, N, M]; differentiable.

Inputs are NumPy arrays, PyTorch tensors (CPU or CUDA) or DLPack producers,
zero-copy and never modified; float32, float64, float16 or bfloat16 (the last
two computed in float32). Results are of the arithmetic type (float32, or
float64 for float64 input), same array type and device. With PyTorch tensors
that require grad the results take part in autograd; the gradient returned
for a float16/bfloat16 input is of the input's dtype. CUDA calls follow the
rules of the hard path: the input's device, the current stream, no host
synchronisation, errors reported lazily (see ``libmas.errors``).
"""

from . import _arrays, _C, _dispatch, _fast, _ops
from .hard import _threads_arg

_OP_FORWARD_SUM = 0
_OP_ATTENTION = 1
_ONE_TO_MANY = 0
_MANY_TO_MANY = 1


def _accum_dtype(frame, value):
    return frame.score_dtype(value)


def _shape3(value, fname, what, axes):
    shape = tuple(value.shape)
    if len(shape) != 3:
        raise ValueError(f"{fname}: {what} must have 3 dimensions {axes}, got shape {list(shape)}")
    return shape


def _call(fname, frame, op, sizes, code, threads, invoke):
    """Runs invoke(cuda, work_handle, how, word_handle) -> (status, item) on
    the frame's device through the shared dispatch (libmas._dispatch)."""
    def workspace_bytes(cuda):
        return _C.soft_workspace_size(op, cuda, sizes[0], sizes[1], sizes[2], code,
                                      0 if cuda else threads)

    _dispatch.run(fname, frame, workspace_bytes, invoke, threads)


# ---------------------------------------------------------------------------
# Forward-sum
# ---------------------------------------------------------------------------


def _forward_sum_raw(fname, value, x_lengths, y_lengths, layout, threads, want_log_z,
                     want_post):
    """(frame, log_z or None, posterior or None), both as the frame's arrays."""
    bst = _arrays.check_layout(layout, fname)
    threads = _threads_arg(threads, fname)
    fast = _fast.forward_sum(fname, value, x_lengths, y_lengths, bst, threads, want_log_z,
                             want_post)
    if fast is not None:
        return fast[0], fast[1][0], fast[1][1]
    frame, v = _arrays.frame_for(value, fname)
    log_z, post = _forward_sum_core(fname, frame, _arrays.plain(frame, v), x_lengths, y_lengths,
                                    bst, threads, want_log_z, want_post)
    return frame, log_z, post


def _forward_sum_core(fname, frame, v, x_lengths, y_lengths, bst, threads, want_log_z,
                      want_post):
    """The call itself on a plain array v (also the registered op's kernel)."""
    code = _arrays.value_code(frame, v, fname)
    shape = _shape3(v, fname, "value", "[B, S, T]" if bst else "[B, T, S]")
    batch, tokens, frames = (shape[0], shape[2], shape[1]) if bst else shape
    x_len = frame.lengths(x_lengths, batch, f"{fname}: x_lengths")
    y_len = frame.lengths(y_lengths, batch, f"{fname}: y_lengths")
    acc = _accum_dtype(frame, v)
    log_z = frame.empty((batch,), acc) if want_log_z else None
    post = frame.empty(shape, acc) if want_post else None
    if batch > 0 and tokens > 0 and frames > 0:
        h = frame.handle

        def invoke(cuda, work, how, word):
            return _C.forward_sum(cuda, h(v), bst, h(x_len), h(y_len), h(log_z), h(post), work,
                                  how, word)

        _call(fname, frame, _OP_FORWARD_SUM, (batch, tokens, frames), code, threads, invoke)
    elif batch > 0:
        raise ValueError(f"{fname}: value has an empty axis, shape {list(shape)}")
    return log_z, post


def posterior(value, x_lengths, y_lengths, *, layout="bts", threads=None):
    """Posterior occupancy of forward-sum: gamma[b, i, j], the probability
    that a path drawn with weight exp(sum of v along it) visits token i at
    frame j; d forward_sum / d value. Same layout as value ([B, T, S] for
    "bts", [B, S, T] for "bst"), float32 (float64 for float64 value), 0
    outside the lengths and off the band; sums to 1 over tokens for every
    frame j < y_len. Raises ValueError for invalid lengths, NaN/+inf on a
    cell a path can cross, or no finite path."""
    fname = "libmas.posterior"
    if _ops.use_op(value):
        return _ops.posterior(value, x_lengths, y_lengths, layout, threads)
    frame, _, post = _forward_sum_raw(fname, value, x_lengths, y_lengths, layout, threads,
                                      False, True)
    return frame.restore(post)


def forward_sum(value, x_lengths, y_lengths, *, layout="bts", threads=None):
    """log_z[b] = log of the sum over every monotonic path of item b (as hard
    MAS: from (0,0) to (x_len-1, y_len-1), each frame on one token, the token
    staying or moving up by one per frame) of exp(sum of v over the path).

    value: [B, T, S] ("bts") or [B, S, T] ("bst"); x_lengths, y_lengths: [B]
    with 1 <= x_len <= y_len, x_len <= T, y_len <= S. Returns log_z [B],
    float32 (float64 for float64 value). A PyTorch value that requires grad
    gives a differentiable log_z: d log_z[b] / d value[b] = posterior.
    Errors as for ``libmas.align``.
    """
    fname = "libmas.forward_sum"
    if _ops.use_op(value):
        return _ops.forward_sum(value, x_lengths, y_lengths, layout, threads)
    torch = _arrays._torch()
    if torch is not None and isinstance(value, torch.Tensor) and value.requires_grad \
            and torch.is_grad_enabled():
        return _autograd_classes(torch)[0].apply(value, x_lengths, y_lengths, layout, threads)
    frame, log_z, _ = _forward_sum_raw(fname, value, x_lengths, y_lengths, layout, threads,
                                       True, False)
    return frame.restore(log_z)


# ---------------------------------------------------------------------------
# Monotonic attention
# ---------------------------------------------------------------------------


def _attention_lengths(frame, lengths, batch, what):
    return None if lengths is None else frame.lengths(lengths, batch, what)


def _attention_forward_raw(fname, kind, logits, n_lengths, m_lengths, threads):
    """(frame, logits as plain array, n, m, log_phi)."""
    threads = _threads_arg(threads, fname)
    fast = _fast.attention(fname, kind, logits, n_lengths, m_lengths, threads)
    if fast is not None:  # the glue took the lengths as they are (int64 on the device, or None)
        frame, log_phi, _ = fast
        return frame, _arrays.plain(frame, logits), n_lengths, m_lengths, log_phi
    frame, x = _arrays.frame_for(logits, fname)
    x = _arrays.plain(frame, x)
    n, m, log_phi = _attention_forward_core(fname, kind, frame, x, n_lengths, m_lengths, threads)
    return frame, x, n, m, log_phi


def _attention_forward_core(fname, kind, frame, x, n_lengths, m_lengths, threads):
    """The forward call on a plain array x (also the registered op's
    kernel): (n, m, log_phi)."""
    code = frame.code(x)
    if code not in _arrays.VALUE_CODES:
        raise TypeError(f"{fname}: logits must be float32, float64, float16 or bfloat16, "
                        f"got {x.dtype}")
    shape = _shape3(x, fname, "logits", "[B, N, M]")
    n = _attention_lengths(frame, n_lengths, shape[0], f"{fname}: n_lengths")
    m = _attention_lengths(frame, m_lengths, shape[0], f"{fname}: m_lengths")
    log_phi = frame.empty(shape, _accum_dtype(frame, x))
    if min(shape) > 0:
        h = frame.handle

        def invoke(cuda, work, how, word):
            return _C.attention(cuda, False, kind, h(x), h(n), h(m), h(log_phi), None, None,
                                work, how, word)

        _call(fname, frame, _OP_ATTENTION, shape, code, threads, invoke)
    elif shape[0] > 0:
        raise ValueError(f"{fname}: logits has an empty axis, shape {list(shape)}")
    return n, m, log_phi


def _attention_backward_raw(fname, kind, frame, x, n, m, log_phi, grad_log_phi, threads):
    """d loss / d logits in the accumulator dtype."""
    fast = _fast.attention_backward(fname, kind, x, n, m, log_phi, grad_log_phi, threads)
    if fast is not None:
        return fast
    shape = tuple(x.shape)
    grad = frame.empty(shape, _accum_dtype(frame, x))
    if min(shape) > 0:
        h = frame.handle
        g = _arrays.plain(frame, grad_log_phi)

        def invoke(cuda, work, how, word):
            return _C.attention(cuda, True, kind, h(x), h(n), h(m), h(log_phi), h(g), h(grad),
                                work, how, word)

        _call(fname, frame, _OP_ATTENTION, shape, frame.code(x), threads, invoke)
    return grad


def _attention(fname, kind, logits, n_lengths, m_lengths, threads):
    if _ops.use_op(logits):
        return _ops.attention(fname, kind, logits, n_lengths, m_lengths, threads)
    torch = _arrays._torch()
    if torch is not None and isinstance(logits, torch.Tensor) and logits.requires_grad \
            and torch.is_grad_enabled():
        return _autograd_classes(torch)[1].apply(logits, n_lengths, m_lengths, kind, threads,
                                                 fname)
    frame, _, _, _, log_phi = _attention_forward_raw(fname, kind, logits, n_lengths, m_lengths,
                                                     threads)
    return frame.restore(log_phi)


def monotonic_attention(logits, n_lengths=None, m_lengths=None, *, threads=None):
    """One-to-many monotonic attention over logits x [B, N, M]: along N the
    path advances every step; it stays on column j with p = sigmoid(x) or
    moves to j+1 with 1-p. Returns log phi [B, N, M] (float32, or float64
    for float64 logits): log phi[0,0] = 0, log phi[0,j>0] = -inf,
    log phi[i,j] = logaddexp(log phi[i-1,j] + log sigmoid(x[i-1,j]),
                             log phi[i-1,j-1] + log sigmoid(-x[i-1,j-1])).
    n_lengths, m_lengths: optional [B] lengths (default N and M); outside
    them log phi is -inf and the gradient 0. Differentiable for PyTorch
    logits that require grad. Raises ValueError for lengths out of range or
    NaN logits that reach a cell."""
    return _attention("libmas.monotonic_attention", _ONE_TO_MANY, logits, n_lengths, m_lengths,
                      threads)


def monotonic_attention_m2m(logits, n_lengths=None, m_lengths=None, *, threads=None):
    """Many-to-many monotonic attention over logits x [B, N, M]: from (i,j)
    the path moves right to (i,j+1) with p = sigmoid(x[i,j]) or down to
    (i+1,j) with 1-p. Returns log phi [B, N, M]: phi[0,0] = 1,
    phi[i,j] = phi[i,j-1] p[i,j-1] + phi[i-1,j] (1-p[i-1,j]), in log space.
    Lengths, dtypes, autograd and errors as ``monotonic_attention``."""
    return _attention("libmas.monotonic_attention_m2m", _MANY_TO_MANY, logits, n_lengths,
                      m_lengths, threads)


# ---------------------------------------------------------------------------
# Autograd (built on first use, so importing libmas never imports torch)
# ---------------------------------------------------------------------------

_AUTOGRAD = None


def _autograd_classes(torch):
    global _AUTOGRAD
    if _AUTOGRAD is not None:
        return _AUTOGRAD

    class ForwardSum(torch.autograd.Function):
        @staticmethod
        def forward(ctx, value, x_lengths, y_lengths, layout, threads):
            _, log_z, post = _forward_sum_raw("libmas.forward_sum", value, x_lengths, y_lengths,
                                              layout, threads, True, True)
            ctx.save_for_backward(post)
            ctx.value_dtype = value.dtype
            return log_z

        @staticmethod
        def backward(ctx, grad_log_z):
            (post,) = ctx.saved_tensors
            grad = post * grad_log_z.to(post.dtype)[:, None, None]
            return grad.to(ctx.value_dtype), None, None, None, None

    class Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, n_lengths, m_lengths, kind, threads, fname):
            frame, x, n, m, log_phi = _attention_forward_raw(fname, kind, logits, n_lengths,
                                                             m_lengths, threads)
            ctx.save_for_backward(x, log_phi)
            ctx.lengths = (n, m)
            ctx.kind = kind
            ctx.threads = _threads_arg(threads, fname)
            ctx.fname = fname
            ctx.frame = frame
            return log_phi

        @staticmethod
        def backward(ctx, grad_log_phi):
            x, log_phi = ctx.saved_tensors
            n, m = ctx.lengths
            grad = _attention_backward_raw(ctx.fname, ctx.kind, ctx.frame, x, n, m, log_phi,
                                           grad_log_phi, ctx.threads)
            return grad.to(x.dtype), None, None, None, None, None

    _AUTOGRAD = (ForwardSum, Attention)
    return _AUTOGRAD


__all__ = ["forward_sum", "posterior", "monotonic_attention", "monotonic_attention_m2m"]
