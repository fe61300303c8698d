"""Hard monotonic alignment search (Viterbi, Glow-TTS rules): the public
functions ``maximum_path`` and ``align`` and the ``AlignResult`` they build on.

Both take NumPy arrays, PyTorch tensors (CPU or CUDA) or any DLPack producer,
zero-copy, and never modify their inputs. Results come back as the same
array type on the same device. CUDA calls run on the tensor's own device and
on the caller's current stream, never synchronise the host, and allocate
through PyTorch's caching allocator (so they work under CUDA graph capture);
their value errors are reported lazily, see ``libmas.errors``.
"""

import operator

from . import _arrays, _C, _dispatch, _fast, _ops, errors


class AlignResult:
    """Outputs of ``libmas.align``.

    Attributes (same array type and device as the value):
      durations: [B, T] int32, frames per token (0 beyond x_len; sums to y_len).
      indices:   [B, S] int32, token of each frame (-1 beyond y_len).
      score:     [B] float32 (float64 for float64 input), the best path's
                 total Q(x_len-1, y_len-1).

    For CUDA input the arrays are ready in stream order like any PyTorch
    result, but an invalid item is only reported later (see ``check``).
    PyTorch tensors from an eager call may share one allocation (each is
    contiguous and its own tensor, as torch.split's pieces are).
    """

    __slots__ = ("durations", "indices", "score", "_frame", "_tokens", "_bst",
                 "_value_dtype", "_pending", "_indices_native")

    def __init__(self, frame, durations, indices, score, tokens, bst, value_dtype, pending):
        self._frame = frame
        self._tokens = tokens
        self._bst = bst
        self._value_dtype = value_dtype
        self._pending = pending
        self.durations = frame.restore(durations)
        self.indices = frame.restore(indices)
        self.score = frame.restore(score)
        self._indices_native = indices

    def path(self, dtype=None):
        """The dense 0/1 path in the value's layout ([B,T,S] or [B,S,T]),
        dtype = the value's unless given. Built from ``indices`` (frame j is
        on token indices[j]) with the array library: no second search."""
        native = self._frame.native_dtype(dtype, self._value_dtype)
        path = self._frame.path_from_indices(self._indices_native, self._tokens, self._bst, native)
        return self._frame.restore(path)

    def check(self):
        """Raises ValueError if the call recorded an error for an item. For
        CUDA input this waits for the kernels of this and every earlier
        pending libmas call (a host synchronisation, like
        ``libmas.check_errors()``) and raises for the first error among
        them; for CPU input errors were already raised, so it returns at
        once."""
        if self._pending is not None:
            errors.wait_all(late=False)

    def __repr__(self):
        return (f"AlignResult(durations={self.durations!r}, indices={self.indices!r}, "
                f"score={self.score!r})")


def _threads_arg(threads, fname):
    if threads is None:
        return 0
    try:
        count = operator.index(threads)
    except TypeError:
        count = 0
    if isinstance(threads, bool) or count < 1:
        raise ValueError(f"{fname}: threads must be None or an integer >= 1, got {threads!r}")
    return min(count, 1 << 30)


def _shape_checked(value, bst, fname):
    shape = tuple(value.shape)
    if len(shape) != 3:
        axes = "[B, S, T]" if bst else "[B, T, S]"
        raise ValueError(f"{fname}: value must have 3 dimensions {axes}, got shape {list(shape)}")
    batch, tokens, frames = (shape[0], shape[2], shape[1]) if bst else shape
    return batch, tokens, frames


