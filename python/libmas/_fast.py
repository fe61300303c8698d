"""Eager PyTorch calls of ``align``, ``maximum_path``, ``forward_sum``,
``posterior``, the monotonic attentions (also the forwards of the
autograd functions, and the attentions' backward) and ``align_gaussian``
through libmas._torch, the C++ glue (issue 9: a call's host time at
training shapes).

The general path costs a few tens of microseconds of Python a call: output
allocations through PyTorch's argument parser, a DLPack capsule per array,
the checks of each argument. The glue allocates with at::empty and calls
the library with the tensors' pointers. It takes only the common case:
plain tensors, int64 lengths (or a mask) on the value's device or no
lengths, the output in the value's dtype, outside graph capture and
tracing. For anything else it answers None and the caller runs the general
path, which gives the same results and words every error. Value errors are
the general path's too: raised at once on the CPU, recorded in a device
error word on CUDA (``libmas.errors``).

The glue is built where PyTorch's headers are found at build time (see
README); without it, or when PyTorch's version differs from the one it was
built against, every call takes the general path. ``ENABLED = False`` makes
every call take it (``python -m libmas bench --calls`` times both).
"""

import sys

from . import _C, _arrays, errors

ENABLED = True

_glue = None    # libmas._torch; False where it is missing or was built for another PyTorch
_tensor = None  # torch.Tensor: the glue takes exactly this type
_frames = {}    # torch.device -> TorchFrame (results' frames)


def available():
    """libmas._torch when it can run (PyTorch imported, same version as at
    build time), else None."""
    global _glue, _tensor
    if _glue is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        try:
            from . import _torch as glue
        except ImportError:
            glue = False
        else:
            if glue.torch_version != torch.__version__:
                glue = False
        _tensor = torch.Tensor
        _glue = glue
    return _glue or None


def _frame(value):
    device = value.device
    frame = _frames.get(device)
    if frame is None:
        frame = _frames[device] = _arrays.TorchFrame(value)
    return frame


def _run(fname, value, launch, cpu_errors=True):
    """launch(glue, stream, word) -> (outputs, (status, item)) or None, the
    glue's call. Returns (frame, outputs, pending), or None for the general
    path (also when the glue may not take a call on value; with cpu_errors
    False also for a CPU call that failed, for the general path to run it
    again and word the error its own way)."""
    glue = _glue or available()
    if not glue or not ENABLED or type(value) is not _tensor:
        return None
    if not value.is_cuda:
        errors.poll()
        got = launch(glue, 0, 0)
        if got is None or (not cpu_errors and got[1][0] != _C.OK):
            return None
        errors.raise_status(fname, *got[1])
        return _frame(value), got[0], None
    torch = sys.modules["torch"]
    index = value.get_device()
    if torch._C._cuda_getDevice() != index:
        return None
    frame = _frame(value)
    stream, raw = _arrays.current_stream(torch, frame.device, index)
    taken = errors.begin_address(torch, frame.device, stream)
    if taken is None:
        return None
    address, ticket = taken
    try:
        got = launch(glue, raw, address)
    except BaseException:
        errors.give_back(ticket)
        raise
    if got is None:
        errors.give_back(ticket)
        return None
    return frame, got[0], errors.track(fname, ticket, stream, raw)


def align(value, x_lengths, y_lengths, bst, threads):
    """(frame, (durations, indices, score), pending) of libmas.align, or None."""
    return _run("libmas.align", value,
                lambda glue, stream, word: glue.align(value, x_lengths, y_lengths, bst, threads,
                                                      stream, word))


def maximum_path(value, mask, bst):
    """(frame, path, pending) of libmas.maximum_path (the value's dtype), or None."""
    return _run("libmas.maximum_path", value,
                lambda glue, stream, word: glue.maximum_path(value, mask, bst, 0, stream, word))


def forward_sum(fname, value, x_lengths, y_lengths, bst, threads, want_log_z, want_post):
    """(frame, (log_z or None, posterior or None), pending) of a forward-sum, or None."""
    return _run(fname, value,
                lambda glue, stream, word: glue.forward_sum(value, x_lengths, y_lengths, bst,
                                                            want_log_z, want_post, threads, stream,
                                                            word))


def attention(fname, kind, logits, n_lengths, m_lengths, threads):
    """(frame, log_phi, pending) of a monotonic attention's forward, or None."""
    return _run(fname, logits,
                lambda glue, stream, word: glue.attention(kind, logits, n_lengths, m_lengths,
                                                          threads, stream, word))


def attention_backward(fname, kind, x, n, m, log_phi, grad_log_phi, threads):
    """d loss / d logits of a monotonic attention (the accumulator's dtype), or None."""
    got = _run(fname, x,
               lambda glue, stream, word: glue.attention_backward(kind, x, n, m, log_phi,
                                                                  grad_log_phi, threads, stream,
                                                                  word))
    return None if got is None else got[1]


def align_gaussian(z, mean, log_std, x_lengths, y_lengths, precision, threads):
    """(frame, (durations, indices, score), pending) of libmas.align_gaussian, or None.
    A CPU call that fails runs again on the general path, which words a bad
    model's error with its token."""
    return _run("libmas.align_gaussian", z,
                lambda glue, stream, word: glue.align_gaussian(z, mean, log_std, x_lengths,
                                                               y_lengths, precision, threads,
                                                               stream, word),
                cpu_errors=False)
