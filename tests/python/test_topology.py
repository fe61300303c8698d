"""libmas.forced_align / ctc_log_z / Topology + viterbi / log_z /
state_posterior against an independent float64 reference written from the
rules in libmas.topology (plain loops over states and their predecessors),
the reference against brute force over every state sequence on tiny sizes,
ctc_log_z against torch.nn.functional.ctc_loss, gradcheck, bad inputs.

torchaudio: its PyPI releases stop at 2.11, which does not load with the
torch of this venv (a CUDA version mismatch), so forced_align is compared
with the reference only."""

import itertools
import math

import numpy as np
import pytest

import libmas

NEG = -math.inf


# ---------------------------------------------------------------------------
# Reference (float64, from the rules)
# ---------------------------------------------------------------------------


class Chain:
    """The chain of one item: states, edges, first and final states."""

    def __init__(self, k, L, labels=None, blank=None, stay=None, adv=None, blank_stay=0.0,
                 blank_adv=0.0, penalty=None):
        self.k, self.L, self.blank = k, L, blank
        self.labels = labels
        self.stay = stay or [0.0] * k
        self.adv = adv or [0.0] * k
        self.blank_stay, self.blank_adv, self.penalty = blank_stay, blank_adv, penalty
        self.n = L * k + (L + 1 if blank is not None else 0)

    def token(self, s):
        if self.blank is None:
            return s // self.k, s % self.k
        q = s % (self.k + 1)
        return (-1, -1) if q == 0 else (s // (self.k + 1), q - 1)

    def label(self, s):
        i, j = self.token(s)
        return self.blank if i < 0 else self.labels[i * self.k + j]

    def edge(self, a, b):
        ia, ja = self.token(a)
        ib, jb = self.token(b)
        if a == b:
            return self.blank_stay if ib < 0 else self.stay[jb]
        if b == a + 1:
            return self.blank_adv if ib < 0 else self.adv[jb]
        a_last = ia >= 0 and ja == self.k - 1
        b_first = ib >= 0 and jb == 0
        if (self.blank is not None and a_last and b_first and ib == ia + 1 and b == a + 2
                and self.labels[ia * self.k + self.k - 1] != self.labels[ib * self.k]):
            return self.adv[0]
        if self.penalty is not None and a_last and b_first and ib == ia + 2:
            return self.adv[0] + self.penalty
        return NEG

    def start(self, s):
        i, j = self.token(s)
        if s == 0:
            return 0.0
        if self.blank is not None and i == 0 and j == 0:
            return 0.0
        if self.penalty is not None and i == 1 and j == 0:
            return self.penalty
        return NEG

    def final(self, s):
        i, j = self.token(s)
        if s == self.n - 1:
            return 0.0
        if self.blank is not None and self.L >= 1 and i == self.L - 1 and j == self.k - 1:
            return 0.0
        if self.penalty is not None and self.L >= 2 and i == self.L - 2 and j == self.k - 1:
            return self.penalty
        return NEG


def lse(a, b):
    hi, lo = max(a, b), min(a, b)
    return hi if hi == NEG else hi + math.log1p(math.exp(lo - hi))


def ref_viterbi(ch, e):
    """e[t][s]; best score and path (ties: stay, advance, then further back;
    the final state n-1 unless another is strictly better)."""
    S, n = len(e), ch.n
    al = [[ch.start(s) + e[0][s] for s in range(n)]]
    back = [[-1] * n]
    for t in range(1, S):
        row, arg = [], []
        for s in range(n):
            best, a_best = None, None
            for a in range(s, -1, -1):
                x = al[t - 1][a] + ch.edge(a, s)
                if best is None or best < x:
                    best, a_best = x, a
            row.append(best + e[t][s])
            arg.append(a_best)
        al.append(row)
        back.append(arg)
    best, s = None, None
    for q in range(n - 1, -1, -1):
        x = al[S - 1][q] + ch.final(q)
        if best is None or best < x:
            best, s = x, q
    path = [0] * S
    for t in range(S - 1, -1, -1):
        path[t] = s
        s = back[t][s]
    return best, path


def ref_forward_backward(ch, e):
    S, n = len(e), ch.n
    al = np.full((S, n), NEG)
    be = np.full((S, n), NEG)
    for s in range(n):
        al[0, s] = ch.start(s) + e[0][s]
    for t in range(1, S):
        for s in range(n):
            acc = NEG
            for a in range(s + 1):
                acc = lse(acc, al[t - 1, a] + ch.edge(a, s))
            al[t, s] = acc + e[t][s]
    for s in range(n):
        be[S - 1, s] = ch.final(s)
    for t in range(S - 2, -1, -1):
        for s in range(n):
            acc = NEG
            for b in range(s, n):
                acc = lse(acc, ch.edge(s, b) + e[t + 1][b] + be[t + 1, b])
            be[t, s] = acc
    logz = NEG
    for s in range(n):
        logz = lse(logz, al[S - 1, s] + ch.final(s))
    if logz == NEG:
        return logz, np.zeros((S, n))
    return logz, np.exp(al + be - logz)


def brute(ch, e):
    S, n = len(e), ch.n
    best, logz = NEG, NEG
    for seq in itertools.product(range(n), repeat=S):
        x = ch.start(seq[0]) + e[0][seq[0]]
        for t in range(1, S):
            x += ch.edge(seq[t - 1], seq[t]) + e[t][seq[t]]
        x += ch.final(seq[-1])
        if x > NEG:
            best = max(best, x)
            logz = lse(logz, x)
    return best, logz


def ctc_inputs(rng, B, S, V, L, blank=0, repeats=0.3, dtype=np.float64):
    lp = rng.standard_normal((B, S, V)) * 2
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    tg = np.zeros((B, L), np.int64)
    tl = np.zeros(B, np.int64)
    il = np.zeros(B, np.int64)
    for b in range(B):
        Lb = int(rng.integers(0, L + 1))
        labels = []
        for i in range(Lb):
            if labels and rng.random() < repeats:
                labels.append(labels[-1])
            else:
                labels.append(int(rng.choice([v for v in range(V) if v != blank])))
        need = Lb + sum(labels[i] == labels[i - 1] for i in range(1, Lb))
        while need > S:
            labels.pop()
            Lb -= 1
            need = Lb + sum(labels[i] == labels[i - 1] for i in range(1, Lb))
        tg[b, :Lb] = labels
        tg[b, Lb:] = blank  # padding: ignored
        tl[b] = Lb
        il[b] = int(rng.integers(max(need, 1), S + 1))
    return lp.astype(dtype), tg, il, tl


def ctc_chain(tg, Lb, blank):
    return Chain(1, Lb, labels=list(tg[:Lb]), blank=blank)


# ---------------------------------------------------------------------------
# CTC
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_forced_align_matches_reference(rng, dtype):
    for _ in range(6):
        B, S, V, L = int(rng.integers(1, 5)), int(rng.integers(1, 40)), int(rng.integers(2, 7)), \
            int(rng.integers(1, 12))
        blank = int(rng.integers(0, V))
        lp, tg, il, tl = ctc_inputs(rng, B, S, V, L, blank, dtype=dtype)
        r = libmas.forced_align(lp, tg, il, tl, blank=blank, threads=int(rng.integers(1, 3)))
        assert isinstance(r.frame_labels, np.ndarray) and r.frame_labels.dtype == np.int32
        assert r.score.dtype == dtype
        for b in range(B):
            Sb, Lb = int(il[b]), int(tl[b])
            ch = ctc_chain(tg[b], Lb, blank)
            e = [[float(lp[b, t, ch.label(s)]) for s in range(ch.n)] for t in range(Sb)]
            best, path = ref_viterbi(ch, e)
            tol = 1e-10 if dtype == np.float64 else 1e-4
            assert r.score[b] == pytest.approx(best, rel=tol, abs=tol)
            if dtype == np.float64:  # continuous random inputs: no ties
                assert list(r.state_ids[b, :Sb]) == path
                assert list(r.frame_labels[b, :Sb]) == [ch.label(s) for s in path]
            assert (r.frame_labels[b, Sb:] == -1).all() and (r.state_ids[b, Sb:] == -1).all()
            ids = list(r.state_ids[b, :Sb])
            for i in range(L):
                frames = [t for t in range(Sb) if ch.token(ids[t])[0] == i] if i < Lb else []
                want = [frames[0], frames[-1]] if frames else [-1, -1]
                assert list(r.token_spans[b, i]) == want
                if i < Lb:
                    mean = np.mean([lp[b, t, tg[b, i]] for t in frames])
                    assert r.token_scores[b, i] == pytest.approx(mean, rel=1e-4, abs=1e-5)
                else:
                    assert r.token_scores[b, i] == 0


def test_reference_against_brute_force(rng):
    """The reference itself, every option, on tiny sizes."""
    for _ in range(40):
        k = int(rng.integers(1, 4))
        blank = 0 if rng.random() < 0.5 else None
        penalty = float(rng.uniform(-2, 0)) if blank is None and rng.random() < 0.5 else None
        L = int(rng.integers(0 if blank is not None else 1, 3))
        labels = [int(rng.integers(1, 3)) for _ in range(L * k)]
        ch = Chain(k, L, labels, blank, list(rng.uniform(-1, 0, k)), list(rng.uniform(-1, 0, k)),
                   float(rng.uniform(-1, 0)), float(rng.uniform(-1, 0)), penalty)
        if ch.n > 7:
            continue
        S = int(rng.integers(1, 6))
        e = rng.uniform(-3, 0, (S, ch.n)).tolist()
        bb, bl = brute(ch, e)
        best, _ = ref_viterbi(ch, e)
        logz, _ = ref_forward_backward(ch, e)
        assert best == pytest.approx(bb, abs=1e-12) or (best == NEG and bb == NEG)
        assert logz == pytest.approx(bl, abs=1e-12) or (logz == NEG and bl == NEG)


def test_ctc_log_z_equals_ctc_loss(rng, torch):
    for dtype in (torch.float32, torch.float64):
        B, S, V, L = 6, 60, 8, 20
        lp, tg, il, tl = ctc_inputs(rng, B, S, V, L, blank=0)
        x = torch.from_numpy(lp).to(dtype)
        tgt = torch.from_numpy(tg)
        got = libmas.ctc_log_z(x, tgt, torch.from_numpy(il), torch.from_numpy(tl))
        want = -torch.nn.functional.ctc_loss(x.transpose(0, 1).double(), tgt, torch.from_numpy(il),
                                             torch.from_numpy(tl), reduction="none")
        assert got.dtype == dtype
        torch.testing.assert_close(got.double(), want, rtol=1e-4 if dtype == torch.float32
                                   else 1e-10, atol=0)


def test_ctc_log_z_gradient(rng, torch):
    # the gradient through log_softmax equals ctc_loss's
    B, S, V, L = 3, 25, 5, 8
    lp, tg, il, tl = ctc_inputs(rng, B, S, V, L, blank=2)
    logits = torch.from_numpy(lp).clone().requires_grad_(True)
    x = logits.log_softmax(-1)
    libmas.ctc_log_z(x, tg, il, tl, blank=2).sum().backward()
    g1 = logits.grad.clone()
    logits.grad = None
    x = logits.log_softmax(-1)
    (-torch.nn.functional.ctc_loss(x.transpose(0, 1), torch.from_numpy(tg), torch.from_numpy(il),
                                   torch.from_numpy(tl), blank=2, reduction="none")).sum().backward()
    torch.testing.assert_close(g1, logits.grad, rtol=1e-7, atol=1e-9)
    # and against finite differences w.r.t. free log-probs
    x = torch.from_numpy(lp[:2, :10]).clone().requires_grad_(True)
    il2 = np.minimum(il[:2], 10)
    tl2 = np.array([min(int(tl[b]), 3) for b in range(2)])
    tg2 = tg[:2].copy()
    for b in range(2):  # keep the first labels free of repeats so they fit
        for i in range(1, 3):
            if tg2[b, i] == tg2[b, i - 1]:
                tg2[b, i] = [v for v in range(V) if v not in (2, tg2[b, i - 1])][0]
    il2 = np.maximum(il2, tl2)
    torch.autograd.gradcheck(lambda y: libmas.ctc_log_z(y, tg2, il2, tl2, blank=2), (x,))


def test_ctc_targets_of_length_zero(rng, torch):
    lp, _, _, _ = ctc_inputs(rng, 2, 7, 4, 1)
    got = libmas.ctc_log_z(lp, np.zeros((2, 1), np.int64), [7, 3], [0, 0])
    assert got[0] == pytest.approx(lp[0, :, 0].sum())
    assert got[1] == pytest.approx(lp[1, :3, 0].sum())
    r = libmas.forced_align(lp, np.zeros((2, 1), np.int64), [7, 3], [0, 0])
    assert (r.frame_labels[1] == [0, 0, 0, -1, -1, -1, -1]).all()
    assert (r.token_spans == -1).all()


def test_torch_and_numpy_agree(rng, torch):
    lp, tg, il, tl = ctc_inputs(rng, 4, 30, 6, 10, dtype=np.float32)
    a = libmas.forced_align(lp, tg, il, tl)
    b = libmas.forced_align(torch.from_numpy(lp), torch.from_numpy(tg), torch.from_numpy(il),
                            torch.from_numpy(tl))
    assert isinstance(b.frame_labels, torch.Tensor)
    np.testing.assert_array_equal(a.frame_labels, b.frame_labels.numpy())
    np.testing.assert_array_equal(a.token_spans, b.token_spans.numpy())
    np.testing.assert_array_equal(a.score, b.score.numpy())
    # float16 / bfloat16 computed in float32 from the converted values
    h = torch.from_numpy(lp).to(torch.bfloat16)
    c = libmas.forced_align(h, tg, il, tl)
    d = libmas.forced_align(h.float(), tg, il, tl)
    torch.testing.assert_close(c.score, d.score, rtol=0, atol=0)


# ---------------------------------------------------------------------------
# General topologies
# ---------------------------------------------------------------------------


def random_topology(rng, k, blank, skips):
    return libmas.Topology(
        k, stay=list(rng.uniform(-1.5, 0, k)), advance=list(rng.uniform(-1.5, 0, k)),
        blank=blank, blank_stay=float(rng.uniform(-1, 0)) if blank is not None else 0.0,
        blank_advance=float(rng.uniform(-1, 0)) if blank is not None else 0.0,
        skip_penalty=float(rng.uniform(-3, 0)) if skips else None)


def chain_of(topo, L, labels):
    return Chain(topo.states_per_token, L, labels, topo.blank, list(topo.stay),
                 list(topo.advance), topo.blank_stay, topo.blank_advance, topo.skip_penalty)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("kind", ["plain", "skips", "blanks"])
@pytest.mark.parametrize("gathered", [False, True])
def test_topologies_against_reference(rng, k, kind, gathered):
    blank = 0 if kind == "blanks" else None
    topo = random_topology(rng, k, blank, kind == "skips")
    B, Lmax, V = 3, 5, 5
    Smax = 4 * k * Lmax
    L = rng.integers(1, Lmax + 1, B)
    labels = rng.integers(1, V, (B, Lmax * k))
    need = [(k * max(1, int(L[b]) // 2) if kind == "skips" else
             k * int(L[b]) + (sum(labels[b, i * k] == labels[b, i * k - 1] for i in range(1, L[b]))
                              if blank is not None else 0)) for b in range(B)]
    S = np.array([int(rng.integers(need[b], Smax + 1)) for b in range(B)])
    n_max = topo.states(Lmax)
    if gathered:
        em = rng.uniform(-4, 0, (B, Smax, V))
    else:
        em = rng.uniform(-4, 0, (B, n_max, Smax))
    args = dict(labels=labels if (gathered or blank is not None) else None, gathered=gathered)
    r = libmas.viterbi(em, L, S, topo, **args)
    lz = libmas.log_z(em, L, S, topo, **args)
    post = libmas.state_posterior(em, L, S, topo, **args)
    for b in range(B):
        ch = chain_of(topo, int(L[b]), list(labels[b]))
        Sb = int(S[b])
        e = [[float(em[b, t, ch.label(s)] if gathered else em[b, s, t]) for s in range(ch.n)]
             for t in range(Sb)]
        best, path = ref_viterbi(ch, e)
        assert r.score[b] == pytest.approx(best, rel=1e-12, abs=1e-12)
        if not gathered:
            assert list(r.state_ids[b, :Sb]) == path
        logz, gamma = ref_forward_backward(ch, e)
        assert lz[b] == pytest.approx(logz, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(post[b, :ch.n, :Sb], gamma.T, atol=1e-10)
        assert (post[b, ch.n:] == 0).all() and (post[b, :, Sb:] == 0).all()
        np.testing.assert_allclose(post[b, :, :Sb].sum(0), 1, atol=1e-10)


def test_hard_mas_is_k1(rng):
    """k = 1, no blanks, no skips, zero scores, per-state emissions: the
    existing hard MAS, bit for bit."""
    for dtype in (np.float32, np.float64):
        B, T, S = 4, 30, 90
        v = rng.standard_normal((B, T, S)).astype(dtype)
        x = rng.integers(1, T + 1, B)
        y = np.array([int(rng.integers(x[b], S + 1)) for b in range(B)])
        a = libmas.align(v, x, y)
        r = libmas.viterbi(v, x, y, libmas.Topology(1))
        np.testing.assert_array_equal(a.indices, r.state_ids)
        assert a.score.tobytes() == r.score.tobytes()
        f = libmas.forward_sum(v, x, y)
        np.testing.assert_allclose(libmas.log_z(v, x, y, libmas.Topology(1)), f, rtol=1e-5)


def test_log_z_gradcheck_per_state(rng, torch):
    topo = random_topology(rng, 2, None, True)
    em = torch.from_numpy(rng.uniform(-3, 0, (2, 6, 9))).requires_grad_(True)
    L, S = [3, 2], [9, 6]
    torch.autograd.gradcheck(lambda e: libmas.log_z(e, L, S, topo), (em,))


def test_log_z_gradcheck_gathered_hmm(rng, torch):
    topo = random_topology(rng, 3, None, False)
    lp = torch.from_numpy(rng.uniform(-3, 0, (2, 12, 4))).requires_grad_(True)
    labels = rng.integers(0, 4, (2, 2, 3))
    torch.autograd.gradcheck(lambda e: libmas.log_z(e, [2, 1], [12, 7], topo, labels=labels),
                             (lp,))


# ---------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------


def test_errors(rng):
    lp, _, _, _ = ctc_inputs(rng, 2, 5, 4, 1)
    tg = np.array([[1, 2, 3, 1], [1, 1, 2, 2]])
    with pytest.raises(ValueError, match=r"forced_align: item 1: target too long: 4 labels \+ 2"):
        libmas.forced_align(lp, tg, [5, 5], [4, 4])
    libmas.forced_align(lp, tg, [5, 5], [4, 3])  # 3 labels + 1 repeat fit 5 frames
    with pytest.raises(ValueError, match=r"item 0: label at position 1 equals the blank"):
        libmas.forced_align(lp, tg, [5, 5], [4, 3], blank=2)
    with pytest.raises(ValueError, match=r"item 1: label 7 at position 0 is out of \[0, V = 4\)"):
        libmas.forced_align(lp, np.array([[1, 2], [7, 1]]), [5, 5], [2, 2])
    with pytest.raises(ValueError, match=r"item 0: frame length 6"):
        libmas.forced_align(lp, tg, [6, 5], [1, 1])
    with pytest.raises(ValueError, match=r"item 1: target length 5"):
        libmas.ctc_log_z(lp, tg, [5, 5], [1, 5])
    bad = lp.copy()
    bad[1, 2, 1] = np.nan
    with pytest.raises(ValueError, match=r"ctc_log_z: item 1: .*NaN"):
        libmas.ctc_log_z(bad, tg, [5, 5], [1, 1])
    libmas.ctc_log_z(bad, tg, [5, 2], [1, 1])  # beyond the input length: not read
    neg = lp.copy()
    neg[0, :, 1] = -np.inf
    with pytest.raises(ValueError, match=r"item 0: no finite path"):
        libmas.forced_align(neg, tg, [5, 5], [1, 1])
    with pytest.raises(ValueError, match=r"viterbi: item 0: target too long: 2 tokens x 3"):
        libmas.viterbi(rng.uniform(size=(1, 6, 5)), [2], [5], libmas.Topology(3))
    with pytest.raises(ValueError, match="cannot be combined"):
        libmas.Topology(1, blank=0, skip_penalty=-1.0)
    with pytest.raises(TypeError, match="labels must hold integers"):
        libmas.forced_align(lp, tg.astype(np.float32), [5, 5], [1, 1])
    inputs = lp.copy()
    libmas.forced_align(lp, tg, [5, 5], [2, 2])
    np.testing.assert_array_equal(inputs, lp)


def test_posterior_frames_sum_to_one_float32_long():
    """Each frame of a float32 posterior sums to 1 (it is divided by its sum):
    at S = 1500 the log Z that scales the cells drifts by rounding along the
    frames (the frame sums were up to ~1e-2 off before), and the gradient of
    ctc_log_z, the posterior summed per label, sums to 1 likewise."""
    seed = 20261125
    print("seed", seed)
    rng = np.random.default_rng(seed)
    B, S, L, V = 2, 1500, 40, 16
    x = rng.standard_normal((B, S, V))
    lp = (x - np.log(np.exp(x).sum(-1, keepdims=True))).astype(np.float32)
    labels = rng.integers(1, V, (B, L))
    Ls, Ss = np.full(B, L), np.full(B, S)
    topo = libmas.Topology(1, blank=0)
    post = libmas.state_posterior(lp, Ls, Ss, topo, labels=labels, gathered=True)
    assert post.dtype == np.float32
    np.testing.assert_allclose(post.astype(np.float64).sum(1), 1.0, atol=2e-5)
    ref = libmas.state_posterior(lp.astype(np.float64), Ls, Ss, topo, labels=labels,
                                 gathered=True)
    np.testing.assert_allclose(post, ref, atol=3e-3)
    torch = pytest.importorskip("torch")
    y = torch.from_numpy(lp).requires_grad_(True)
    libmas.ctc_log_z(y, torch.from_numpy(labels), torch.from_numpy(Ss),
                     torch.from_numpy(Ls)).sum().backward()
    np.testing.assert_allclose(y.grad.double().sum(-1).numpy(), 1.0, atol=2e-5)
