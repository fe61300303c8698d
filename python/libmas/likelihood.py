"""Likelihoods: diagonal Gaussians and Gaussian mixtures (mas.h section 6).

  GMM(means, variances, log_weights, mixture_sizes)   a prepared acoustic model
      .loglik(x)  log p(x | state) for frames x [N, J] or [B, S, J]
  gmm_loglik(x, means, variances, log_weights, mixture_sizes)   the same, one call
  gaussian_loglik(z, mean, log_std, x_lengths, y_lengths)       Glow-TTS's logp

A diagonal Gaussian k scores a frame x as log w_k + log N(x; mu_k, diag var_k);
a state is a run of consecutive Gaussians (``mixture_sizes`` of them) and its
log-likelihood is the log-sum-exp of their scores (best=True: the max, and
which Gaussian). The library computes it as one fused kernel: coefficients
[K, mu/var, -1/(2 var)] prepared once, frames expanded to [1, x, x^2], the
scores of a state log-added in registers before anything is written.

Inputs are NumPy arrays or PyTorch tensors (CPU or CUDA), float32, float64,
float16 or bfloat16, any strides, never modified. Arithmetic is float32
(float64 for float64 frames); results are of that type, in the caller's array
type and device. ``precision="tf32"`` / ``"bf16"`` select tensor cores on
CUDA; the CPU computes the default precision whatever is asked. PyTorch
tensors that require grad get gradients for the frames and every model
parameter (autograd, computed with PyTorch ops in bounded memory).
"""

import math

import numpy as np

from . import _arrays, _C, _dispatch, errors
from .hard import _threads_arg

_PRECISIONS = {"float32": 0, "tf32": 1, "bf16": 2}
_SPREAD_VARIANCE = 0
_SPREAD_LOG_STD = 1
_LOGLIK_MAX = 1
_LOG_2PI = math.log(2.0 * math.pi)
_GRAD_CHUNK_ELEMENTS = 1 << 24  # per-Gaussian responsibilities held at once


# ---------------------------------------------------------------------------
# Small array helpers (NumPy or PyTorch)
# ---------------------------------------------------------------------------


def _swap12(frame, a):
    """The view with the last two axes swapped (no copy)."""
    return a.transpose(1, 2) if frame.name == "torch" else a.transpose(0, 2, 1)


def _lead(a):
    """The view with a leading axis of 1."""
    return a[None]


def _precision_arg(precision, fname):
    code = _PRECISIONS.get(precision) if isinstance(precision, str) else None
    if code is None:
        raise ValueError(f"{fname}: precision must be 'float32', 'tf32' or 'bf16', "
                         f"got {precision!r}")
    return code


def _float_input(frame, arr, fname, what):
    if frame.code(arr) not in _arrays.VALUE_CODES:
        raise TypeError(f"{fname}: {what} must be float32, float64, float16 or bfloat16, "
                        f"got {arr.dtype}")
    return arr


def _like_frame(frame, arr, fname, what):
    """arr as an array of frame's kind and device (lists and NumPy arrays
    are converted; a tensor on another device is an error)."""
    if frame.name == "torch":
        torch = frame.torch
        if isinstance(arr, torch.Tensor):
            if arr.device != frame.device:
                raise ValueError(f"{fname}: {what} is on {arr.device}, the other arguments "
                                 f"on {frame.device}")
            return arr
        return torch.as_tensor(np.asarray(arr), device=frame.device)
    if _arrays.is_torch_tensor(arr):
        raise TypeError(f"{fname}: {what} is a PyTorch tensor, the other arguments NumPy "
                        "arrays")
    return arr if isinstance(arr, np.ndarray) else np.asarray(arr)


def _host(frame, arr):
    """A NumPy copy of arr (synchronises on CUDA: model preparation only)."""
    if frame.name == "torch":
        a = arr.detach()
        if a.dtype in (frame.torch.bfloat16, frame.torch.float16):
            a = a.float()
        return a.cpu().numpy()
    return np.asarray(arr)


