"""The Glow-TTS step without the [B, T, S] matrix (mas.h section 8).

  align_gaussian(z, mean, log_std, x_lengths, y_lengths)    hard MAS on logp
  forward_sum_gaussian(z, mean, log_std, x_lengths, y_lengths)   log Z, autograd
  expand(stats, indices)             token statistics gathered to frames, autograd
  durations_to_indices / indices_to_durations

z [B, D, S] (flow latents), mean and log_std [B, D, T] (the text encoder's
per-token Gaussian), channel-first as in Glow-TTS, VITS and Matcha-TTS. The
log-likelihood of frame s under token t,
    logp[b,t,s] = sum_d -1/2 log(2 pi) - log_std[b,d,t]
                  - (z[b,d,s] - mean[b,d,t])^2 / (2 exp(2 log_std[b,d,t])),
is computed inside the alignment, tile by tile, by the code of
``gaussian_loglik``: ``align_gaussian(z, m, s, X, Y)`` returns bit for bit
what ``align(gaussian_loglik(z, m, s, X, Y), X, Y)`` returns.

``align_gaussian(..., precision="tf32")`` computes the cells on CUDA's
tensor cores, those of ``gaussian_loglik(..., precision="tf32")`` bit for
bit (faster where the products bound the call; alignments may differ from
the default precision's where paths are within the TF32 error).

Nothing of size B*T*S is allocated, on the CPU (NumPy, PyTorch) or on
CUDA: ``forward_sum_gaussian`` on CUDA keeps blocks of ~6 sqrt(S) frames of
cells and recomputes them for the gradients.
"""

import numpy as np

from . import _arrays, _C, _dispatch, _fast, _ops, errors
from .hard import AlignResult, _align_core, _threads_arg
from .likelihood import (_SPREAD_LOG_STD, _precision_arg, _swap12, _tts_checked,
                         _tts_describe, _tts_forward, gaussian_loglik)


def _full_lengths(frame, lens, batch, top):
    if lens is not None:
        return lens
    return frame.lengths([top] * batch, batch, "lengths")


def _run(fname, frame, soft, z, mean, log_std, x_len, y_len, outs, bst, threads,
         budget=None, prec=0):
    """The C call: outs = 4 arrays or None (hard: path, durations,
    indices, score; soft: log_z, grad_x, grad_means, grad_spread, in the
    views of mas.h); budget: the most workspace bytes of a hard call (None:
    unbounded; less than the unbounded size runs long-form); prec: the
    mas_precision code."""
    h = frame.handle
    t = int(mean.shape[2])
    z3, m3, l3 = _swap12(frame, z), _swap12(frame, mean), _swap12(frame, log_std)
    ins = (h(z3), h(m3), h(l3), _SPREAD_LOG_STD, h(x_len), h(y_len))
    describe = _tts_describe(t)

    def workspace_bytes(cuda):
        full = _C.fused_workspace_size(soft, cuda, *ins, threads)
        if soft or budget is None or budget >= full or full == 0:
            return full
        minimum = _C.fused_workspace_size(soft, cuda, *ins, threads, True)
        return _dispatch.budgeted(fname, budget, full, minimum, "CUDA device" if cuda else "CPU")

    def invoke(cuda, work, how, word):
        status, item = _C.fused(soft, cuda, *ins, *(h(o) for o in outs), bst, work, how, word,
                                prec)
        if status == _C.ERR_BAD_MODEL:
            raise ValueError(f"{fname}: {describe(item)}")
        return status, item

    return _dispatch.run(fname, frame, workspace_bytes, invoke, threads)


