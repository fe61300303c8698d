"""Turning C status codes into Python exceptions, and the lazy checking of
errors that CUDA kernels report.

CPU calls raise at once: the C library returns a status naming the batch
item and the rule.

CUDA calls cannot: a value-dependent error (a length out of range, NaN in
the values, no finite path) is only known once the kernel has run, and
waiting for it would add a host synchronisation to every training step.
So each CUDA call gets a device "error word" (int64, -1 = no error) that the
kernel sets to the first failing item and rule. Words live in a small pool
per device, set to -1 once, so a call adds nothing to the caller's stream but
one event record: no memset, no copy. The call stays *pending*:

  * Every later libmas call polls without blocking: once a pending call's
    event has completed, one asynchronous copy on a private stream brings the
    words of all such calls to pinned host memory, and a later poll (after
    that copy's own event) reads them and raises for the first error,
    naming the earlier call, the item and the rule.
  * ``libmas.check_errors()`` waits for every pending call and raises.
  * ``AlignResult.check()`` does the same for the pending calls so far.
  * With the environment variable ``LIBMAS_SYNC_CHECKS=1`` every CUDA call
    waits for its kernel and raises before returning (debugging mode).
  * Inside CUDA graph capture a call gets a fresh word (set by a captured
    fill) and is not tracked: replays are not checked. The kernels still
    validate, and a failing item's outputs are zeros / -1 / -inf as on the
    CPU.
"""

import os
import sys
import threading

from . import _C

_TYPE_ERRORS = frozenset((_C.ERR_BAD_DTYPE,))
_RUNTIME_ERRORS = frozenset((_C.ERR_NO_CUDA, _C.ERR_CUDA))
_WORDS_PER_CHUNK = 256


def message(fname, status, item):
    rule = _C.status_string(status)
    if item is not None and item >= 0:
        return f"{fname}: item {item}: {rule}"
    return f"{fname}: {rule}"


def exception(fname, status, item):
    text = message(fname, status, item)
    if status in _TYPE_ERRORS:
        return TypeError(text)
    if status in _RUNTIME_ERRORS:
        return RuntimeError(text)
    return ValueError(text)


def raise_status(fname, status, item):
    """Raises for a non-zero status returned by the C library."""
    if status != _C.OK:
        raise exception(fname, status, item)


def sync_checks_enabled():
    return os.environ.get("LIBMAS_SYNC_CHECKS", "") not in ("", "0")


class _Chunk:
    """Error words in device memory (all -1 when free) and their host copy."""

    def __init__(self, torch, device):
        self.words = torch.full((_WORDS_PER_CHUNK,), -1, dtype=torch.int64, device=device)
        self.host = torch.empty((_WORDS_PER_CHUNK,), dtype=torch.int64, pin_memory=True)
        # Streams other than the one that filled the words wait for the fill
        # on the device until it is known to be done (no host wait).
        self.filled = torch.cuda.Event()
        self.filled.record()
        self.fill_done = False
        self.free = list(range(_WORDS_PER_CHUNK - 1, -1, -1))
        self.copy_event = None   # readback in flight
        self.copy_batch = []     # checks whose words that readback carries


class _Check:
    """One CUDA call whose error word has not been read yet."""

    __slots__ = ("fname", "state", "chunk", "slot", "event")

    def __init__(self, fname, state, chunk, slot, event):
        self.fname, self.state, self.chunk, self.slot, self.event = (
            fname, state, chunk, slot, event)