def _run(fname, frame, value, code, x_len, y_len, bst, outs, threads, budget=None, mask=None):
    """Calls the C library with outputs allocated by the caller; outs is
    (path, durations, indices, score), None for unwanted ones; budget: the
    most workspace bytes (None: unbounded); mask (CUDA only, instead of the
    lengths): a Glow-TTS mask whose lengths the kernels count themselves.
    Returns the PendingCheck of a CUDA call (or None)."""
    batch, tokens, frames = _shape_checked(value, bst, fname)
    h = frame.handle
    if mask is not None:
        args = (h(value), bst, h(mask)) + tuple(h(a) for a in outs)
        return _dispatch.run(
            fname, frame,
            lambda cuda: _C.hard_cuda_mask_workspace_size(batch, tokens, frames, code),
            lambda cuda, work, how, word: _C.hard_cuda_mask(*args, work, how, word), threads)
    args = (h(value), bst, h(x_len), h(y_len)) + tuple(h(a) for a in outs)

    def workspace_bytes(cuda):
        if cuda:
            full = _C.hard_cuda_workspace_size(batch, tokens, frames, code)
            if budget is None or budget >= full:
                return full
            minimum = _C.hard_cuda_min_workspace_size(batch, tokens, frames, code)
            return _dispatch.budgeted(fname, budget, full, minimum, "GPU")
        full = _C.hard_cpu_workspace_size(batch, tokens, frames, code, threads)
        if budget is None or budget >= full:
            return full
        minimum = _C.hard_cpu_min_workspace_size(batch, tokens, frames, code, threads)
        return _dispatch.budgeted(fname, budget, full, minimum)

    def invoke(cuda, work, how, word):
        if cuda:
            return _C.hard_cuda(*args, work, how, word)
        return _C.hard_cpu(*args, work, how)

    return _dispatch.run(fname, frame, workspace_bytes, invoke, threads)


def _maximum_path_core(fname, frame, v, mask, bst, out_dtype):
    """The dense path of a plain array v (also the registered op's kernel);
    out_dtype is the frame's dtype."""
    code = _arrays.value_code(frame, v, fname)
    batch, tokens, frames = _shape_checked(v, bst, fname)
    if tuple(mask.shape) != tuple(v.shape):
        raise ValueError(f"{fname}: mask shape {list(mask.shape)} differs from value shape "
                         f"{list(v.shape)}")
    path = frame.empty(tuple(v.shape), out_dtype)
    if batch > 0:
        if tokens == 0 or frames == 0:
            axis = "tokens (T)" if tokens == 0 else "frames (S)"
            raise ValueError(f"{fname}: the {axis} axis of value is empty, shape "
                             f"{list(v.shape)}; every item needs x_len >= 1 and y_len >= 1")
        if (frame.is_cuda and _arrays.is_torch_tensor(mask) and mask.device == frame.device
                and frame.code(mask) >= 0):
            # the kernels count the lengths: no reductions of our own
            _run(fname, frame, v, code, None, None, bst, (path, None, None, None), 0,
                 mask=mask.detach())
        else:
            x_len, y_len = _arrays.lengths_from_mask(frame, mask, bst, fname)
            _run(fname, frame, v, code, x_len, y_len, bst, (path, None, None, None), 0)
    return path


def _align_core(fname, frame, v, x_lengths, y_lengths, bst, threads, budget=None):
    """(durations, indices, score, pending) of a plain array v (also the
    registered op's kernel); budget: max_workspace_bytes (None: unbounded)."""
    code = _arrays.value_code(frame, v, fname)
    batch, tokens, frames = _shape_checked(v, bst, fname)
    x_len = frame.lengths(x_lengths, batch, f"{fname}: x_lengths")
    y_len = frame.lengths(y_lengths, batch, f"{fname}: y_lengths")
    i32 = frame.native_dtype("int32", None)
    durations = frame.empty((batch, tokens), i32)
    indices = frame.empty((batch, frames), i32)
    score = frame.empty((batch,), frame.score_dtype(v))
    pending = None
    if batch > 0:
        pending = _run(fname, frame, v, code, x_len, y_len, bst,
                       (None, durations, indices, score), threads, budget)
    return durations, indices, score, pending


