"""Topologies (mas.h section 7): alignment of frames to a chain of states
built from a transcript -- HMM states per token, token skips, CTC blanks --
hard (Viterbi) and soft (forward-sum), batched, on the CPU.

  forced_align(log_probs, targets, input_lengths, target_lengths, blank=0)
      CTC forced alignment (torchaudio.functional.forced_align's task, for a
      whole batch): frame labels, token spans, scores.
  ctc_log_z(log_probs, targets, input_lengths, target_lengths, blank=0)
      log of the summed probability of every CTC path; differentiable;
      equals -torch.nn.functional.ctc_loss(..., reduction="none").
  Topology(states_per_token, ...)  the general chain; with it
  viterbi(...), log_z(...), state_posterior(...)  for any topology, with
      emissions per state [B, n, S] or gathered from log-probs [B, S, V].

The chain of an item with L tokens: each token is k left-to-right states;
with blanks (CTC) a blank state before, between and after the tokens
(n = L*k + L + 1 states), else n = L*k. A path visits one state per frame and
stays, advances by one, or skips (over a blank between two different
labels; or, with token skips, over one whole token at a log-penalty). First
states: 0, and the first label with blanks / the second token with token
skips; final states: n-1, and the last label / the last state of token L-2.
Ties (hard): stay over advance over skip; ending in n-1 over the other final
state. The arithmetic is float32 (float64 for float64 input).

Inputs are NumPy arrays or PyTorch tensors, never modified; results come
back in the input's array type. CUDA tensors run on the GPU (on the
caller's stream, no host synchronisation; k <= 16; Viterbi splits a chain
of more than 1024 states over several blocks, up to about 130,000 states
an item in float32 on an H100, and runs long-form within
max_workspace_bytes as the CPU does; the soft ops hold at most 8192 states
an item); their item errors (lengths, labels, a target
too long for its frames, NaN) are reported lazily as for every CUDA call
(``libmas.check_errors()``), with the rule but without the Python-side
numbers of the CPU's messages.
"""

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from . import _arrays, _C, _dispatch, errors
from .hard import _threads_arg

__all__ = ["Topology", "ForcedAlignResult", "ViterbiResult", "forced_align", "ctc_log_z",
           "viterbi", "log_z", "state_posterior"]


class Topology:
    """A chain of states per transcript.

    states_per_token: k >= 1 left-to-right states per token (k <= 7 with
        token skips).
    stay, advance: log-scores of a token state's self-loop and of entering
        it from the state before; a float (every state) or k floats (state j
        of every token). Default 0.
    blank: None (no blanks), or the blank's label id: a blank state before,
        between and after the tokens, skippable between different labels
        (CTC). blank_stay, blank_advance: a blank's log-scores (default 0).
    skip_penalty: None (no token skips) or the log-score (<= 0 usually) of
        skipping one token; not with blanks.
    """

    def __init__(self, states_per_token=1, *, stay=None, advance=None, blank=None,
                 blank_stay=0.0, blank_advance=0.0, skip_penalty=None):
        k = int(states_per_token)
        if k < 1 or k > 8:
            raise ValueError(f"libmas.Topology: states_per_token must be in [1, 8], got {k}")
        if blank is not None and skip_penalty is not None:
            raise ValueError("libmas.Topology: token skips (skip_penalty) cannot be combined "
                             "with blanks")
        if skip_penalty is not None and k > 7:
            raise ValueError("libmas.Topology: token skips need states_per_token <= 7")
        self.states_per_token = k
        self.stay = self._per_state(stay, "stay")
        self.advance = self._per_state(advance, "advance")
        self.blank = None if blank is None else int(blank)
        self.blank_stay = float(blank_stay)
        self.blank_advance = float(blank_advance)
        self.skip_penalty = None if skip_penalty is None else float(skip_penalty)
        for name in ("blank_stay", "blank_advance", "skip_penalty"):
            x = getattr(self, name)
            if x is not None and (math.isnan(x) or x == math.inf):
                raise ValueError(f"libmas.Topology: {name} must be finite or -inf, got {x}")

    def _per_state(self, x, name):
        if x is None:
            return None
        if np.ndim(x) == 0:
            x = [float(x)] * self.states_per_token
        x = tuple(float(v) for v in x)
        if len(x) != self.states_per_token:
            raise ValueError(f"libmas.Topology: {name} must hold states_per_token = "
                             f"{self.states_per_token} values, got {len(x)}")
        if any(math.isnan(v) or v == math.inf for v in x):
            raise ValueError(f"libmas.Topology: {name} must be finite or -inf")
        return x

    def states(self, tokens):
        """States of a transcript of `tokens` tokens."""
        k = self.states_per_token
        return tokens * k + (tokens + 1 if self.blank is not None else 0)

    def _tuple(self):
        return (self.states_per_token, int(self.blank is not None),
                0 if self.blank is None else self.blank, self.stay, self.advance,
                self.blank_stay, self.blank_advance,
                -math.inf if self.skip_penalty is None else self.skip_penalty)

    def __repr__(self):
        return (f"Topology(states_per_token={self.states_per_token}, stay={self.stay}, "
                f"advance={self.advance}, blank={self.blank}, "
                f"skip_penalty={self.skip_penalty})")