def align_gaussian(z, mean, log_std, x_lengths=None, y_lengths=None, *, layout="bts",
                   precision="float32", threads=None, max_workspace_bytes=None):
    """Hard monotonic alignment on Glow-TTS's Gaussian log-likelihood, fused.

    z [B, D, S], mean and log_std [B, D, T] (float32, float64, float16 or
    bfloat16; any strides; NumPy or PyTorch); x_lengths (tokens) and
    y_lengths (frames): [B] integers, None for T and S. layout: the layout of
    ``path()`` ("bts" [B, T, S] or "bst" [B, S, T]).

    Returns the ``AlignResult`` of ``align`` (durations, indices, score,
    path()), bit for bit ``align(gaussian_loglik(z, mean, log_std, X, Y), X,
    Y)``, without the [B, T, S] matrix (CPU and CUDA): the likelihood of
    each cell the alignment needs is computed inside it. Errors: those of
    ``gaussian_loglik`` (shapes, lengths outside [0, T] / [0, S], a NaN / inf
    mean or log_std on any token) and of ``align`` (the item and the rule),
    same wording. The alignment has no gradient (use ``expand`` on its
    indices).

    precision: "float32" (default: the cells of ``gaussian_loglik``'s default,
    the same on the CPU and CUDA) or "tf32" ("bf16" computes as "tf32"): on
    CUDA from Ampere on, float32 arithmetic, the cells on the tensor cores,
    bit for bit those of ``gaussian_loglik(..., precision="tf32")``, so the
    result is ``align`` on that matrix. TF32 rounds x, x^2 and the Gaussians'
    coefficients to 10 mantissa bits: a cell is off by about 1e-3 of the
    sum of its terms' magnitudes, and paths whose scores differ by less may
    swap. The CPU, float64 input and older GPUs compute the default
    whatever is asked.

    max_workspace_bytes: None (default) for the unbounded workspace, or a
    budget in bytes. On the CPU the unbounded workspace holds one decision
    bit per cell of an item per thread, and a smaller budget aligns
    long-form (score checkpoints, one segment of bits at a time; the same
    results bit for bit, slower). On CUDA the workspace is the tokens'
    coefficients [B, 2D+1, T] plus one decision bit per cell (15.7 MB at
    B=32 T=512 S=2048 D=80) and has no long form. A budget below the
    smallest that works raises ValueError stating it.
    """
    fname = "libmas.align_gaussian"
    bst = _arrays.check_layout(layout, fname)
    prec = _precision_arg(precision, fname)
    threads = _threads_arg(threads, fname)
    budget = _dispatch.budget_arg(max_workspace_bytes, fname)
    if _ops.use_op(z):
        return _ops.align_gaussian(z, mean, log_std, x_lengths, y_lengths, bst, threads, budget,
                                   prec)
    if budget is None:
        fast = _fast.align_gaussian(z, mean, log_std, x_lengths, y_lengths, prec, threads)
        if fast is not None:
            frame, (durations, indices, score), pending = fast
            return AlignResult(frame, durations, indices, score, int(mean.shape[2]), bst,
                               score.dtype, pending)
    errors.poll()  # (not while tracing: the poll asks about stream capture)
    frame, z, mean, log_std, x_len, y_len = _tts_checked(fname, z, mean, log_std, x_lengths,
                                                         y_lengths)
    durations, indices, score, pending = _align_gaussian_core(fname, frame, z, mean, log_std,
                                                              x_len, y_len, threads, True, budget,
                                                              prec)
    return AlignResult(frame, durations, indices, score, int(mean.shape[2]), bst, score.dtype,
                       pending)


def _align_gaussian_core(fname, frame, z, mean, log_std, x_len, y_len, threads, checked,
                         budget=None, prec=0):
    """(durations, indices, score, pending) of align_gaussian (also the
    registered op's kernel, which runs the checks here: checked False)."""
    if not checked:
        frame, z, mean, log_std, x_len, y_len = _tts_checked(fname, z, mean, log_std, x_len,
                                                             y_len)
    z, mean, log_std = (_arrays.plain(frame, a) for a in (z, mean, log_std))
    b, d, s = (int(v) for v in z.shape)
    t = int(mean.shape[2])
    if b > 0 and (t == 0 or s == 0):
        axis = "tokens (T)" if t == 0 else "frames (S)"
        raise ValueError(f"{fname}: the {axis} axis is empty; every item needs x_len >= 1 "
                         "and y_len >= 1")
    if d == 0:
        # the unfused path: the same bits by construction (materialises logp)
        v, _ = _tts_forward(fname, frame, z, mean, log_std, x_len, y_len, False, prec, threads)
        return _align_core(fname, frame, v, _full_lengths(frame, x_len, b, t),
                           _full_lengths(frame, y_len, b, s), False, threads, budget)
    i32 = frame.native_dtype("int32", None)
    acc = frame.score_dtype(z)
    durations = frame.empty((b, t), i32)
    indices = frame.empty((b, s), i32)
    score = frame.empty((b,), acc)
    pending = None
    if b > 0:
        x_len = _full_lengths(frame, x_len, b, t)
        y_len = _full_lengths(frame, y_len, b, s)
        pending = _run(fname, frame, False, z, mean, log_std, x_len, y_len,
                       (None, durations, indices, score), False, threads, budget, prec)
    return durations, indices, score, pending