class _DeviceState:
    """Error-word chunks, a readback stream and spare events of one device."""

    def __init__(self, torch, device):
        self.torch = torch
        self.device = device
        self.chunks = []
        self.pending = []         # _Check, in call order
        self.events = []          # spare torch.cuda.Event objects
        self.stream = torch.cuda.Stream(device=device)

    def take_word(self, stream):
        """(chunk, slot, word view) of a free error word, usable on stream."""
        chunk = next((c for c in self.chunks if c.free), None)
        if chunk is None:
            chunk = _Chunk(self.torch, self.device)
            self.stream.wait_event(chunk.filled)
            self.chunks.append(chunk)
        if not chunk.fill_done:
            chunk.fill_done = chunk.filled.query()
            if not chunk.fill_done:
                stream.wait_event(chunk.filled)
        slot = chunk.free.pop()
        return chunk, slot, chunk.words[slot:slot + 1]

    def event(self):
        return self.events.pop() if self.events else self.torch.cuda.Event()

    def start_readback(self, wait):
        """Copies the words of finished calls to the host, one asynchronous
        copy per chunk on the private stream. With wait, waits for every
        call first. A chunk whose copy is in flight takes its newly finished
        calls with the next copy."""
        ready = []
        for check in self.pending:
            if wait:
                check.event.synchronize()
            elif not check.event.query():
                break  # calls after it are most likely not done either
            ready.append(check)
        launched = set()
        for check in ready:
            chunk = check.chunk
            if id(chunk) not in launched:
                if chunk.copy_event is not None:
                    continue
                with self.torch.cuda.stream(self.stream):
                    chunk.host.copy_(chunk.words, non_blocking=True)
                    chunk.copy_event = self.event()
                    chunk.copy_event.record(self.stream)
                launched.add(id(chunk))
            chunk.copy_batch.append(check)
            self.pending.remove(check)
            self.events.append(check.event)

    def finish_readback(self, wait):
        """Reads the host words of finished copies and frees clean words.
        Returns (check, status, item) of the first error, or None."""
        first = None
        for chunk in self.chunks:
            if chunk.copy_event is None:
                continue
            if wait:
                chunk.copy_event.synchronize()
            elif not chunk.copy_event.query():
                continue
            self.events.append(chunk.copy_event)
            chunk.copy_event = None
            batch, chunk.copy_batch = chunk.copy_batch, []
            for check in batch:
                word = int(chunk.host[check.slot])
                if word == -1:
                    chunk.free.append(check.slot)
                    continue
                # A used word is retired rather than reset, so no later call
                # can race with the reset; errors are rare.
                status, item = _C.decode_device_error(word)
                if first is None and status != _C.OK:
                    first = (check, status, item)
        return first

    def busy(self):
        return bool(self.pending) or any(c.copy_event is not None for c in self.chunks)


_states = {}
_lock = threading.RLock()  # libmas may be called from several threads


def _state(torch, device):
    state = _states.get(device)
    if state is None:
        state = _states[device] = _DeviceState(torch, device)
    return state


def error_word(torch, device, stream):
    """(word tensor, ticket) for a CUDA call about to be enqueued on stream.
    Under graph capture the word is a fresh captured fill and ticket None."""
    if torch.cuda.is_current_stream_capturing():
        return torch.full((1,), -1, dtype=torch.int64, device=device), None
    with _lock:
        state = _state(torch, device)
        chunk, slot, word = state.take_word(stream)
    return word, (state, chunk, slot)


def give_back(ticket):
    """Returns the word of a call that failed before it was enqueued."""
    if ticket is not None:
        with _lock:
            ticket[1].free.append(ticket[2])


def track(fname, ticket, stream):
    """Registers a CUDA call just enqueued on stream. Returns a handle for
    AlignResult.check (None under capture). In sync mode waits and raises."""
    if ticket is None:
        return None
    state, chunk, slot = ticket
    event = state.event()
    event.record(stream)
    check = _Check(fname, state, chunk, slot, event)
    with _lock:
        state.pending.append(check)
    if sync_checks_enabled():
        _settle(wait=True, late=False)
    return check


def _capturing():
    # Querying an event while a stream of this thread is being captured would
    # invalidate the capture, so polling waits until the capture is over.
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_current_stream_capturing()


def _settle(wait, late):
    first = None
    with _lock:
        for state in list(_states.values()):
            while state.busy():
                state.start_readback(wait)
                error = state.finish_readback(wait)
                first = first or error
                if not wait:
                    break
    if first is not None:
        check, status, item = first
        where = f"{check.fname} on {check.state.device}"
        if late:
            where += " (an earlier asynchronous call, reported now)"
        raise exception(where, status, item)


def poll():
    """Raises for an error recorded by an earlier CUDA call whose kernel has
    finished. Never blocks. Called at the start of every libmas call."""
    if _states and not _capturing():
        _settle(wait=False, late=True)


def check_errors():
    """Waits for every pending CUDA call of libmas and raises ValueError (or
    TypeError / RuntimeError) for the first that recorded an error, naming
    the call, the item and the rule. Calls made inside CUDA graph capture
    are not tracked. Does nothing when no CUDA call is pending."""
    wait_all(late=True)


def wait_all(late):
    """check_errors(); late=False words the message as the caller's own."""
    if not _states:
        return
    if _capturing():
        raise RuntimeError("libmas: cannot wait for CUDA errors inside CUDA graph capture")
    _settle(wait=True, late=late)