def _first(mask):
    idx = np.flatnonzero(np.asarray(mask).reshape(-1))
    return int(idx[0]) if idx.size else -1


def _wants_grad(*arrays):
    torch = _arrays._torch()
    if torch is None or not torch.is_grad_enabled():
        return False
    return any(isinstance(a, torch.Tensor) and a.requires_grad for a in arrays)


# ---------------------------------------------------------------------------
# The two C calls
# ---------------------------------------------------------------------------


def _gauss_coef(fname, frame, means3, spread3, kind, log_w3, coef, threads, describe):
    """coef <- the coefficients of the Gaussians (mas_gauss_coef_*).
    describe(item) words a bad-model error of flat Gaussian index `item`."""
    h = frame.handle

    def invoke(cuda, work, how, word):
        status, item = _C.gauss_coef(cuda, h(means3), h(spread3), kind, h(log_w3), h(coef),
                                     how, word)
        if status == _C.ERR_BAD_MODEL:
            raise ValueError(f"{fname}: {describe(item)}")
        return status, item

    _dispatch.run(fname, frame, lambda cuda: 0, invoke, threads)


def _loglik(fname, frame, x3, coef3, offsets, n_states, n_len, s_len, out3, best3, flags,
            precision, threads, mixture_size=0):
    """mixture_size: G when every state has G Gaussians, else 0 (the CUDA
    tensor-core precisions then log-add in registers)."""
    h = frame.handle

    def workspace_bytes(cuda):
        return _C.loglik_workspace_size(cuda, h(x3), h(coef3), h(offsets), n_states, h(out3),
                                        h(best3), flags, precision, 0 if cuda else threads)

    def invoke(cuda, work, how, word):
        return _C.loglik(cuda, h(x3), h(coef3), h(offsets), n_states, h(n_len), h(s_len),
                         h(out3), h(best3), flags, precision, mixture_size, work, how, word)

    _dispatch.run(fname, frame, workspace_bytes, invoke, threads)


# ---------------------------------------------------------------------------
# GMM
# ---------------------------------------------------------------------------


