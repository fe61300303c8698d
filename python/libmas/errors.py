"""Turning C status codes into Python exceptions, and the lazy checking of
errors that CUDA kernels report.

CPU calls raise at once: the C library returns a status naming the batch
item and the rule.

CUDA calls cannot: a value-dependent error (a length out of range, NaN in
the values, no finite path) is only known once the kernel has run, and
waiting for it would add a host synchronisation to every training step.
So each CUDA call gets a device "error word" (int64, -1 = no error) that the
kernel sets (atomicMin) to the first failing item and rule. The words of a
device form one ring in device memory, set to -1 once; a word is handed to
a call and only comes back after it has been read as clean, so a call adds
nothing to the caller's stream: no memset, no event, no copy. The call is
only noted (its name, its word, its stream) as *pending*:

  * Now and then a libmas call starts one readback: when none is in flight
    and the oldest pending call is 64 calls or 2 ms old, one asynchronous
    copy of the ring to pinned host memory and one event, enqueued on the
    oldest pending call's stream behind every pending call of that stream.
    A later call whose poll finds that event completed reads the words of
    the calls it covered and raises for the first error, naming the earlier
    call, the item and the rule. So the host cost of checking is a few
    microseconds per readback, shared by every call it covers, and a small
    constant (one clock read) per call.
  * ``libmas.check_errors()`` reads back every pending call (waiting for
    their kernels) and raises.
  * ``AlignResult.check()`` does the same for the pending calls so far.
  * With the environment variable ``LIBMAS_SYNC_CHECKS=1`` (read when the
    first CUDA call is checked) every CUDA call waits for its kernel and
    raises before returning (debugging mode).
  * Inside CUDA graph capture a call gets a fresh word (set by a captured
    fill) and is not tracked: replays are not checked. The kernels still
    validate, and a failing item's outputs are zeros / -1 / -inf as on the
    CPU.
"""

import os
import sys
import threading
import time

from . import _C

_TYPE_ERRORS = frozenset((_C.ERR_BAD_DTYPE,))
_RUNTIME_ERRORS = frozenset((_C.ERR_NO_CUDA, _C.ERR_CUDA))
_RING_WORDS = 4096
# A readback starts when this many calls are pending, or the oldest is this old.
_READBACK_CALLS = 64
_READBACK_AGE_S = 0.002
# A readback in flight is queried at most this often (a query costs ~1 us).
_QUERY_EVERY_S = 0.0001


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


_SYNC = None


def sync_checks_enabled():
    """LIBMAS_SYNC_CHECKS, read once (an environment read on every call costs
    more than the rest of the check)."""
    global _SYNC
    if _SYNC is None:
        _SYNC = os.environ.get("LIBMAS_SYNC_CHECKS", "") not in ("", "0")
    return _SYNC


class _DeviceState:
    """The error-word ring of one device, its host copy and the pending calls."""

    def __init__(self, torch, device):
        self.torch = torch
        self.device = device
        self.retired = []          # rings replaced after errors, kept alive
        self._new_ring()
        self.host = torch.empty((_RING_WORDS,), dtype=torch.int64, pin_memory=True)
        self.host_values = self.host.numpy()
        self.pending = []          # (fname, slot, raw stream, stream), in call order
        self.oldest = 0.0          # perf_counter of pending[0]
        self.readback = None       # pending entries the readback in flight covers
        self.event = torch.cuda.Event()
        self.next_query = 0.0      # perf_counter before which the event is not queried
        self.deferred = None       # an error found while taking a word

    def _new_ring(self):
        torch = self.torch
        if getattr(self, "words", None) is not None:
            self.retired.append(self.words)
        with torch.cuda.device(self.device):
            self.words = torch.full((_RING_WORDS,), -1, dtype=torch.int64, device=self.device)
            # Streams other than the one that filled the ring wait for the fill
            # on the device until it is known to be done (no host wait).
            self.filled = torch.cuda.Event()
            self.filled.record()
        self.fill_done = False
        self.base = self.words.data_ptr()
        self.free = list(range(_RING_WORDS - 1, -1, -1))

    def take_word(self, stream):
        """Slot of a free error word, usable on stream."""
        if not self.free:
            # More calls unread than words: read them all back now (a host
            # wait, only when the host is thousands of calls ahead); an error
            # found here is raised by the next check.
            self.deferred = self.collect(wait=True)
            if not self.free:   # every word retired by errors: a new ring
                self._new_ring()
        if not self.fill_done:
            self.fill_done = self.filled.query()
            if not self.fill_done:
                stream.wait_event(self.filled)
        return self.free.pop()

    def address(self, slot):
        """Device address of the word at slot."""
        return self.base + 8 * slot

    def handle(self, slot):
        """Zero-copy descriptor of the word at slot (libmas._C reads tuples)."""
        return (self.address(slot), _C.INT64, (1,), (1,), _C.DL_CUDA,
                self.device.index if self.device.index is not None else 0, self.words)

    def note(self, fname, slot, raw_stream, stream):
        if not self.pending:
            self.oldest = time.perf_counter()
        self.pending.append((fname, slot, raw_stream, stream))

    def start_readback(self, entry):
        """Copies the ring to the host behind every pending call on the
        stream of entry (stream order: the copy runs after their kernels)."""
        raw_stream, stream = entry[2], entry[3]
        covered = [p for p in self.pending if p[2] == raw_stream]
        self.pending = [p for p in self.pending if p[2] != raw_stream]
        self.oldest = time.perf_counter()
        with self.torch.cuda.stream(stream):
            self.host.copy_(self.words, non_blocking=True)
            self.event.record(stream)
        self.readback = covered
        self.next_query = self.oldest + _QUERY_EVERY_S

    def finish_readback(self):
        """Reads the covered words of a completed readback; frees clean ones.
        Returns (fname, status, item) of the first error, or None."""
        covered, self.readback = self.readback, None
        first = None
        values = self.host_values
        for fname, slot, _, _ in covered:
            word = int(values[slot])
            if word == -1:
                self.free.append(slot)
                continue
            # A used word is retired rather than reset, so no later call can
            # race with the reset; errors are rare.
            status, item = _C.decode_device_error(word)
            if first is None and status != _C.OK:
                first = (fname, status, item)
        return first

    def collect(self, wait):
        """wait=False: one step of the background check (finish a completed
        readback, maybe start the next). wait=True: read back every pending
        call. Returns the first error found, or None."""
        first, self.deferred = self.deferred, None
        if self.readback is not None:
            if wait:
                self.event.synchronize()
            else:
                now = time.perf_counter()
                if now < self.next_query:
                    return first
                if not self.event.query():
                    self.next_query = now + _QUERY_EVERY_S
                    return first
            error = self.finish_readback()
            first = first or error
        if wait:
            while self.pending:
                self.start_readback(self.pending[0])
                self.event.synchronize()
                error = self.finish_readback()
                first = first or error
        elif self.pending and (len(self.pending) >= _READBACK_CALLS or
                               time.perf_counter() - self.oldest >= _READBACK_AGE_S):
            self.start_readback(self.pending[0])
        return first

    def busy(self):
        return bool(self.pending) or self.readback is not None


