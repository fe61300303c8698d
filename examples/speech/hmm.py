"""Per-phone HMMs (3 states, left to right) with diagonal GMM emissions,
trained from a flat start with libmas: every likelihood by libmas's GMM
kernel (libmas.GMM.loglik), every alignment by libmas's topology ops
(libmas.viterbi for Viterbi re-alignment and evaluation,
libmas.state_posterior for Baum-Welch), the sufficient statistics as
matrix products (PyTorch, on the CPU or CUDA).

States: phone p owns states 3p, 3p+1, 3p+2 (pdf ids); state s owns the
Gaussians s*G .. s*G+G-1 (G per state, doubled by each split).

The topology has no per-phone transition probabilities: with the same
stay/advance score for every state, every path through a transcript makes
exactly n-1 advances and S-n stays, so those scores add a constant and
cannot change an alignment or a posterior; they are left at 0.
"""

import math
import sys
import time

import numpy as np
import torch

import libmas

K = 3              # states per phone
VAR_FLOOR = 0.01   # variance floor, as a share of the global variance per dimension
MIN_OCC = 1e-3     # a Gaussian with less occupation keeps its parameters


class Progress:
    """A one-line progress bar on stderr (only when it is a terminal, or forced)."""

    def __init__(self, label, total, enabled=None):
        self.label, self.total, self.done = label, max(1, total), 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.t0 = self._last = time.perf_counter()
        self._draw(True)

    def _draw(self, force=False):
        now = time.perf_counter()
        if not self.enabled or (not force and now - self._last < 0.2 and
                                self.done < self.total):
            return
        self._last = now
        frac = self.done / self.total
        bar = "#" * int(30 * frac)
        sys.stderr.write(f"\r{self.label:<22} [{bar:<30}] {self.done}/{self.total} "
                         f"{time.perf_counter() - self.t0:6.1f} s")
        sys.stderr.flush()

    def update(self, n=1):
        self.done += n
        self._draw()

    def close(self):
        if self.enabled:
            sys.stderr.write("\n")


# ---------------------------------------------------------------------------
# Data in batches
# ---------------------------------------------------------------------------


class Chunk:
    """Utterances of similar length, padded: x [b, S, J], mask [b, S],
    labels [b, Lmax*K] int32 and the lengths s_len_t, l_len_t [b] int64, all
    on the device (the topology ops run where the likelihoods are); s_len,
    l_len: the lengths in NumPy; ids: the utterances' indices."""

    def __init__(self, feats, phone_ids, ids, device):
        b = len(ids)
        s_max = max(len(feats[i]) for i in ids)
        l_max = max(len(phone_ids[i]) for i in ids)
        j = feats[ids[0]].shape[1]
        x = np.zeros((b, s_max, j), np.float32)
        labels = np.zeros((b, l_max * K), np.int32)
        self.s_len = np.array([len(feats[i]) for i in ids], np.int64)
        self.l_len = np.array([len(phone_ids[i]) for i in ids], np.int64)
        for r, i in enumerate(ids):
            x[r, :len(feats[i])] = feats[i]
            p = np.asarray(phone_ids[i], np.int32)
            labels[r, :len(p) * K] = (p[:, None] * K + np.arange(K, dtype=np.int32)).ravel()
        self.ids = list(ids)
        self.labels = torch.from_numpy(labels).to(device)
        self.x = torch.from_numpy(x).to(device)
        self.mask = (torch.arange(s_max)[None, :] < torch.from_numpy(self.s_len)[:, None]).to(device)
        self.s_len_t = torch.from_numpy(self.s_len).to(device)
        self.l_len_t = torch.from_numpy(self.l_len).to(device)


def make_chunks(feats, phone_ids, device, max_cells):
    """Chunks of utterances sorted by length, each at most max_cells padded
    frames (b * S_max) where more than one utterance fits."""
    order = sorted(range(len(feats)), key=lambda i: len(feats[i]))
    chunks, cur = [], []
    for i in order:
        if cur and (len(cur) + 1) * len(feats[i]) > max_cells:
            chunks.append(Chunk(feats, phone_ids, cur, device))
            cur = []
        cur.append(i)
    if cur:
        chunks.append(Chunk(feats, phone_ids, cur, device))
    return chunks


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------