@dataclass
class ViterbiResult:
    """Outputs of ``viterbi``: state_ids [B, S] int32 (the state of each
    frame, -1 beyond the frame length), frame_labels [B, S] int32 (the label
    of each frame's state, the blank id on blank frames, -1 beyond; None
    without labels), token_spans [B, L, 2] int32 (first and last frame of
    each token; -1, -1 for a skipped token or beyond the token length),
    token_scores [B, L] (mean emission of the token's frames; -inf for a
    skipped token, 0 beyond the length), score [B] (the best path's score)."""

    state_ids: Any
    frame_labels: Optional[Any]
    token_spans: Any
    token_scores: Any
    score: Any


@dataclass
class ForcedAlignResult:
    """Outputs of ``forced_align``: frame_labels [B, S] int32 (the label of
    each frame, the blank id on blank frames, -1 beyond the input length),
    token_spans [B, L, 2] int32 (first and last frame of each target token;
    -1, -1 beyond the target length), score [B] (the best path's total
    log-probability), token_scores [B, L] (mean log-probability of each
    token's frames, a confidence; 0 beyond the target length), state_ids
    [B, S] int32 (the CTC state of each frame: 2i+1 for label i, 2i for the
    blank before it)."""

    frame_labels: Any
    token_spans: Any
    score: Any
    token_scores: Any
    state_ids: Any


# ---------------------------------------------------------------------------
# Plumbing
# ---------------------------------------------------------------------------


def _int32(frame, x, fname, what):
    if frame.name == "torch":
        torch = frame.torch
        t = frame.asarray(x)
        if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
            raise TypeError(f"{fname}: {what} must hold integers, got {t.dtype}")
        return t.to(torch.int32).contiguous()
    arr = frame.asarray(x)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{fname}: {what} must hold integers, got {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.int32)


def _host(x):
    """A host NumPy copy/view of a small integer array (labels, lengths)."""
    if _arrays.is_torch_tensor(x):
        return x.detach().cpu().numpy()
    return np.asarray(x)