def maximum_path(value, mask, *, layout="bts", dtype=None):
    """Drop-in for Glow-TTS ``monotonic_align.maximum_path(value, mask)``.

    value: [B, T, S] scores (layout "bts": tokens, then frames) or [B, S, T]
      (layout "bst", as VITS and ESPnet pass them); float32, float64, float16
      or bfloat16; any strides; NumPy, PyTorch (CPU/CUDA) or DLPack.
    mask: same shape, any dtype; the lengths are read from it as Glow-TTS
      does (bts: x_len = mask.sum(1)[:, 0], y_len = mask.sum(2)[:, 0]; bst
      swaps the two axes): x_len is the number of non-zero entries of the
      first frame's column, y_len of the first token's row (the same as the
      sums for a 0/1 mask). On CUDA the kernel counts them itself (no
      reductions, no host synchronisation).
    dtype: output dtype (default: value's), e.g. torch.bool or np.int32.

    Returns the dense 0/1 path, same type, device and layout as value. Raises
    ValueError for bad shapes or an invalid item (naming the item and the
    rule), TypeError for a bad dtype. For CUDA tensors value errors are
    reported lazily (next libmas call, ``libmas.check_errors()``, or at once
    with LIBMAS_SYNC_CHECKS=1).
    """
    fname = "libmas.maximum_path"
    bst = _arrays.check_layout(layout, fname)
    if _ops.use_op(value):
        return _ops.maximum_path(value, mask, bst, dtype)
    if dtype is None:
        fast = _fast.maximum_path(value, mask, bst)
        if fast is not None:
            return fast[1]
    frame, v = _arrays.frame_for(value, fname)
    path = _maximum_path_core(fname, frame, v, mask, bst, frame.native_dtype(dtype, v.dtype))
    return frame.restore(path)


def align(value, x_lengths, y_lengths, *, layout="bts", threads=None, max_workspace_bytes=None):
    """Hard monotonic alignment of each item's x_len tokens to its y_len frames.

    value: [B, T, S] (layout "bts") or [B, S, T] (layout "bst") scores;
      float32, float64, float16 or bfloat16 (the last two computed in float32);
      any strides; NumPy, PyTorch (CPU/CUDA) or DLPack; never modified.
    x_lengths, y_lengths: [B] integers (lists, NumPy or PyTorch), with
      1 <= x_len <= y_len, x_len <= T, y_len <= S.
    threads: CPU threads; None uses every core, 1 runs on the calling thread.
      The GIL is released while the CPU computes. Ignored on CUDA.
    max_workspace_bytes: None (default) for the unbounded workspace, one
      decision bit per cell ([T x S] bits per thread); or a budget in bytes.
      Below the unbounded size the CPU runs long-form alignment: the scores
      of every token kept every K frames, the forward of one segment redone
      at a time during the backtrack, K chosen to fit; the same results bit
      for bit in about 1.5 to 2 times the time (on as many threads as the
      budget holds). E.g. T=60,000 tokens, S=360,000 frames
      (2 hours at 50 frames/s) needs about 51 MB instead of 2.7 GB. On CUDA
      the long form runs as the Viterbi of the one-state-per-token chain
      (``viterbi``'s, several blocks an item), the same bits, about 0.15 GB
      for that example. A budget below the smallest that works raises
      ValueError stating it.

    Returns an ``AlignResult`` (durations, indices, score, path(dtype)).
    Raises ValueError naming the item and the rule for invalid lengths, NaN
    or +inf on a cell some path can cross (the band j-(Y-X) <= i <= j; other
    cells are ignored), or no finite path; TypeError for a bad
    dtype. For CUDA tensors value errors are reported lazily: at the next
    libmas call, by ``result.check()`` or ``libmas.check_errors()``, or at
    once with LIBMAS_SYNC_CHECKS=1.
    """
    fname = "libmas.align"
    bst = _arrays.check_layout(layout, fname)
    threads = _threads_arg(threads, fname)
    budget = _dispatch.budget_arg(max_workspace_bytes, fname)
    if _ops.use_op(value):
        return _ops.align(value, x_lengths, y_lengths, bst, threads, budget)
    if budget is None:
        fast = _fast.align(value, x_lengths, y_lengths, bst, threads)
        if fast is not None:
            frame, (durations, indices, score), pending = fast
            return AlignResult(frame, durations, indices, score, value.shape[2 if bst else 1],
                               bst, value.dtype, pending)
    frame, v = _arrays.frame_for(value, fname)
    durations, indices, score, pending = _align_core(fname, frame, v, x_lengths, y_lengths, bst,
                                                     threads, budget)
    tokens = v.shape[1] if not bst else v.shape[2]
    return AlignResult(frame, durations, indices, score, tokens, bst, v.dtype, pending)