class Model:
    """GMM-HMM parameters (float64 on the device): means, variances [M, J],
    log_weights [M], M = n_states * G."""

    def __init__(self, n_phones, dim, device):
        self.n_states = n_phones * K
        self.G = 1
        self.dim = dim
        self.device = device
        self.means = torch.zeros(self.n_states, dim, dtype=torch.float64, device=device)
        self.vars = torch.ones(self.n_states, dim, dtype=torch.float64, device=device)
        self.log_w = torch.zeros(self.n_states, dtype=torch.float64, device=device)
        self.var_floor = None
        self._gmm = self._gauss = None

    @property
    def M(self):
        return self.n_states * self.G

    def gmm(self):
        """libmas.GMM of the states (mixtures of G Gaussians)."""
        if self._gmm is None:
            self._gmm = libmas.GMM(self.means, self.vars, self.log_w, [self.G] * self.n_states)
        return self._gmm

    def gauss(self):
        """libmas.GMM with one Gaussian per 'state': each Gaussian's weighted score."""
        if self._gauss is None:
            self._gauss = libmas.GMM(self.means, self.vars, self.log_w, [1] * self.M)
        return self._gauss

    def update(self, occ, first, second):
        """M-step from the statistics of every Gaussian (float64 [M], [M, J])."""
        G = self.G
        occ_state = occ.view(self.n_states, G).sum(1)
        ok = occ > MIN_OCC
        safe = occ.clamp_min(MIN_OCC)[:, None]
        mean = first / safe
        var = (second / safe - mean * mean).clamp_min(0.0)
        var = torch.maximum(var, self.var_floor[None, :])
        self.means = torch.where(ok[:, None], mean, self.means)
        self.vars = torch.where(ok[:, None], var, self.vars)
        w = occ.view(self.n_states, G) / occ_state.clamp_min(MIN_OCC)[:, None]
        seen = (occ_state > MIN_OCC)[:, None].expand(-1, G).reshape(-1)
        log_w = torch.log(w.reshape(-1).clamp_min(1e-5))
        log_w = log_w - torch.logsumexp(log_w.view(self.n_states, G), 1).repeat_interleave(G)
        self.log_w = torch.where(seen, log_w, self.log_w)
        self._gmm = self._gauss = None

    def split(self):
        """Doubles the Gaussians of every state: each becomes two, its mean
        moved by +-0.2 standard deviations, half its weight each."""
        off = 0.2 * self.vars.sqrt()
        m = torch.stack([self.means - off, self.means + off], 1)
        v = torch.stack([self.vars, self.vars], 1)
        w = torch.stack([self.log_w, self.log_w], 1) - math.log(2.0)
        J = self.dim
        # Gaussian g of state s goes to 2g, 2g+1 of the same state
        self.means = m.reshape(-1, J)
        self.vars = v.reshape(-1, J)
        self.log_w = w.reshape(-1)
        self.G *= 2
        self._gmm = self._gauss = None


# ---------------------------------------------------------------------------
# E-step pieces
# ---------------------------------------------------------------------------

TOPOLOGY = libmas.Topology(K)


def uniform_states(chunk):
    """Flat start: each utterance's frames split evenly over its states;
    the pdf id of every frame [b, S] (-1 on padding)."""
    b, S = chunk.mask.shape
    t = torch.arange(S)[None, :].double()
    n = torch.from_numpy(chunk.l_len * K)[:, None].double()
    pos = torch.floor(t * n / torch.from_numpy(chunk.s_len)[:, None].double()).long()
    pos = pos.clamp_max(n.long() - 1)
    pdf = torch.gather(chunk.labels.long().cpu(), 1, pos.clamp(0, chunk.labels.shape[1] - 1))
    pdf[~chunk.mask.cpu()] = -1
    return pdf.to(chunk.x.device)


def uniform_boundaries(n_frames, n_phones):
    """First frame of phones 1..L-1 under the flat start."""
    i = np.arange(1, n_phones)
    return np.floor(i * K * n_frames / (n_phones * K)).astype(np.int64)


def align(chunk, ll):
    """libmas.viterbi over the chunk's transcripts, on ll's device: (pdf id
    per frame [b, S] (-1 on padding), token_spans [b, L, 2], score [b])."""
    r = libmas.viterbi(ll, chunk.l_len_t, chunk.s_len_t, TOPOLOGY, labels=chunk.labels,
                       gathered=True)
    sid = r.state_ids.long()
    pdf = torch.gather(chunk.labels.long(), 1, sid.clamp_min(0))
    pdf[sid < 0] = -1
    return pdf, r.token_spans, r.score


def occupancy_hard(pdf, n_states):
    """One-hot state occupation [b, S, n_states] from pdf ids (-1: none),
    on pdf's device."""
    b, S = pdf.shape
    g = torch.zeros(b, S, n_states, dtype=torch.float32, device=pdf.device)
    g.scatter_(2, pdf.clamp_min(0)[..., None], (pdf >= 0).float()[..., None])
    return g


def occupancy_soft(chunk, ll, n_states):
    """State occupation [b, S, n_states] from libmas.state_posterior (on
    ll's device): the chain states' posteriors summed per pdf id."""
    post = libmas.state_posterior(ll, chunk.l_len_t, chunk.s_len_t, TOPOLOGY,
                                  labels=chunk.labels, gathered=True)   # [b, n, S]
    b, n, S = post.shape
    g = torch.zeros(b, S, n_states, dtype=post.dtype, device=post.device)
    idx = chunk.labels.long()[:, None, :n].expand(b, S, n)
    g.scatter_add_(2, idx, post.transpose(1, 2))
    return g.float()