# ---------------------------------------------------------------------------
# Expansion of token statistics to frames
# ---------------------------------------------------------------------------


def _int_indices(frame, indices, fname, what, batch=None):
    if frame.name == "torch":
        torch = frame.torch
        ok = isinstance(indices, torch.Tensor) and not indices.is_floating_point() and \
            not indices.is_complex() and indices.dtype != torch.bool
    else:
        indices = np.asarray(indices)
        ok = np.issubdtype(indices.dtype, np.integer)
    if not ok:
        raise TypeError(f"{fname}: {what} must be an integer array, got "
                        f"{getattr(indices, 'dtype', type(indices))}")
    if indices.ndim != 2 or (batch is not None and int(indices.shape[0]) != batch):
        want = f"[B={batch}, S]" if batch is not None else "[B, S]"
        raise ValueError(f"{fname}: {what} must have shape {want}, got {list(indices.shape)}")
    return indices


def expand(stats, indices):
    """Token statistics gathered to frames along an alignment.

    stats [B, D, T] (e.g. Glow-TTS's mean or log_std), indices [B, S]
    integers (``AlignResult.indices``: the token of each frame, -1 beyond
    y_len). Returns [B, D, S] with out[b, :, s] = stats[b, :, indices[b, s]]
    and 0 where indices[b, s] < 0: Glow-TTS's
    ``torch.matmul(attn.squeeze(1).transpose(1, 2), m_p.transpose(1, 2))``
    without the [B, S, T] path. NumPy or PyTorch (CPU or CUDA); with
    autograd to stats (the backward is a scatter-add over tokens). An index
    >= T raises IndexError (PyTorch: the device's index check). The PyTorch
    result is a [B, D, S] view of a [B, S, D] tensor.
    """
    fname = "libmas.expand"
    if _arrays.is_torch_tensor(stats):
        torch = _arrays._torch()
        if stats.ndim != 3:
            raise ValueError(f"{fname}: stats must have shape [B, D, T], got {list(stats.shape)}")
        b, d, t = (int(v) for v in stats.shape)
        if not isinstance(indices, torch.Tensor):
            indices = torch.as_tensor(np.asarray(indices), device=stats.device)
        frame = _arrays.TorchFrame(stats)
        indices = _int_indices(frame, indices, fname, "indices", b)
        if indices.device != stats.device:
            raise ValueError(f"{fname}: indices is on {indices.device}, stats on {stats.device}")
        s = int(indices.shape[1])
        idx = indices.long()
        valid = idx >= 0
        if t == 0:
            return stats.new_zeros((b, d, s))
        base = torch.arange(b, device=stats.device, dtype=torch.long)[:, None] * t
        flat = (idx.clamp(min=0) + base).reshape(-1)
        rows = stats.transpose(1, 2).reshape(b * t, d)          # [B*T, D]
        out = rows.index_select(0, flat).reshape(b, s, d)       # backward: index_add
        out = torch.where(valid[:, :, None], out, out.new_zeros(()))
        return out.transpose(1, 2)
    stats = np.asarray(stats)
    if stats.ndim != 3:
        raise ValueError(f"{fname}: stats must have shape [B, D, T], got {list(stats.shape)}")
    b, d, t = stats.shape
    frame = _arrays.NumpyFrame()
    idx = _int_indices(frame, indices, fname, "indices", b).astype(np.int64)
    valid = idx >= 0
    if t == 0:
        return np.zeros((b, d, idx.shape[1]), stats.dtype)
    if (idx >= t).any():
        raise IndexError(f"{fname}: an index is >= T = {t}")
    out = np.take_along_axis(stats, np.where(valid, idx, 0)[:, None, :], axis=2)
    return np.where(valid[:, None, :], out, np.zeros((), stats.dtype))


