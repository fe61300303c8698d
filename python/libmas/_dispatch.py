"""One way to run a C entry point on the input's device, shared by every op.

CPU: a workspace from the array library, the call, errors raised at once.
CUDA: the tensor's own device, the caller's current stream, a workspace from
PyTorch's caching allocator and a device error word checked lazily (see
``libmas.errors``); nothing synchronises the host.
"""

from . import _C, errors


def run(fname, frame, workspace_bytes, invoke, threads):
    """workspace_bytes(cuda) -> bytes the call needs; invoke(cuda, work,
    how, word) -> (status, item), where `how` is the thread count on the CPU
    and the raw stream on CUDA, and `word` the error word's handle (None on
    the CPU). Returns errors.PENDING for a tracked CUDA call, else None."""
    errors.poll()
    h = frame.handle
    if not frame.is_cuda:
        work = frame.empty((max(workspace_bytes(False), 1),), frame.uint8)
        status, item = invoke(False, h(work), threads, None)
        errors.raise_status(fname, status, item)
        return None
    torch = frame.torch
    if torch._C._cuda_getDevice() != frame.device_index:
        with torch.cuda.device(frame.device):
            return run(fname, frame, workspace_bytes, invoke, threads)
    stream, raw_stream = frame.current_stream()
    work = torch.empty((max(workspace_bytes(True), 1),), dtype=torch.uint8, device=frame.device)
    word, ticket = errors.error_word(torch, frame.device, stream)
    if ticket is None:
        word = h(word)  # under capture: a captured fill, a tensor of its own
    try:
        status, item = invoke(True, h(work), raw_stream, word)
    except BaseException:
        errors.give_back(ticket)
        raise
    if status != _C.OK:
        errors.give_back(ticket)
        errors.raise_status(fname, status, item)
    return errors.track(fname, ticket, stream, raw_stream)