def responsibilities(model, chunk, ll, gamma):
    """Per-Gaussian occupation [b, S, M]: the state's occupation times the
    Gaussian's share of the state's likelihood (both from libmas.GMM)."""
    if model.G == 1:
        return gamma
    llg = model.gauss().loglik(chunk.x)                                     # [b, S, M]
    share = torch.exp(llg - ll.repeat_interleave(model.G, dim=2))
    return share * gamma.repeat_interleave(model.G, dim=2)


def statistics(r, x, mask):
    """Zeroth, first and second order statistics per Gaussian (float64):
    occ [M] = sum_t r, first [M, J] = r^T x, second [M, J] = r^T x^2 over
    the frames inside the lengths."""
    r2 = r[mask]
    x2 = x[mask]
    occ = r2.sum(0, dtype=torch.float64)
    first = (r2.T @ x2).double()
    second = (r2.T @ (x2 * x2)).double()
    return occ, first, second


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Timer:
    def __init__(self, device):
        self.device = device
        self.total = {}

    def add(self, key, t0):
        _sync(self.device)
        t = time.perf_counter()
        self.total[key] = self.total.get(key, 0.0) + (t - t0)
        return t


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------


def init_flat(model, chunks):
    """Flat start: global variance floor, then single Gaussians from the
    uniform segmentation."""
    J = model.dim
    dev = model.device
    n, s1, s2 = 0.0, torch.zeros(J, dtype=torch.float64, device=dev), \
        torch.zeros(J, dtype=torch.float64, device=dev)
    occ = torch.zeros(model.M, dtype=torch.float64, device=dev)
    first = torch.zeros(model.M, J, dtype=torch.float64, device=dev)
    second = torch.zeros_like(first)
    for c in chunks:
        xv = c.x[c.mask].double()
        n += xv.shape[0]
        s1 += xv.sum(0)
        s2 += (xv * xv).sum(0)
        g = occupancy_hard(uniform_states(c), model.n_states)
        o, f, s = statistics(g, c.x, c.mask)
        occ += o
        first += f
        second += s
    gmean = s1 / n
    gvar = s2 / n - gmean * gmean
    model.var_floor = VAR_FLOOR * gvar
    model.means[:] = gmean
    model.vars[:] = gvar
    model.update(occ, first, second)


def em_iteration(model, chunks, method, timer, progress=None):
    """One EM iteration over the training chunks; returns the summed best
    path score (viterbi) or the summed log-likelihood of the occupation
    (baum-welch: sum of gamma * log p(x | state), a monitor)."""
    dev = model.device
    occ = torch.zeros(model.M, dtype=torch.float64, device=dev)
    first = torch.zeros(model.M, model.dim, dtype=torch.float64, device=dev)
    second = torch.zeros_like(first)
    score = 0.0
    for c in chunks:
        t = time.perf_counter()
        gmm = model.gmm()
        ll = gmm.loglik(c.x)                                   # [b, S, states]
        t = timer.add("likelihood", t)
        if method == "viterbi":
            pdf, _, sc = align(c, ll)
            score += sc.double().sum()
            t = timer.add("alignment", t)
            gamma = occupancy_hard(pdf, model.n_states)
        else:
            gamma = occupancy_soft(c, ll, model.n_states)
            t = timer.add("alignment", t)
            score += (gamma * torch.where(c.mask[..., None], ll, 0.0)).double().sum()
        r = responsibilities(model, c, ll, gamma)
        t = timer.add("likelihood", t)
        o, f, s = statistics(r, c.x, c.mask)
        occ += o
        first += f
        second += s
        timer.add("statistics", t)
        if progress:
            progress.update()
    t = time.perf_counter()
    model.update(occ, first, second)
    timer.add("update", t)
    return float(score)


def test_boundaries(model, chunks):
    """Found phone boundaries (first frame of phones 1..L-1) of every
    utterance of the chunks, by libmas.viterbi on the model: {utterance id:
    frames}. (The posterior mean of each boundary by libmas.state_posterior
    was tried instead: 70% within 20 ms against 80%, bench/results/speech.md.)"""
    out = {}
    gmm = model.gmm()
    for c in chunks:
        _, spans, _ = align(c, gmm.loglik(c.x))
        spans = spans.cpu()
        for r, i in enumerate(c.ids):
            out[i] = spans[r, 1:int(c.l_len[r]), 0].numpy().astype(np.int64)
    return out


def schedule(iters_per_stage, max_gauss):
    """The (stage, G) list: iters_per_stage iterations with G Gaussians,
    then split, up to max_gauss."""
    out, g = [], 1
    while g <= max_gauss:
        out += [g] * iters_per_stage
        g *= 2
    return out