def indices_to_durations(indices, tokens):
    """Frames per token [B, tokens] int32 from indices [B, S] (-1 ignored)."""
    fname = "libmas.indices_to_durations"
    if _arrays.is_torch_tensor(indices):
        torch = _arrays._torch()
        frame = _arrays.TorchFrame(indices)
        idx = _int_indices(frame, indices, fname, "indices").long()
        out = torch.zeros((idx.shape[0], tokens + 1), dtype=torch.int32, device=idx.device)
        slot = torch.where(idx >= 0, idx, torch.full_like(idx, tokens))
        out.scatter_add_(1, slot, torch.ones_like(slot, dtype=torch.int32))
        return out[:, :tokens].contiguous()
    idx = _int_indices(_arrays.NumpyFrame(), indices, fname, "indices").astype(np.int64)
    out = np.zeros((idx.shape[0], tokens + 1), np.int32)
    for b in range(idx.shape[0]):
        out[b] = np.bincount(np.where(idx[b] >= 0, idx[b], tokens), minlength=tokens + 1)
    return out[:, :tokens]


def durations_to_indices(durations, frames=None):
    """The token of each frame [B, frames] int32 (-1 past the durations'
    sum) from durations [B, T] (non-negative integers). frames: S, default
    the largest sum."""
    fname = "libmas.durations_to_indices"
    if _arrays.is_torch_tensor(durations):
        torch = _arrays._torch()
        frame = _arrays.TorchFrame(durations)
        dur = _int_indices(frame, durations, fname, "durations").long()
        cum = dur.cumsum(1)
        total = cum[:, -1:] if dur.shape[1] else torch.zeros_like(dur[:, :1])
        s = int(total.max()) if frames is None else int(frames)
        pos = torch.arange(s, device=dur.device).expand(dur.shape[0], s).contiguous()
        idx = torch.searchsorted(cum, pos, right=True)
        return torch.where(pos < total, idx, torch.full_like(idx, -1)).to(torch.int32)
    dur = _int_indices(_arrays.NumpyFrame(), durations, fname, "durations").astype(np.int64)
    cum = dur.cumsum(1)
    total = cum[:, -1] if dur.shape[1] else np.zeros(dur.shape[0], np.int64)
    s = int(total.max(initial=0)) if frames is None else int(frames)
    out = np.full((dur.shape[0], s), -1, np.int32)
    for b in range(dur.shape[0]):
        pos = np.arange(s)
        idx = np.searchsorted(cum[b], pos, side="right")
        out[b] = np.where(pos < total[b], idx, -1)
    return out


# ---------------------------------------------------------------------------
# Forward-sum on the Gaussian log-likelihoods
# ---------------------------------------------------------------------------


def _forward_sum_gaussian_raw(fname, frame, z, mean, log_std, x_len, y_len, want_grad,
                              threads):
    """(log_z [B], grads (dz [B,D,S], dmean [B,D,T], dlog_std) or None)."""
    z, mean, log_std = (_arrays.plain(frame, a) for a in (z, mean, log_std))
    b, d, s = (int(v) for v in z.shape)
    t = int(mean.shape[2])
    acc = frame.score_dtype(z)
    log_z = frame.empty((b,), acc)
    grads = None
    outs = [log_z, None, None, None]
    if want_grad:
        # channel-first like the inputs; the C views are [B, S, D], [B, T, D]
        grads = (frame.empty((b, d, s), acc), frame.empty((b, d, t), acc),
                 frame.empty((b, d, t), acc))
        outs[1:] = [_swap12(frame, g) for g in grads]
    if b > 0:
        if t == 0 or s == 0:
            axis = "tokens (T)" if t == 0 else "frames (S)"
            raise ValueError(f"{fname}: the {axis} axis is empty; every item needs x_len >= 1 "
                             "and y_len >= 1")
        _run(fname, frame, True, z, mean, log_std, _full_lengths(frame, x_len, b, t),
             _full_lengths(frame, y_len, b, s), outs, False, threads)
    return log_z, grads


