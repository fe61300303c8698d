"""The public ops as registered PyTorch custom operators (torch.library,
namespace ``libmas``), so that torch.compile(fullgraph=True), torch.export
and the other tracers see one opaque op with a schema, a fake (meta)
implementation and, where the op has a gradient, an autograd formula:

  libmas::maximum_path(Tensor value, Tensor mask, bool bst, ScalarType dtype) -> Tensor
  libmas::align(Tensor value, Tensor x_lengths, Tensor y_lengths, bool bst, int threads,
      int max_workspace_bytes=-1) -> (Tensor durations, Tensor indices, Tensor score)
      (max_workspace_bytes -1: unbounded)
  libmas::forward_sum(Tensor value, Tensor x_lengths, Tensor y_lengths, bool bst,
      int threads, bool with_posterior) -> (Tensor log_z, Tensor posterior)
      (posterior is empty [0] unless with_posterior; the backward uses it
      when present and calls libmas::posterior otherwise)
  libmas::posterior(Tensor value, Tensor x_lengths, Tensor y_lengths, bool bst, int threads)
      -> Tensor
  libmas::monotonic_attention(Tensor logits, Tensor? n_lengths, Tensor? m_lengths,
      int threads) -> Tensor                               (and _m2m, the same schema)
  libmas::monotonic_attention_backward(Tensor logits, Tensor? n_lengths,
      Tensor? m_lengths, Tensor log_phi, Tensor grad_log_phi, int kind, int threads) -> Tensor
  libmas::align_gaussian(Tensor z, Tensor mean, Tensor log_std, Tensor x_lengths,
      Tensor y_lengths, int threads, int max_workspace_bytes=-1, int precision=0)
      -> (Tensor durations, Tensor indices, Tensor score)
  libmas::forward_sum_gaussian(Tensor z, Tensor mean, Tensor log_std, Tensor x_lengths,
      Tensor y_lengths, int threads, bool with_grad)
      -> (Tensor log_z, Tensor grad_z, Tensor grad_mean, Tensor grad_log_std)
      (the gradients are empty [0] unless with_grad; the backward scales
      them by the upstream gradient)

bst is the layout (True for [B, S, T]); threads 0 means every core. Lengths
are int64 on the value's device (the public functions convert them). The
kernels (CPU and CUDA) are the public functions' own code; CUDA errors are
checked lazily as for every call (libmas.errors).

Eager calls do not go through the dispatcher: a registered Python op costs
about 9 us more per call than calling the C module directly (measured with
``python -m libmas bench --calls``), so the public functions take the op only
when something traces them (torch.compile, fake tensors as in torch.export,
a dispatch mode such as make_fx) and call the C library directly otherwise;
both paths run the same code and give the same results.

Registration needs PyTorch and never imports it on its own: it happens when
libmas is imported after torch, at the first libmas call with a tensor, or
by ``libmas.torch_ops()``. Compile-first code that imported libmas before
torch should call ``libmas.torch_ops()`` once.
"""

import sys

from . import _arrays, errors

# Route eager tensor calls through the registered ops too (bench --calls).
ALWAYS = False

_OPS = None