class GMM:
    """A Gaussian-mixture acoustic model, prepared once in the layout the
    kernel reads.

    means, variances: [M, J] (M Gaussians over J dimensions); log_weights [M]
    (log of each Gaussian's weight within its state); mixture_sizes [states]
    (integers >= 1 summing to M: state s owns the next mixture_sizes[s]
    Gaussians, so mixtures may differ in size). Arrays of one kind (NumPy, or
    PyTorch on one device); any float dtype.

    Attributes: n_states, n_gaussians, dim (J), coef ([2J+1, M]: rows K,
    mu/var, -1/(2 var); float32, float64 for float64 means), offsets
    ([states + 1] int64, state s owns Gaussians offsets[s]:offsets[s+1]).
    Raises ValueError for shape mismatches, a NaN/inf mean, a variance that
    is not a finite number > 0, a NaN or +inf log weight (-inf is a weight of
    0), or mixture sizes < 1 or not summing to M; TypeError for non-float
    arrays.

    The model is prepared from the parameters' values when it is built. NumPy
    arrays are copied then (changing them afterwards changes nothing: build a
    new GMM). PyTorch tensors changed in place afterwards (an optimizer step)
    are checked and prepared again at the next call; changing them between a
    call and its backward raises PyTorch's in-place error in the backward.
    """

    def __init__(self, means, variances, log_weights, mixture_sizes, *, threads=None):
        fname = "libmas.GMM"
        errors.poll()
        self._threads = _threads_arg(threads, fname)
        frame, means = _arrays.frame_for(means, fname)
        variances = _like_frame(frame, variances, fname, "variances")
        log_weights = _like_frame(frame, log_weights, fname, "log_weights")
        for arr, what in ((means, "means"), (variances, "variances"),
                          (log_weights, "log_weights")):
            _float_input(frame, arr, fname, what)
        if means.ndim != 2 or min(means.shape) < 1:
            raise ValueError(f"{fname}: means must have shape [M, J] with M, J >= 1, got "
                             f"{list(means.shape)}")
        m, j = (int(s) for s in means.shape)
        if tuple(variances.shape) != (m, j):
            raise ValueError(f"{fname}: variances must have the shape of means [{m}, {j}], "
                             f"got {list(variances.shape)}")
        if tuple(log_weights.shape) != (m,):
            raise ValueError(f"{fname}: log_weights must have shape [{m}] (one per Gaussian), "
                             f"got {list(log_weights.shape)}")
        sizes = _host(frame, mixture_sizes) if _arrays.is_torch_tensor(mixture_sizes) \
            else np.asarray(mixture_sizes)
        if sizes.ndim != 1 or sizes.shape[0] < 1 or (sizes.size and sizes.dtype.kind not in "iu"):
            raise ValueError(f"{fname}: mixture_sizes must be a 1-D sequence of integers "
                             f"(Gaussians per state), got shape {list(sizes.shape)} dtype "
                             f"{sizes.dtype}")
        bad = _first(sizes < 1)
        if bad >= 0:
            raise ValueError(f"{fname}: mixture_sizes[{bad}] = {int(sizes[bad])}: every state "
                             "needs at least one Gaussian")
        total = int(sizes.astype(np.int64).sum())
        if total != m:
            raise ValueError(f"{fname}: mixture_sizes sum to {total}, but means has {m} "
                             "Gaussians")
        _check_model_values(fname, frame, means, variances, log_weights)
        if frame.name != "torch":  # a snapshot: later changes to the caller's arrays do nothing
            means, variances, log_weights = (np.array(a, copy=True)
                                             for a in (means, variances, log_weights))
        host_off = np.zeros(sizes.shape[0] + 1, np.int64)
        np.cumsum(sizes, out=host_off[1:])
        self._frame = frame
        self._host_offsets = host_off
        # every state the same size: stated to the library (tensor-core path)
        self._uniform = int(sizes[0]) if bool((sizes == sizes[0]).all()) else 0
        if frame.name == "torch":
            self.offsets = frame.torch.as_tensor(host_off, device=frame.device)
        else:
            self.offsets = host_off
        self.means, self.variances, self.log_weights = means, variances, log_weights
        self.n_states = int(sizes.shape[0])
        self.n_gaussians = m
        self.dim = j
        self._coefs = {}
        self._versions = self._param_versions()
        self._f64 = frame.code(means) == _C.FLOAT64
        self._coef(self._f64)

    @property
    def coef(self):
        """[2J+1, M]: rows K, mu/var, -1/(2 var), of the means' accumulator type."""
        return self._coef(self._f64)

    def _param_versions(self):
        """PyTorch's in-place version counters of the parameters (None for NumPy)."""
        if self._frame.name != "torch":
            return None
        return tuple(int(t._version) for t in (self.means, self.variances, self.log_weights))

    def _coef(self, f64):
        """coef [P, M] of the accumulator type (computed once per type, again
        after the PyTorch parameters were changed in place)."""
        versions = self._param_versions()
        if versions != self._versions:  # the coefficient call checks the new values
            self._coefs = {}
            self._versions = versions
        got = self._coefs.get(f64)
        if got is not None:
            return got
        frame = self._frame
        if frame.name == "torch":
            acc = frame.torch.float64 if f64 else frame.torch.float32
        else:
            acc = np.float64 if f64 else np.float32
        coef = frame.empty((1, 2 * self.dim + 1, self.n_gaussians), acc)
        m = _lead(_arrays.plain(frame, self.means))
        v = _lead(_arrays.plain(frame, self.variances))
        w = _lead(_lead(_arrays.plain(frame, self.log_weights)))

        def describe(item):
            # a bad value (the parameters changed after the checks of __init__), else overflow
            problem = _model_value_problem(frame, self.means, self.variances, self.log_weights)
            return problem or (f"Gaussian {item}: its coefficients are not finite in "
                               f"{'float64' if f64 else 'float32'} (variance too small or too "
                               "large)")

        _gauss_coef("libmas.GMM", frame, m, v, _SPREAD_VARIANCE, w, coef, self._threads,
                    describe)
        self._coefs[f64] = coef[0]
        return coef[0]

    def loglik(self, x, *, precision="float32", best=False, threads=None):
        """log p(x | state) for frames x [N, J] or [B, S, J]: returns [N, states]
        or [B, S, states], float32 (float64 for float64 x). best=True returns
        (the best Gaussian's score per state, int32 index of that Gaussian in
        [0, M), lowest on ties) instead of the log-sum. precision: 'float32'
        (default), 'tf32' or 'bf16' (tensor cores on CUDA from sm_80 on; the
        CPU computes float32; 'bf16' computes as 'tf32', TF32 products and
        their error, since bfloat16 products would not be faster here).
        Fastest on CUDA, in every precision, when every state has the same
        number of Gaussians, a multiple of 8 dividing 128 or a multiple of
        128: the log-sum is then taken from the accumulators in registers.
        Differentiable with PyTorch tensors that require grad (x or
        the model's parameters); with best=True the gradient flows through
        each state's best Gaussian."""
        fname = "libmas.GMM.loglik"
        errors.poll()
        prec = _precision_arg(precision, fname)
        threads = _threads_arg(threads, fname)
        x = self._check_x(x, fname)
        if _wants_grad(x, self.means, self.variances, self.log_weights):
            res = _autograd(self._frame.torch)["gmm"].apply(
                x, self.means, self.variances, self.log_weights, self, prec, bool(best),
                threads)
            return res if best else res[0]
        out, idx = self._forward(x, prec, bool(best), threads, fname)
        return (out, idx) if best else out

    def _check_x(self, x, fname):
        frame = self._frame
        if frame.name == "torch":
            torch = frame.torch
            if not isinstance(x, torch.Tensor):
                x = _like_frame(frame, x, fname, "x")
            elif x.device != frame.device:
                raise ValueError(f"{fname}: x is on {x.device}, the model on {frame.device}")
        else:
            if _arrays.is_torch_tensor(x):
                raise TypeError(f"{fname}: x is a PyTorch tensor, the model holds NumPy arrays")
            x = x if isinstance(x, np.ndarray) else _arrays.frame_for(x, fname)[1]
        _float_input(frame, x, fname, "x")
        if x.ndim not in (2, 3):
            raise ValueError(f"{fname}: x must have shape [N, J] or [B, S, J], got "
                             f"{list(x.shape)}")
        if int(x.shape[-1]) != self.dim:
            raise ValueError(f"{fname}: x has J = {int(x.shape[-1])} dimensions per frame, "
                             f"the model {self.dim}")
        return x

    def _forward(self, x, prec, want_best, threads, fname):
        frame = self._frame
        xp = _arrays.plain(frame, x)
        x3 = xp if xp.ndim == 3 else _lead(xp)
        f64 = frame.code(xp) == _C.FLOAT64
        coef = self._coef(f64)
        b, n = int(x3.shape[0]), int(x3.shape[1])
        out = frame.empty((b, n, self.n_states), frame.score_dtype(xp))
        idx = frame.empty((b, n, self.n_states), frame.native_dtype("int32", None)) \
            if want_best else None
        if b > 0 and n > 0:
            _loglik(fname, frame, x3, _lead(coef), self.offsets, self.n_states, None, None, out,
                    idx, _LOGLIK_MAX if want_best else 0, prec, threads, self._uniform)
        if xp.ndim == 2:
            out = out[0]
            idx = idx[0] if idx is not None else None
        return frame.restore(out), frame.restore(idx) if idx is not None else None