def forward_sum_gaussian(z, mean, log_std, x_lengths=None, y_lengths=None, *, threads=None):
    """log Z of the monotonic alignments on Glow-TTS's Gaussian
    log-likelihood, fused: ``forward_sum(gaussian_loglik(z, mean, log_std, X,
    Y), X, Y)`` without the [B, T, S] matrix (forward or backward) on the CPU.

    Arguments as ``align_gaussian``. Returns log_z [B] (float32; float64 for
    float64 z), differentiable (PyTorch) with respect to z, mean and log_std:
    the gradients come from the same call, the posterior of every cell
    recomputed block by block from checkpoints (O(T sqrt(S)) memory per
    thread) and weighting the Gaussian's derivatives. Errors as
    ``align_gaussian``. On CUDA the same, a block of ~6 sqrt(S) frames at a
    time over the whole batch (cells [B, K, T] in the workspace, never
    [B, T, S]); log_z is bit for bit ``forward_sum(gaussian_loglik(...))``
    on CUDA, the gradients the CPU's within rounding.
    """
    fname = "libmas.forward_sum_gaussian"
    threads = _threads_arg(threads, fname)
    if _ops.use_op(z):
        return _ops.forward_sum_gaussian(z, mean, log_std, x_lengths, y_lengths, threads)
    errors.poll()
    frame, z, mean, log_std, x_len, y_len = _tts_checked(fname, z, mean, log_std, x_lengths,
                                                         y_lengths)
    b, d, s = (int(v) for v in z.shape)
    t = int(mean.shape[2])
    if d == 0:
        from .soft import forward_sum

        v = gaussian_loglik(z, mean, log_std, x_len, y_len, threads=threads or None)
        return forward_sum(v, _full_lengths(frame, x_len, b, t),
                           _full_lengths(frame, y_len, b, s), threads=threads or None)
    if frame.name == "torch":
        torch = frame.torch
        if torch.is_grad_enabled() and any(a.requires_grad for a in (z, mean, log_std)):
            return _autograd(torch).apply(z, mean, log_std, x_len, y_len, threads)
    log_z, _ = _forward_sum_gaussian_raw(fname, frame, z, mean, log_std, x_len, y_len, False,
                                         threads)
    return frame.restore(log_z)


_AUTOGRAD = None


def _autograd(torch):
    global _AUTOGRAD
    if _AUTOGRAD is not None:
        return _AUTOGRAD

    class ForwardSumGaussian(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z, mean, log_std, x_len, y_len, threads):
            frame = _arrays.TorchFrame(z)
            log_z, grads = _forward_sum_gaussian_raw("libmas.forward_sum_gaussian", frame, z,
                                                     mean, log_std, x_len, y_len, True, threads)
            ctx.save_for_backward(*grads)
            ctx.dtypes = (z.dtype, mean.dtype, log_std.dtype)
            return log_z

        @staticmethod
        def backward(ctx, g):
            grads = ctx.saved_tensors
            w = g.to(grads[0].dtype)[:, None, None]
            out = [None, None, None]
            for k in range(3):
                if ctx.needs_input_grad[k]:
                    out[k] = (grads[k] * w).to(ctx.dtypes[k])
            return out[0], out[1], out[2], None, None, None

    _AUTOGRAD = ForwardSumGaussian
    return _AUTOGRAD


__all__ = ["align_gaussian", "forward_sum_gaussian", "expand", "durations_to_indices",
           "indices_to_durations"]