def use_op(value):
    """True when value is a tensor whose call must go through the registered
    op: under torch.compile, for tensor subclasses (fake, functional) and
    under a dispatch mode."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor):
        return False
    if ALWAYS or torch.compiler.is_compiling():
        registered()
        return True
    if type(value) is torch.Tensor or type(value) is torch.nn.Parameter:
        if torch._C._len_torch_dispatch_stack() == 0:
            if _OPS is None:
                registered()
            return False
    registered()
    return True


def registered():
    """torch.ops.libmas, registering the ops on first use."""
    global _OPS
    if _OPS is None:
        torch = sys.modules.get("torch")
        if torch is None:
            import torch  # noqa: F811 - asked for explicitly (libmas.torch_ops)
        _register(torch)
        _register_fused(torch, _arrays.TorchFrame)
        _OPS = torch.ops.libmas
    return _OPS


def _accum(torch, dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _register(torch):
    from typing import Optional

    from torch import Tensor

    from . import hard, soft

    def frame_of(value):
        return _arrays.TorchFrame(value)

    # -- maximum_path -----------------------------------------------------
    @torch.library.custom_op("libmas::maximum_path", mutates_args=(),
                             device_types=("cpu", "cuda"))
    def maximum_path(value: Tensor, mask: Tensor, bst: bool, dtype: torch.dtype) -> Tensor:
        return hard._maximum_path_core("libmas.maximum_path", frame_of(value), value.detach(),
                                       mask.detach(), bst, dtype)

    @maximum_path.register_fake
    def _(value, mask, bst, dtype):
        return value.new_empty(value.shape, dtype=dtype)

    # -- align ------------------------------------------------------------
    @torch.library.custom_op("libmas::align", mutates_args=(), device_types=("cpu", "cuda"))
    def align(value: Tensor, x_lengths: Tensor, y_lengths: Tensor, bst: bool,
              threads: int, max_workspace_bytes: int = -1) -> tuple[Tensor, Tensor, Tensor]:
        budget = None if max_workspace_bytes < 0 else max_workspace_bytes
        durations, indices, score, _ = hard._align_core(
            "libmas.align", frame_of(value), value.detach(), x_lengths, y_lengths, bst, threads,
            budget)
        return durations, indices, score

    @align.register_fake
    def _(value, x_lengths, y_lengths, bst, threads, max_workspace_bytes=-1):
        batch, tokens, frames = _sizes(value, bst)
        return (value.new_empty((batch, tokens), dtype=torch.int32),
                value.new_empty((batch, frames), dtype=torch.int32),
                value.new_empty((batch,), dtype=_accum(torch, value.dtype)))

    # -- forward_sum and posterior ------------------------------------------
    @torch.library.custom_op("libmas::forward_sum", mutates_args=(),
                             device_types=("cpu", "cuda"))
    def forward_sum(value: Tensor, x_lengths: Tensor, y_lengths: Tensor, bst: bool,
                    threads: int, with_posterior: bool) -> tuple[Tensor, Tensor]:
        log_z, post = soft._forward_sum_core("libmas.forward_sum", frame_of(value),
                                             value.detach(), x_lengths, y_lengths, bst, threads,
                                             True, with_posterior)
        if post is None:
            post = value.new_empty((0,), dtype=log_z.dtype)
        return log_z, post

    @forward_sum.register_fake
    def _(value, x_lengths, y_lengths, bst, threads, with_posterior):
        acc = _accum(torch, value.dtype)
        post_shape = value.shape if with_posterior else (0,)
        return value.new_empty((value.shape[0],), dtype=acc), value.new_empty(post_shape, dtype=acc)

    def forward_sum_setup(ctx, inputs, output):
        value, x_lengths, y_lengths, bst, threads, _ = inputs
        ctx.save_for_backward(value, x_lengths, y_lengths, output[1])
        ctx.bst, ctx.threads = bst, threads

    def forward_sum_backward(ctx, grad_log_z, grad_post):
        value, x_lengths, y_lengths, post = ctx.saved_tensors
        if grad_log_z is None:
            return None, None, None, None, None, None
        if post.dim() != 3:  # not kept by the forward: computed now
            post = torch.ops.libmas.posterior(value.detach(), x_lengths, y_lengths, ctx.bst,
                                              ctx.threads)
        grad = post * grad_log_z.to(post.dtype)[:, None, None]
        return grad.to(value.dtype), None, None, None, None, None

    forward_sum.register_autograd(forward_sum_backward, setup_context=forward_sum_setup)

    @torch.library.custom_op("libmas::posterior", mutates_args=(), device_types=("cpu", "cuda"))
    def posterior(value: Tensor, x_lengths: Tensor, y_lengths: Tensor, bst: bool,
                  threads: int) -> Tensor:
        _, post = soft._forward_sum_core("libmas.posterior", frame_of(value), value.detach(),
                                         x_lengths, y_lengths, bst, threads, False, True)
        return post

    @posterior.register_fake
    def _(value, x_lengths, y_lengths, bst, threads):
        return value.new_empty(value.shape, dtype=_accum(torch, value.dtype))

    # -- monotonic attention ------------------------------------------------
    def attention_kernel(fname, kind):
        def kernel(logits, n_lengths, m_lengths, threads):
            _, _, log_phi = soft._attention_forward_core(fname, kind, frame_of(logits),
                                                         logits.detach(), n_lengths, m_lengths,
                                                         threads)
            return log_phi
        return kernel

    def attention_fake(logits, n_lengths, m_lengths, threads):
        return logits.new_empty(logits.shape, dtype=_accum(torch, logits.dtype))

    def attention_setup(kind):
        def setup(ctx, inputs, output):
            logits, n_lengths, m_lengths, threads = inputs
            ctx.save_for_backward(logits, n_lengths, m_lengths, output)
            ctx.kind, ctx.threads = kind, threads
        return setup

    def attention_backward(ctx, grad_log_phi):
        logits, n_lengths, m_lengths, log_phi = ctx.saved_tensors
        grad = torch.ops.libmas.monotonic_attention_backward(
            logits.detach(), n_lengths, m_lengths, log_phi, grad_log_phi, ctx.kind, ctx.threads)
        return grad.to(logits.dtype), None, None, None

    for name, kind in (("monotonic_attention", soft._ONE_TO_MANY),
                       ("monotonic_attention_m2m", soft._MANY_TO_MANY)):
        kernel = attention_kernel(f"libmas.{name}", kind)

        def op_fn(logits: Tensor, n_lengths: Optional[Tensor], m_lengths: Optional[Tensor],
                  threads: int, _kernel=kernel) -> Tensor:
            return _kernel(logits, n_lengths, m_lengths, threads)

        op = torch.library.custom_op(f"libmas::{name}", op_fn, mutates_args=(),
                                     device_types=("cpu", "cuda"),
                                     schema="(Tensor logits, Tensor? n_lengths, "
                                            "Tensor? m_lengths, int threads) -> Tensor")
        op.register_fake(attention_fake)
        op.register_autograd(attention_backward, setup_context=attention_setup(kind))

    @torch.library.custom_op("libmas::monotonic_attention_backward", mutates_args=(),
                             device_types=("cpu", "cuda"))
    def attention_bwd(logits: Tensor, n_lengths: Optional[Tensor], m_lengths: Optional[Tensor],
                      log_phi: Tensor, grad_log_phi: Tensor, kind: int, threads: int) -> Tensor:
        frame = frame_of(logits)
        fname = ("libmas.monotonic_attention" if kind == soft._ONE_TO_MANY
                 else "libmas.monotonic_attention_m2m")
        batch = logits.shape[0] if logits.dim() else 0
        n = soft._attention_lengths(frame, n_lengths, batch, f"{fname}: n_lengths")
        m = soft._attention_lengths(frame, m_lengths, batch, f"{fname}: m_lengths")
        return soft._attention_backward_raw(fname, kind, frame, logits.detach(), n, m,
                                            log_phi.detach(), grad_log_phi.detach(), threads)

    @attention_bwd.register_fake
    def _(logits, n_lengths, m_lengths, log_phi, grad_log_phi, kind, threads):
        return logits.new_empty(logits.shape, dtype=_accum(torch, logits.dtype))


def _register_fused(torch, frame_of):
    from torch import Tensor

    from . import fused

    @torch.library.custom_op("libmas::align_gaussian", mutates_args=(),
                             device_types=("cpu", "cuda"))
    def align_gaussian(z: Tensor, mean: Tensor, log_std: Tensor, x_lengths: Tensor,
                       y_lengths: Tensor, threads: int, max_workspace_bytes: int = -1,
                       precision: int = 0) -> tuple[Tensor, Tensor, Tensor]:
        budget = None if max_workspace_bytes < 0 else max_workspace_bytes
        durations, indices, score, _ = fused._align_gaussian_core(
            "libmas.align_gaussian", frame_of(z), z.detach(), mean.detach(), log_std.detach(),
            x_lengths, y_lengths, threads, False, budget, precision)
        return durations, indices, score

    @align_gaussian.register_fake
    def _(z, mean, log_std, x_lengths, y_lengths, threads, max_workspace_bytes=-1, precision=0):
        b, t, s = z.shape[0], mean.shape[2], z.shape[2]
        return (z.new_empty((b, t), dtype=torch.int32), z.new_empty((b, s), dtype=torch.int32),
                z.new_empty((b,), dtype=_accum(torch, z.dtype)))

    @torch.library.custom_op("libmas::forward_sum_gaussian", mutates_args=(),
                             device_types=("cpu", "cuda"))
    def forward_sum_gaussian(z: Tensor, mean: Tensor, log_std: Tensor, x_lengths: Tensor,
                             y_lengths: Tensor, threads: int,
                             with_grad: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        fname = "libmas.forward_sum_gaussian"
        frame = frame_of(z)
        _, zc, mc, lc, x, y = fused._tts_checked(fname, z, mean, log_std, x_lengths, y_lengths)
        log_z, grads = fused._forward_sum_gaussian_raw(fname, frame, zc, mc, lc, x, y,
                                                       with_grad, threads)
        if grads is None:
            grads = tuple(log_z.new_empty((0,)) for _ in range(3))
        return (log_z,) + tuple(grads)

    @forward_sum_gaussian.register_fake
    def _(z, mean, log_std, x_lengths, y_lengths, threads, with_grad):
        acc = _accum(torch, z.dtype)
        shapes = (z.shape, mean.shape, mean.shape) if with_grad else ((0,),) * 3
        return (z.new_empty((z.shape[0],), dtype=acc),) + tuple(
            z.new_empty(sh, dtype=acc) for sh in shapes)

    def fsg_setup(ctx, inputs, output):
        ctx.save_for_backward(*output[1:])
        ctx.dtypes = (inputs[0].dtype, inputs[1].dtype, inputs[2].dtype)

    def fsg_backward(ctx, grad_log_z, _g1, _g2, _g3):
        grads = ctx.saved_tensors
        out = [None, None, None]
        for k in range(3):
            if ctx.needs_input_grad[k]:
                w = grad_log_z.to(grads[k].dtype)[:, None, None]
                out[k] = (grads[k] * w).to(ctx.dtypes[k])
        return out[0], out[1], out[2], None, None, None, None

    forward_sum_gaussian.register_autograd(fsg_backward, setup_context=fsg_setup)


def align_gaussian(z, mean, log_std, x_lengths, y_lengths, bst, threads, budget=None, prec=0):
    from .hard import AlignResult

    torch = sys.modules["torch"]
    fname = "libmas.align_gaussian"
    b, t, s = _gaussian_checked(torch, z, mean, log_std, fname)
    x = _lengths(torch, x_lengths if x_lengths is not None else [t] * b, z, b,
                 f"{fname}: x_lengths")
    y = _lengths(torch, y_lengths if y_lengths is not None else [s] * b, z, b,
                 f"{fname}: y_lengths")
    durations, indices, score = registered().align_gaussian(
        z.detach(), mean.detach(), log_std.detach(), x, y, threads,
        -1 if budget is None else budget, prec)
    pending = errors.PENDING if z.is_cuda else None
    return AlignResult(_arrays.TorchFrame(z), durations, indices, score, t, bst, score.dtype,
                       pending)


def forward_sum_gaussian(z, mean, log_std, x_lengths, y_lengths, threads):
    torch = sys.modules["torch"]
    fname = "libmas.forward_sum_gaussian"
    b, t, s = _gaussian_checked(torch, z, mean, log_std, fname)
    x = _lengths(torch, x_lengths if x_lengths is not None else [t] * b, z, b,
                 f"{fname}: x_lengths")
    y = _lengths(torch, y_lengths if y_lengths is not None else [s] * b, z, b,
                 f"{fname}: y_lengths")
    want = torch.is_grad_enabled() and any(
        isinstance(a, torch.Tensor) and a.requires_grad for a in (z, mean, log_std))
    return registered().forward_sum_gaussian(z, mean, log_std, x, y, threads, want)[0]


def _gaussian_checked(torch, z, mean, log_std, fname):
    """Metadata checks of the Glow-TTS arrays (traceable); the values are
    checked by the kernel (libmas.likelihood._tts_checked)."""
    for arr, what in ((z, "z"), (mean, "mean"), (log_std, "log_std")):
        if not isinstance(arr, torch.Tensor):
            raise TypeError(f"{fname}: {what} must be a tensor like z")
        _check_value(torch, arr, fname, what, "[B, D, S]" if what == "z" else "[B, D, T]")
    if tuple(mean.shape[:2]) != tuple(z.shape[:2]) or tuple(log_std.shape) != tuple(mean.shape):
        raise ValueError(f"{fname}: mean and log_std must have shape [B={z.shape[0]}, "
                         f"D={z.shape[1]}, T], got {list(mean.shape)}, {list(log_std.shape)}")
    return z.shape[0], mean.shape[2], z.shape[2]


def _sizes(value, bst):
    shape = value.shape
    return (shape[0], shape[2], shape[1]) if bst else (shape[0], shape[1], shape[2])


# ---------------------------------------------------------------------------
# The public functions' traced path: checks on metadata only, then the op.
# ---------------------------------------------------------------------------


def _check_value(torch, value, fname, what, axes):
    if value.dim() != 3:
        raise ValueError(f"{fname}: {what} must have 3 dimensions {axes}, got shape "
                         f"{list(value.shape)}")
    if value.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        raise TypeError(f"{fname}: {what} must be float32, float64, float16 or bfloat16, "
                        f"got {value.dtype}")


def _lengths(torch, x, value, batch, what):
    """x as int64 on the value's device (metadata checks only: traceable)."""
    if isinstance(x, torch.Tensor):
        integer = not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool)
        _arrays._check_lengths_meta(x.dim(), tuple(x.shape), integer, batch, what)
        _arrays.check_device(what, x.device, value.device)
        return x.detach().to(device=value.device, dtype=torch.int64, non_blocking=True)
    t = torch.as_tensor(x)
    integer = not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool)
    _arrays._check_lengths_meta(t.dim(), tuple(t.shape), integer, batch, what)
    return t.to(device=value.device, dtype=torch.int64)