_states = {}
_lock = threading.RLock()  # libmas may be called from several threads


def _state(torch, device):
    state = _states.get(device)
    if state is None:
        state = _states[device] = _DeviceState(torch, device)
    return state


def begin(torch, device, stream, poll=True):
    """(word handle, ticket) for a CUDA call about to be enqueued on stream;
    with poll, first raises for an earlier call's error whose readback has
    completed (what poll() does; one capture query serves both). Under
    graph capture the word is a fresh captured fill, ticket None, no poll."""
    if torch._C._cuda_isCurrentStreamCapturing():
        return torch.full((1,), -1, dtype=torch.int64, device=device), None
    state, slot = _take(torch, device, stream, poll)
    return state.handle(slot), (state, slot)


def begin_address(torch, device, stream):
    """begin() for libmas._torch: (the word's device address, ticket), or
    None under graph capture (those calls take the general path)."""
    if torch._C._cuda_isCurrentStreamCapturing():
        return None
    state, slot = _take(torch, device, stream, True)
    return state.address(slot), (state, slot)


def _take(torch, device, stream, poll):
    if poll and _states:
        _settle(wait=False, late=True)
    with _lock:
        state = _state(torch, device)
        return state, state.take_word(stream)


def give_back(ticket):
    """Returns the word of a call that failed before it was enqueued."""
    if ticket is not None:
        with _lock:
            ticket[0].free.append(ticket[1])


class _Pending:
    """Marks a result whose CUDA call is tracked (AlignResult.check)."""

    __slots__ = ()


PENDING = _Pending()


def track(fname, ticket, stream, raw_stream):
    """Registers a CUDA call just enqueued on stream (raw_stream its
    cudaStream_t). Returns PENDING (None under capture). In sync mode waits
    and raises."""
    if ticket is None:
        return None
    state, slot = ticket
    with _lock:
        state.note(fname, slot, raw_stream, stream)
    if sync_checks_enabled():
        _settle(wait=True, late=False)
    return PENDING


def _capturing():
    # Querying an event while a stream of this thread is being captured would
    # invalidate the capture, so polling waits until the capture is over.
    torch = sys.modules.get("torch")
    return torch is not None and torch._C._cuda_isCurrentStreamCapturing()


def _settle(wait, late):
    first = None
    with _lock:
        for state in list(_states.values()):
            error = state.collect(wait)
            if error is not None and first is None:
                first = (state, error)
    if first is not None:
        state, (fname, status, item) = first
        where = f"{fname} on {state.device}"
        if late:
            where += " (an earlier asynchronous call, reported now)"
        raise exception(where, status, item)


def poll():
    """Raises for an error recorded by an earlier CUDA call whose readback has
    completed; may start the next readback. Never blocks. Called at the start
    of every libmas CUDA call."""
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