def _model_value_problem(frame, means, variances, log_weights):
    """The first bad parameter value, worded, or None."""
    mu, var, lw = _host(frame, means), _host(frame, variances), _host(frame, log_weights)
    bad = _first(~np.isfinite(mu).all(axis=1))
    if bad >= 0:
        return f"means of Gaussian {bad} hold NaN or inf"
    bad = _first(~(np.isfinite(var) & (var > 0)).all(axis=1))
    if bad >= 0:
        return (f"variances of Gaussian {bad} must be finite and > 0 (non-positive variance, "
                f"NaN or inf), got {var[bad].tolist()[:8]}")
    bad = _first(np.isnan(lw) | (lw == np.inf))
    if bad >= 0:
        return (f"log_weights[{bad}] = {lw[bad]} must not be NaN or +inf (-inf, a weight of 0, "
                "is allowed)")
    return None


def _check_model_values(fname, frame, means, variances, log_weights):
    problem = _model_value_problem(frame, means, variances, log_weights)
    if problem:
        raise ValueError(f"{fname}: {problem}")


def gmm_loglik(x, means, variances, log_weights, mixture_sizes, *, precision="float32",
               best=False, threads=None):
    """``GMM(means, variances, log_weights, mixture_sizes).loglik(x, ...)`` in
    one call (see ``libmas.GMM``): log p(x | state) [N, states] or
    [B, S, states]."""
    model = GMM(means, variances, log_weights, mixture_sizes, threads=threads)
    return model.loglik(x, precision=precision, best=best, threads=threads)