def _threads(threads):
    return 0 if threads is None else threads


def maximum_path(value, mask, bst, dtype):
    torch = sys.modules["torch"]
    fname = "libmas.maximum_path"
    _check_value(torch, value, fname, "value", "[B, S, T]" if bst else "[B, T, S]")
    if not isinstance(mask, torch.Tensor):
        mask = torch.as_tensor(mask)
    _arrays.check_device(f"{fname}: mask", mask.device, value.device)
    if tuple(mask.shape) != tuple(value.shape):
        raise ValueError(f"{fname}: mask shape {list(mask.shape)} differs from value shape "
                         f"{list(value.shape)}")
    out = value.dtype if dtype is None else _arrays.TorchFrame(value).native_dtype(dtype, None)
    return registered().maximum_path(value.detach(), mask.detach(), bst, out)


def align(value, x_lengths, y_lengths, bst, threads, budget=None):
    from .hard import AlignResult

    torch = sys.modules["torch"]
    fname = "libmas.align"
    _check_value(torch, value, fname, "value", "[B, S, T]" if bst else "[B, T, S]")
    batch, tokens, _ = _sizes(value, bst)
    x = _lengths(torch, x_lengths, value, batch, f"{fname}: x_lengths")
    y = _lengths(torch, y_lengths, value, batch, f"{fname}: y_lengths")
    durations, indices, score = registered().align(value.detach(), x, y, bst, threads,
                                                   -1 if budget is None else budget)
    pending = errors.PENDING if value.is_cuda else None
    return AlignResult(_arrays.TorchFrame(value), durations, indices, score, tokens, bst,
                       value.dtype, pending)