class _Call:
    """One prepared call: arrays, sizes, checks done in Python with names."""

    def __init__(self, fname, emissions, token_lengths, frame_lengths, topology, labels,
                 gathered, threads, tokens=None, max_workspace_bytes=None):
        errors.poll()
        if not isinstance(topology, Topology):
            raise TypeError(f"{fname}: topology must be a libmas.Topology")
        self.fname = fname
        self.topo = topology
        self.threads = _threads_arg(threads, fname)
        self.budget = _dispatch.budget_arg(max_workspace_bytes, fname)
        frame, e = _arrays.frame_for(emissions, fname)
        if frame.name == "torch":
            e = e.detach()
        self.frame = frame
        self.code = _arrays.value_code(frame, e, fname)
        if e.ndim != 3:
            raise ValueError(f"{fname}: emissions must have 3 dimensions, got shape "
                             f"{list(e.shape)}")
        self.e = e
        self.gathered = bool(labels is not None) if gathered is None else bool(gathered)
        B = e.shape[0]
        self.B = B
        k = topology.states_per_token
        if self.gathered and labels is None:
            raise ValueError(f"{fname}: gathered emissions need labels")
        if topology.blank is not None and labels is None:
            raise ValueError(f"{fname}: a topology with blanks needs labels (the CTC rule "
                             "compares neighbouring labels)")
        self.frames = e.shape[1] if self.gathered else e.shape[2]
        self.L = frame.lengths(token_lengths, B, f"{fname}: token lengths")
        self.S = frame.lengths(frame_lengths, B, f"{fname}: frame lengths")
        if labels is not None:
            lab = _int32(frame, labels, fname, "labels")
            if lab.ndim == 3:
                lab = lab.reshape(lab.shape[0], -1)
            if lab.ndim != 2 or lab.shape[0] != B or lab.shape[1] % k:
                raise ValueError(f"{fname}: labels must have shape [B, L*k] or [B, L, k] "
                                 f"with B = {B}, k = {k}; got {list(lab.shape)}")
            self.tokens = lab.shape[1] // k
        else:
            lab = None
            if tokens is None:
                n = e.shape[1]
                tokens = (n - 1) // (k + 1) if topology.blank is not None else n // k
            self.tokens = int(tokens)
        self.labels = lab
        self.n_max = topology.states(self.tokens)
        if frame.is_cuda:
            # The kernel checks the items (no host synchronisation); its
            # errors are reported lazily, as for every CUDA call.
            self._check_meta()
        else:
            self._check_items()

    def _check_meta(self):
        topo, fname = self.topo, self.fname
        if self.gathered and topo.blank is not None and not 0 <= topo.blank < self.e.shape[2]:
            raise ValueError(f"{fname}: blank = {topo.blank} is out of [0, V = "
                             f"{self.e.shape[2]})")

    def _check_items(self):
        """Lengths, labels and the frames each transcript needs, item by item,
        with the numbers in the message."""
        fname, topo = self.fname, self.topo
        k = topo.states_per_token
        L, S = _host(self.L), _host(self.S)
        lab = None if self.labels is None else _host(self.labels)
        V = self.e.shape[2] if self.gathered else None
        if self.gathered and topo.blank is not None and not 0 <= topo.blank < V:
            raise ValueError(f"{fname}: blank = {topo.blank} is out of [0, V = {V})")
        for b in range(self.B):
            lo = 0 if topo.blank is not None else 1
            if not lo <= L[b] <= self.tokens:
                raise ValueError(f"{fname}: item {b}: target length {L[b]} is out of "
                                 f"[{lo}, {self.tokens}]")
            if not 1 <= S[b] <= self.frames:
                raise ValueError(f"{fname}: item {b}: frame length {S[b]} is out of "
                                 f"[1, {self.frames}]")
            if not self.gathered and topo.states(int(L[b])) > self.e.shape[1]:
                raise ValueError(f"{fname}: item {b}: {topo.states(int(L[b]))} states "
                                 f"exceed the emissions' {self.e.shape[1]}")
            if lab is None:
                need = k * int(L[b])
            else:
                row = lab[b, :int(L[b]) * k]
                if V is not None:
                    bad = np.nonzero((row < 0) | (row >= V))[0]
                    if bad.size:
                        i = int(bad[0])
                        raise ValueError(f"{fname}: item {b}: label {int(row[i])} at position "
                                         f"{i} is out of [0, V = {V})")
                if topo.blank is not None:
                    bad = np.nonzero(row == topo.blank)[0]
                    if bad.size:
                        raise ValueError(f"{fname}: item {b}: label at position "
                                         f"{int(bad[0])} equals the blank ({topo.blank})")
                    rows = row.reshape(-1, k)
                    repeats = int(np.count_nonzero(rows[1:, 0] == rows[:-1, -1]))
                else:
                    repeats = 0
                need = k * int(L[b]) + repeats
            if topo.skip_penalty is not None:
                need = k * max(1, int(L[b]) // 2)
            if need > S[b]:
                rule = (f"{int(L[b])} labels + {need - int(L[b]) * k} repeated neighbours (which "
                        "need a blank between them)" if topo.blank is not None and k == 1
                        else f"{int(L[b])} tokens x {k} states" +
                        (f" + {need - int(L[b]) * k} blanks between equal neighbours"
                         if topo.blank is not None else ""))
                raise ValueError(f"{fname}: item {b}: target too long: {rule} need {need} "
                                 f"frames, the item has {int(S[b])}")

    def run(self, soft, outs):
        frame = self.frame
        h = frame.handle
        topo = self.topo._tuple()
        names = ("state_ids", "frame_labels", "token_spans", "token_scores", "score", "log_z",
                 "posterior", "grad")
        o = [outs.get(n) for n in names]

        def size(cuda, which):
            return _C.topo_workspace_size(cuda, topo, self.gathered, self.B, self.e.shape[1],
                                          self.e.shape[2], self.code, self.tokens,
                                          0 if cuda else self.threads, which)

        def workspace_bytes(cuda):
            full = size(cuda, 1 if soft else 0)
            if soft or self.budget is None or self.budget >= full:
                return full
            # hard within a budget: long-form (checkpointed) Viterbi
            return _dispatch.budgeted(self.fname, self.budget, full, size(cuda, 2),
                                      "GPU" if cuda else "CPU")

        def invoke(cuda, work, how, word):
            return _C.topo(cuda, soft, topo, self.gathered, h(self.e), h(self.labels),
                           h(self.L), h(self.S), self.tokens, *[h(x) for x in o], work, how,
                           word)

        if self.B > 0:
            _dispatch.run(self.fname, frame, workspace_bytes, invoke, self.threads)

    def accum(self):
        return self.frame.score_dtype(self.e)

    def hard(self, want_labels):
        f = self.frame
        i32 = f.native_dtype("int32", None)
        outs = dict(state_ids=f.empty((self.B, self.frames), i32),
                    frame_labels=f.empty((self.B, self.frames), i32) if want_labels else None,
                    token_spans=f.empty((self.B, self.tokens, 2), i32),
                    token_scores=f.empty((self.B, self.tokens), self.accum()),
                    score=f.empty((self.B,), self.accum()))
        self.run(False, outs)
        return {k: f.restore(v) for k, v in outs.items()}

    def soft(self, want_log_z, want_post, want_grad):
        f = self.frame
        acc = self.accum()
        outs = dict(log_z=f.empty((self.B,), acc) if want_log_z else None,
                    posterior=f.empty((self.B, self.n_max, self.frames), acc)
                    if want_post or (want_grad and not self.gathered) else None,
                    grad=f.empty(tuple(self.e.shape), acc)
                    if want_grad and self.gathered else None)
        self.run(True, outs)
        return outs


def _wants_grad(x):
    torch = _arrays._torch()
    return (torch is not None and isinstance(x, torch.Tensor) and x.requires_grad
            and torch.is_grad_enabled())


_LOGZ_FN = None


def _logz_function(torch):
    global _LOGZ_FN
    if _LOGZ_FN is not None:
        return _LOGZ_FN

    class _LogZ(torch.autograd.Function):
        @staticmethod
        def forward(ctx, emissions, call):
            outs = call.soft(True, False, True)
            grad = outs["grad"] if call.gathered else outs["posterior"]
            if not call.gathered and grad.shape[1] != emissions.shape[1]:
                full = torch.zeros(tuple(emissions.shape), dtype=grad.dtype, device=grad.device)
                full[:, :grad.shape[1]] = grad
                grad = full
            ctx.save_for_backward(grad)
            ctx.in_dtype = emissions.dtype
            return outs["log_z"]

        @staticmethod
        def backward(ctx, g):
            (grad,) = ctx.saved_tensors
            return (g.to(grad.dtype)[:, None, None] * grad).to(ctx.in_dtype), None

    _LOGZ_FN = _LogZ
    return _LogZ


def _log_z(call, emissions):
    if _wants_grad(emissions):
        torch = _arrays._torch()
        return _logz_function(torch).apply(emissions, call)
    return call.frame.restore(call.soft(True, False, False)["log_z"])


# ---------------------------------------------------------------------------
# General topologies
# ---------------------------------------------------------------------------


def viterbi(emissions, token_lengths, frame_lengths, topology, *, labels=None, gathered=None,
            tokens=None, threads=None, max_workspace_bytes=None):
    """Best path (Viterbi) of every item over the topology's chain.

    emissions: per state [B, n, S] (e[b, s, t]; n >= the states of every
    item), or, with labels (gathered), frame log-probs [B, S, V] read at
    each state's label: label of state j of token i = labels[b, i*k + j]
    (labels [B, L*k] or [B, L, k] int), the blank id for blanks.
    token_lengths, frame_lengths: [B]. tokens: the token axis of the
    outputs when there are no labels (default: as many as n allows).
    max_workspace_bytes: None (default) for the unbounded workspace (one or
    two decision bits per cell); or a budget in bytes, met below the
    unbounded size by long-form Viterbi (checkpoints every K frames, one
    segment's forward redone at a time during the backtrack): the same
    result bit for bit in about 1.5 to 2 times the time. Too small raises
    ValueError stating the smallest that works.
    Returns a ViterbiResult. Raises ValueError naming the item for lengths
    out of range, labels out of [0, V) or equal to the blank, transcripts
    longer than the frames, NaN/+inf emissions on the path region, or no
    finite path.
    """
    fname = "libmas.viterbi"
    call = _Call(fname, emissions, token_lengths, frame_lengths, topology, labels, gathered,
                 threads, tokens, max_workspace_bytes)
    r = call.hard(labels is not None)
    return ViterbiResult(r["state_ids"], r["frame_labels"], r["token_spans"], r["token_scores"],
                         r["score"])


def log_z(emissions, token_lengths, frame_lengths, topology, *, labels=None, gathered=None,
          tokens=None, threads=None):
    """log of the summed exp(score) of every path over the topology's chain
    (arguments as ``viterbi``); [B]. Differentiable for PyTorch emissions
    that require grad: d log_z / d emissions is the state posterior (per
    state) or its sum per label (gathered)."""
    fname = "libmas.log_z"
    call = _Call(fname, emissions, token_lengths, frame_lengths, topology, labels, gathered,
                 threads, tokens)
    return _log_z(call, emissions)


def state_posterior(emissions, token_lengths, frame_lengths, topology, *, labels=None,
                    gathered=None, tokens=None, threads=None):
    """The probability that the path is in state s at frame t, [B, n, S]
    (n = the states of the longest transcript; 0 beyond the lengths); sums
    to 1 over s in every frame (arguments as ``viterbi``)."""
    fname = "libmas.state_posterior"
    call = _Call(fname, emissions, token_lengths, frame_lengths, topology, labels, gathered,
                 threads, tokens)
    return call.frame.restore(call.soft(False, True, False)["posterior"])


# ---------------------------------------------------------------------------
# CTC
# ---------------------------------------------------------------------------


def forced_align(log_probs, targets, input_lengths, target_lengths, *, blank=0, threads=None,
                 max_workspace_bytes=None):
    """CTC forced alignment of a batch: the most likely CTC path of each
    item through its target.

    log_probs: [B, S, V] frame log-probabilities (float32, float64, float16,
    bfloat16); targets: [B, L] int, labels in [0, V) other than the blank
    (entries beyond target_lengths are ignored); input_lengths,
    target_lengths: [B]. max_workspace_bytes: None (unbounded, two
    decision bits per cell) or a budget in bytes: below the unbounded size
    the alignment runs long-form (as ``viterbi``), the same result bit for
    bit; e.g. S=360,000 frames (2 hours at 50 frames/s) and L=60,000 labels
    in about 150 MB instead of 11 GB. Too small raises ValueError stating
    the smallest that works. Returns a ForcedAlignResult (frame_labels,
    token_spans, score, token_scores, state_ids). Ties: a frame keeps its
    state over advancing, and advancing over skipping a blank; the path ends
    on the final blank unless ending on the last label is strictly better.
    Raises ValueError naming the item when the target cannot fit the frames
    (L + the number of equal neighbours > input length), for labels out of
    range or equal to the blank, NaN/+inf log-probs at a target label or the
    blank, or no finite path.
    """
    fname = "libmas.forced_align"
    call = _Call(fname, log_probs, target_lengths, input_lengths, Topology(1, blank=blank),
                 targets, True, threads, None, max_workspace_bytes)
    r = call.hard(True)
    return ForcedAlignResult(r["frame_labels"], r["token_spans"], r["score"], r["token_scores"],
                             r["state_ids"])


def ctc_log_z(log_probs, targets, input_lengths, target_lengths, *, blank=0, threads=None):
    """log Z [B]: the log of the summed probability of every CTC path of each
    item (= -torch.nn.functional.ctc_loss(log_probs.transpose(0, 1), ...,
    reduction="none")). log_probs [B, S, V] (batch first); arguments and
    errors as ``forced_align`` (targets may also be of length 0). Differentiable for
    PyTorch log_probs that require grad: d log Z / d log_probs[b, t, v] is
    the posterior probability of label v at frame t."""
    fname = "libmas.ctc_log_z"
    call = _Call(fname, log_probs, target_lengths, input_lengths, Topology(1, blank=blank),
                 targets, True, threads)
    return _log_z(call, log_probs)