# ---------------------------------------------------------------------------
# Per-item Gaussians (Glow-TTS)
# ---------------------------------------------------------------------------


def _tts_checked(fname, z, mean, log_std, x_lengths, y_lengths):
    """The checks of Glow-TTS arrays shared by gaussian_loglik and the fused
    ops (libmas.fused), with the same wording: (frame, z, mean, log_std,
    x_len, y_len), the lengths as the frame's int64 vectors or None."""
    frame, z = _arrays.frame_for(z, fname)
    mean = _like_frame(frame, mean, fname, "mean")
    log_std = _like_frame(frame, log_std, fname, "log_std")
    for arr, what in ((z, "z"), (mean, "mean"), (log_std, "log_std")):
        _float_input(frame, arr, fname, what)
    if z.ndim != 3:
        raise ValueError(f"{fname}: z must have shape [B, D, S], got {list(z.shape)}")
    b, d, s = (int(v) for v in z.shape)
    if mean.ndim != 3 or int(mean.shape[0]) != b or int(mean.shape[1]) != d:
        raise ValueError(f"{fname}: mean must have shape [B={b}, D={d}, T], got "
                         f"{list(mean.shape)}")
    t = int(mean.shape[2])
    if tuple(log_std.shape) != tuple(mean.shape):
        raise ValueError(f"{fname}: log_std must have the shape of mean {list(mean.shape)}, "
                         f"got {list(log_std.shape)}")
    x_len = None if x_lengths is None else frame.lengths(x_lengths, b, f"{fname}: x_lengths")
    y_len = None if y_lengths is None else frame.lengths(y_lengths, b, f"{fname}: y_lengths")
    if not frame.is_cuda:
        for lens, what, top in ((x_len, "x_lengths", t), (y_len, "y_lengths", s)):
            if lens is None:
                continue
            host = _host(frame, lens)
            bad = _first((host < 0) | (host > top))
            if bad >= 0:
                raise ValueError(f"{fname}: item {bad}: {what} = {int(host[bad])} is outside "
                                 f"[0, {top}]")
    return frame, z, mean, log_std, x_len, y_len


def _tts_describe(t):
    """The words of a bad-model error of flat Gaussian index `item` (b*T + k)."""
    def describe(item):
        return (f"item {item // t}: token {item % t}: mean or log_std is NaN or inf, or "
                "exp(2 log_std) is 0 or inf")
    return describe