def forward_sum(value, x_lengths, y_lengths, layout, threads):
    torch = sys.modules["torch"]
    fname = "libmas.forward_sum"
    bst = _arrays.check_layout(layout, fname)
    threads = _threads_checked(threads, fname)
    _check_value(torch, value, fname, "value", "[B, S, T]" if bst else "[B, T, S]")
    batch = value.shape[0]
    x = _lengths(torch, x_lengths, value, batch, f"{fname}: x_lengths")
    y = _lengths(torch, y_lengths, value, batch, f"{fname}: y_lengths")
    want_grad = value.requires_grad and torch.is_grad_enabled()
    log_z, _ = registered().forward_sum(value, x, y, bst, threads, want_grad)
    return log_z


def posterior(value, x_lengths, y_lengths, layout, threads):
    torch = sys.modules["torch"]
    fname = "libmas.posterior"
    bst = _arrays.check_layout(layout, fname)
    threads = _threads_checked(threads, fname)
    _check_value(torch, value, fname, "value", "[B, S, T]" if bst else "[B, T, S]")
    batch = value.shape[0]
    x = _lengths(torch, x_lengths, value, batch, f"{fname}: x_lengths")
    y = _lengths(torch, y_lengths, value, batch, f"{fname}: y_lengths")
    return registered().posterior(value.detach(), x, y, bst, threads)


def attention(fname, kind, logits, n_lengths, m_lengths, threads):
    from . import soft

    torch = sys.modules["torch"]
    threads = _threads_checked(threads, fname)
    _check_value(torch, logits, fname, "logits", "[B, N, M]")
    batch = logits.shape[0]
    n = None if n_lengths is None else _lengths(torch, n_lengths, logits, batch,
                                                 f"{fname}: n_lengths")
    m = None if m_lengths is None else _lengths(torch, m_lengths, logits, batch,
                                                 f"{fname}: m_lengths")
    ops = registered()
    op = ops.monotonic_attention if kind == soft._ONE_TO_MANY else ops.monotonic_attention_m2m
    return op(logits, n, m, threads)


def _threads_checked(threads, fname):
    from .hard import _threads_arg

    return _threads_arg(threads, fname)
