"""One way to run a C entry point on the input's device, shared by every op.

CPU: a workspace from the array library, the call, errors raised at once.
CUDA: the tensor's own device, the caller's current stream, a workspace from
PyTorch's caching allocator and a device error word checked lazily (see
``libmas.errors``); nothing synchronises the host.
"""

import operator
import threading

import numpy as np

from . import _C, errors

# CPU workspaces up to this size are kept per thread and reused (with their
# DLPack capsule, which the C module reads without consuming), instead of an
# allocation per call.
_KEEP_BYTES = 1 << 20
_local = threading.local()


class Budget(int):
    """A workspace size below the unbounded one: the call gets exactly this
    many bytes (never a larger kept workspace, with which the C library
    would run the unbounded alignment instead of the long form)."""


def _host_workspace(nbytes):
    nbytes = max(nbytes, 1)
    if nbytes > _KEEP_BYTES or isinstance(nbytes, Budget):
        return np.empty((nbytes,), np.uint8).__dlpack__()
    kept = getattr(_local, "work", None)
    if kept is None or kept[0].shape[0] < nbytes:
        buf = np.empty((max(nbytes, 4096),), np.uint8)
        kept = _local.work = (buf, buf.__dlpack__())
    return kept[1]


# CUDA workspaces up to this size are kept per (device, stream) and reused:
# calls on one stream run one after the other, so they can share one, and an
# allocation per call costs more host time than the rest of a small call.
# Under graph capture a call gets its own (the graph keeps it).
_KEEP_CUDA_BYTES = 64 << 20
_cuda_work = {}  # (device index, raw stream) -> uint8 tensor


def _cuda_workspace(frame, key, nbytes, capturing):
    """The workspace's handle for the C module (kept with its capsule, which
    the module reads without consuming, like the host workspaces)."""
    torch = frame.torch
    if capturing or isinstance(nbytes, Budget) or nbytes > _KEEP_CUDA_BYTES:
        return frame.handle(torch.empty((max(nbytes, 1),), dtype=torch.uint8,
                                        device=frame.device))
    nbytes = max(nbytes, 1)
    kept = _cuda_work.get(key)
    if kept is None or kept[0].shape[0] < nbytes:
        if len(_cuda_work) > 64:
            _cuda_work.clear()
        # allocated on the stream of the key (the current one): stream-ordered
        work = torch.empty((max(nbytes, 1 << 16),), dtype=torch.uint8, device=frame.device)
        kept = _cuda_work[key] = (work, frame.handle(work))
    return kept[1]


def budget_arg(max_workspace_bytes, fname):
    """None, or the budget as an int >= 0; TypeError / ValueError naming
    the argument otherwise."""
    if max_workspace_bytes is None:
        return None
    if isinstance(max_workspace_bytes, bool):
        raise TypeError(f"{fname}: max_workspace_bytes must be None or an integer, got "
                        f"{max_workspace_bytes!r}")
    try:
        n = operator.index(max_workspace_bytes)
    except TypeError:
        raise TypeError(f"{fname}: max_workspace_bytes must be None or an integer, got "
                        f"{type(max_workspace_bytes).__name__}") from None
    if n < 0:
        raise ValueError(f"{fname}: max_workspace_bytes must be >= 0, got {n}")
    return n


def budgeted(fname, budget, full, minimum, where="CPU"):
    """Workspace bytes for a call under a budget (None: unbounded): the
    unbounded size when it fits, else the budget, which the C library then
    meets by long-form (checkpointed) alignment. Raises ValueError stating
    the minimum when the budget is below it."""
    if budget is None or budget >= full:
        return full
    if budget < minimum:
        raise ValueError(f"{fname}: max_workspace_bytes={budget} is below the smallest "
                         f"workspace this alignment needs on the {where}: {minimum} bytes "
                         f"(unbounded: {full} bytes)")
    return Budget(budget)


def run(fname, frame, workspace_bytes, invoke, threads):
    """workspace_bytes(cuda) -> bytes the call needs; invoke(cuda, work,
    how, word) -> (status, item), where `how` is the thread count on the CPU
    and the raw stream on CUDA, and `word` the error word's handle (None on
    the CPU). Returns errors.PENDING for a tracked CUDA call, else None."""
    h = frame.handle
    if not frame.is_cuda:
        errors.poll()
        status, item = invoke(False, _host_workspace(workspace_bytes(False)), threads, None)
        errors.raise_status(fname, status, item)
        return None
    torch = frame.torch
    if torch._C._cuda_getDevice() != frame.device_index:
        with torch.cuda.device(frame.device):
            return run(fname, frame, workspace_bytes, invoke, threads)
    stream, raw_stream = frame.current_stream()
    # poll + an error word (a fresh captured one under graph capture: ticket None)
    word, ticket = errors.begin(torch, frame.device, stream)
    if ticket is None:
        word = h(word)
    try:
        work = _cuda_workspace(frame, (frame.device_index, raw_stream), workspace_bytes(True),
                               ticket is None)
    except BaseException:
        errors.give_back(ticket)
        raise
    try:
        status, item = invoke(True, work, raw_stream, word)
    except BaseException:
        errors.give_back(ticket)
        raise
    if status != _C.OK:
        errors.give_back(ticket)
        errors.raise_status(fname, status, item)
    return errors.track(fname, ticket, stream, raw_stream)