def gaussian_loglik(z, mean, log_std, x_lengths=None, y_lengths=None, *, layout="bts",
                    precision="float32", threads=None):
    """Glow-TTS's log-likelihood of every frame under every token's Gaussian.

    z [B, D, S] (frames), mean and log_std [B, D, T] (tokens), channel-first
    as in Glow-TTS. Returns logp [B, T, S] ("bts") or [B, S, T] ("bst"):
        logp[b,t,s] = sum_d ( -1/2 log(2 pi) - log_std[b,d,t]
                              - (z[b,d,s] - mean[b,d,t])^2 / (2 exp(2 log_std[b,d,t])) )
    which equals Glow-TTS's four terms (logp1 + logp2 + logp3 + logp4) up to
    float32 rounding. x_lengths (tokens, <= T) and y_lengths (frames, <= S):
    optional [B]; cells of tokens >= x_len or frames >= y_len are 0 and get no
    gradient. float32 (float64 for float64 z). mean and log_std must be finite
    everywhere (also beyond x_lengths). Differentiable with respect to z,
    mean and log_std (PyTorch). precision: "float32" (default) or "tf32"
    ("bf16" computes as "tf32"): on CUDA from Ampere on, float32 z, the
    products on the tensor cores with x, x^2 and the coefficients rounded to
    TF32 (the cells of ``align_gaussian(..., precision="tf32")``); a cell is
    off by about 1e-3 of the sum of its terms' magnitudes (B=32 T=512 S=2048
    D=80, standard normal z and mean: largest error 0.11, as PyTorch's own
    TF32 logp). The CPU computes the default whatever is asked."""
    fname = "libmas.gaussian_loglik"
    errors.poll()
    bst = _arrays.check_layout(layout, fname)
    prec = _precision_arg(precision, fname)
    threads = _threads_arg(threads, fname)
    frame, z, mean, log_std, x_len, y_len = _tts_checked(fname, z, mean, log_std, x_lengths,
                                                         y_lengths)
    if _wants_grad(z, mean, log_std):
        return _autograd(frame.torch)["tts"].apply(z, mean, log_std, x_len, y_len, bst, prec,
                                                   threads)
    out, _ = _tts_forward(fname, frame, z, mean, log_std, x_len, y_len, bst, prec, threads)
    return frame.restore(out)


def _tts_forward(fname, frame, z, mean, log_std, x_len, y_len, bst, prec, threads):
    """(logp in the caller's layout, coef [B, 2D+1, T])."""
    z, mean, log_std = (_arrays.plain(frame, a) for a in (z, mean, log_std))
    b, d, s = (int(v) for v in z.shape)
    t = int(mean.shape[2])
    acc = frame.score_dtype(z)
    # rows of whole 16 bytes: CUDA's one-Gaussian kernel copies them 16 bytes
    # at a time (other strides take the general kernel, 2.3x slower a cell)
    coef = frame.empty((b, 2 * d + 1, (t + 3) // 4 * 4), acc)[:, :, :t]
    out = frame.empty((b, s, t) if bst else (b, t, s), acc)
    if min(b, d, s, t) == 0:
        return out, coef

    _gauss_coef(fname, frame, _swap12(frame, mean), _swap12(frame, log_std), _SPREAD_LOG_STD,
                None, coef, threads, _tts_describe(t))
    out3 = out if bst else _swap12(frame, out)  # (items, frames, tokens)
    _loglik(fname, frame, _swap12(frame, z), coef, None, t, y_len, x_len, out3, None, 0, prec,
            threads)
    return out, coef


# ---------------------------------------------------------------------------
# Autograd (built on first use, so importing libmas never imports torch)
# ---------------------------------------------------------------------------


def _grad_core(torch, x3, coef3, out3, best3, g3, host_off, n_len, s_len, need_x, need_coef):
    """Gradients of sum(g3 * out3) with respect to x3 [B, N, J] and coef3
    [Bc, P, M], out3 = the states' log-sum-exp (or max, best3 given) of the
    scores E @ coef, E = [1, x, x^2]. Gaussians are visited in chunks of whole
    states so the per-Gaussian weights stay bounded in memory."""
    acc = out3.dtype
    x3, coef3, g3 = x3.to(acc), coef3.to(acc), g3.to(acc)
    b, n, j = x3.shape
    bc, p, m = coef3.shape
    s = out3.shape[2]
    dev = x3.device
    if n_len is not None:
        fmask = torch.arange(n, device=dev)[None, :] < n_len[:, None]
        g3 = g3.masked_fill(~fmask[:, :, None], 0)
        x3 = x3.masked_fill(~fmask[:, :, None], 0)
    if s_len is not None:
        smask = torch.arange(s, device=dev)[None, :] < s_len[:, None]
        g3 = g3.masked_fill(~smask[:, None, :], 0)
    e = torch.cat([torch.ones_like(x3[:, :, :1]), x3, x3 * x3], dim=2)
    dx = torch.zeros_like(x3) if need_x else None
    dcoef = torch.zeros((bc, p, m), dtype=acc, device=dev) if need_coef else None
    if host_off is None:
        host_off = np.arange(m + 1, dtype=np.int64)
    per_gauss = max(1, b * n)
    s0 = 0
    while s0 < s:
        # whole states, about _GRAD_CHUNK_ELEMENTS weights at a time
        limit = host_off[s0] + max(1, _GRAD_CHUNK_ELEMENTS // per_gauss)
        s1 = int(np.searchsorted(host_off, limit, side="right")) - 1
        s1 = min(max(s1, s0 + 1), s)
        g0, g1 = int(host_off[s0]), int(host_off[s1])
        c = coef3[:, :, g0:g1]
        gs = g3[:, :, s0:s1]
        if g1 - g0 == s1 - s0:          # one Gaussian per state: weight = upstream
            w = gs
        elif best3 is not None:         # max: the upstream goes to the best Gaussian
            idx = best3[:, :, s0:s1].long() - g0
            idx = idx.clamp(0, g1 - g0 - 1)  # -1 outside the lengths, where gs is 0
            w = torch.zeros((b, n, g1 - g0), dtype=acc, device=dev)
            w.scatter_add_(2, idx, gs)
        else:                           # log-sum-exp: responsibilities
            state_of = torch.as_tensor(
                np.repeat(np.arange(s1 - s0), np.diff(host_off[s0:s1 + 1])), device=dev)
            sc = torch.matmul(e, c)
            o = out3[:, :, s0:s1].to(acc).index_select(2, state_of)
            ge = gs.index_select(2, state_of)
            w = torch.where(ge != 0, torch.exp(sc - o) * ge, torch.zeros_like(ge))
        if need_x:
            dx = dx + torch.matmul(w, c[:, 1:j + 1, :].transpose(1, 2)) \
                + 2 * x3 * torch.matmul(w, c[:, j + 1:, :].transpose(1, 2))
        if need_coef:
            gc = torch.matmul(e.transpose(1, 2), w)
            dcoef[:, :, g0:g1] = gc.sum(0, keepdim=True) if bc == 1 and b > 1 else gc
        s0 = s1
    return dx, dcoef


def _gmm_coef_expr(torch, means, variances, log_weights):
    """coef [P, M] from the parameters, as mas.h defines it (for autograd)."""
    a = means / variances
    q = -0.5 / variances
    k = log_weights - 0.5 * (_LOG_2PI + torch.log(variances) + means * means / variances).sum(1)
    return torch.cat([k[None, :], a.t(), q.t()], dim=0)


def _tts_coef_expr(torch, mean, log_std):
    """coef [B, 2D+1, T] from Glow-TTS's mean and log_std [B, D, T]."""
    inv = torch.exp(-2.0 * log_std)
    k = -(0.5 * _LOG_2PI + log_std + 0.5 * mean * mean * inv).sum(1)
    return torch.cat([k[:, None, :], mean * inv, -0.5 * inv], dim=1)


def _param_grads(torch, expr, params, dcoef, acc):
    """Gradients of sum(dcoef * expr(params)) for the params that need one."""
    need = [p is not None and p.requires_grad for p in params]
    if not any(need):
        return [None] * len(params)
    with torch.enable_grad():
        leaves = [p.detach().to(acc).requires_grad_(nd) if p is not None else None
                  for p, nd in zip(params, need)]
        value = expr(*leaves)
        wanted = [leaf for leaf, nd in zip(leaves, need) if nd]
        grads = iter(torch.autograd.grad(value, wanted, grad_outputs=dcoef.to(value.dtype)))
    return [next(grads).to(p.dtype) if nd else None for p, nd in zip(params, need)]


_AUTOGRAD = None


def _autograd(torch):
    global _AUTOGRAD
    if _AUTOGRAD is not None:
        return _AUTOGRAD

    class GMMLogLik(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, means, variances, log_weights, model, prec, want_best, threads):
            fname = "libmas.GMM.loglik"
            out, idx = model._forward(x, prec, want_best, threads, fname)
            ctx.model = model
            ctx.want_best = want_best
            ctx.x_dtype = x.dtype
            # the parameters too: PyTorch then refuses a backward after an in-place change
            ctx.save_for_backward(x.detach(), out, idx if idx is not None else out, means,
                                  variances, log_weights)
            if idx is not None:
                ctx.mark_non_differentiable(idx)
            else:
                idx = out.new_empty((0,), dtype=torch.int32)
                ctx.mark_non_differentiable(idx)
            return out, idx

        @staticmethod
        def backward(ctx, g_out, _g_idx):
            x, out, idx = ctx.saved_tensors[:3]
            model = ctx.model
            two = x.dim() == 2
            x3 = x[None] if two else x
            out3 = out[None] if two else out
            g3 = g_out[None] if two else g_out
            best3 = (idx[None] if two else idx) if ctx.want_best else None
            f64 = x.dtype == torch.float64
            coef = model._coef(f64)[None]
            params = (model.means, model.variances, model.log_weights)
            need_coef = any(isinstance(p, torch.Tensor) and p.requires_grad for p in params)
            dx, dcoef = _grad_core(torch, x3, coef, out3, best3, g3, model._host_offsets,
                                   None, None, ctx.needs_input_grad[0], need_coef)
            grads = [None, None, None]
            if need_coef:
                grads = _param_grads(torch, lambda m, v, w: _gmm_coef_expr(torch, m, v, w),
                                     params, dcoef[0], out.dtype)
            if dx is not None:
                dx = (dx[0] if two else dx).to(ctx.x_dtype)
            return (dx, grads[0], grads[1], grads[2], None, None, None, None)

    class TTSLogLik(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z, mean, log_std, x_len, y_len, bst, prec, threads):
            fname = "libmas.gaussian_loglik"
            frame = _arrays.TorchFrame(z)
            out, coef = _tts_forward(fname, frame, z, mean, log_std, x_len, y_len, bst, prec,
                                     threads)
            ctx.save_for_backward(z.detach(), mean.detach(), log_std.detach(), coef, out)
            ctx.lengths = (x_len, y_len)
            ctx.bst = bst
            ctx.dtypes = (z.dtype, mean.dtype, log_std.dtype)
            return out

        @staticmethod
        def backward(ctx, g_out):
            z, mean, log_std, coef, out = ctx.saved_tensors
            x_len, y_len = ctx.lengths
            x3 = z.transpose(1, 2)
            out3 = out if ctx.bst else out.transpose(1, 2)
            g3 = g_out if ctx.bst else g_out.transpose(1, 2)
            need_z = ctx.needs_input_grad[0]
            need_coef = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
            dx, dcoef = _grad_core(torch, x3, coef, out3, None, g3, None, y_len, x_len, need_z,
                                   need_coef)
            dm = dl = None
            if need_coef:
                pm = mean.detach().requires_grad_(ctx.needs_input_grad[1])
                pl = log_std.detach().requires_grad_(ctx.needs_input_grad[2])
                dm, dl = _param_grads(torch, lambda a, b: _tts_coef_expr(torch, a, b),
                                      (pm, pl), dcoef, out.dtype)
                dm = dm.to(ctx.dtypes[1]) if dm is not None else None
                dl = dl.to(ctx.dtypes[2]) if dl is not None else None
            dz = dx.transpose(1, 2).to(ctx.dtypes[0]) if dx is not None else None
            return dz, dm, dl, None, None, None, None, None

    _AUTOGRAD = {"gmm": GMMLogLik, "tts": TTSLogLik}
    return _AUTOGRAD


__all__ = ["GMM", "gmm_loglik", "gaussian_loglik"]
