"""``python -m libmas bench --topology``: the topology rows of issue 12 on the
CPU, each next to its anchor in the same run (one thread unless --threads):

  CTC forced alignment   B=32, S=1500, L=300, V=32, float32: libmas
      forced_align on the batch vs torchaudio.functional.forced_align per
      item (when torchaudio loads; else a NumPy Viterbi per item, vectorised
      over the states, as a stand-in anchor, named so in the table).
  CTC log Z fwd + bwd    same shapes: libmas ctc_log_z + backward vs
      torch.nn.functional.ctc_loss + backward (equality checked, printed).
  3-state HMM Viterbi    B=32, 150 phones (450 states), S=800, per-state
      float32 emissions: libmas viterbi vs libmas hard MAS (k=1) on
      [32, 150, 800].
  hard MAS (k=1)         B=32, T=256 and 512, S=4T: the existing op.

Ceilings: cells per ns, and GB/s of the emissions the sweep reads (gathered
reads count 4 bytes a cell) against the machine's copy bandwidth.
Times are medians of --repeat runs after a warm-up.
"""

import datetime
import platform
import sys

import numpy as np

from . import __version__
from .bench import _cpu_name, _median_time, cpu_copy_bandwidth


def _progress(text):
    print(text, file=sys.stderr, flush=True)


def _ctc_inputs(rng, B, S, V, L):
    x = rng.standard_normal((B, S, V)).astype(np.float32) * 3
    lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    tg = rng.integers(1, V, (B, L))
    for b in range(B):  # no equal neighbours: every item fits S >= L
        for i in range(1, L):
            while tg[b, i] == tg[b, i - 1]:
                tg[b, i] = rng.integers(1, V)
    return lp.astype(np.float32), tg, np.full(B, S), np.full(B, L)


def _numpy_ctc_viterbi(lp, tg, blank=0):
    """One item, float32, states vectorised: the stand-in anchor."""
    L = len(tg)
    lab = np.full(2 * L + 1, blank)
    lab[1::2] = tg
    n = len(lab)
    skip_ok = np.zeros(n, bool)
    skip_ok[3::2] = tg[1:] != tg[:-1]
    S = lp.shape[0]
    back = np.zeros((S, n), np.int8)
    a = np.full(n, -np.inf, np.float32)
    a[0] = lp[0, lab[0]]
    a[1] = lp[0, lab[1]]
    for t in range(1, S):
        stay = a
        move = np.concatenate(([-np.inf], a[:-1]))
        skip = np.where(skip_ok, np.concatenate(([-np.inf, -np.inf], a[:-2])), -np.inf)
        best = np.maximum(stay, move)
        choice = (move > stay).astype(np.int8)
        better = skip > best
        choice[better] = 2
        a = np.maximum(best, skip) + lp[t, lab]
        back[t] = choice
    s = n - 1 if a[n - 1] >= a[n - 2] else n - 2
    path = np.empty(S, np.int64)
    for t in range(S - 1, -1, -1):
        path[t] = s
        s -= int(back[t, s])
    return path


def run(args):
    import libmas

    threads = args.threads if args.threads else 1
    repeat = args.repeat or 5
    rng = np.random.default_rng(args.seed)
    copy_bw = cpu_copy_bandwidth()
    rows = []
    try:
        import torch
        torch.set_num_threads(threads)
    except ImportError:
        torch = None

    # -- CTC forced alignment ---------------------------------------------
    B, S, L, V = 32, 1500, 300, 32
    lp, tg, il, tl = _ctc_inputs(rng, B, S, V, L)
    t_ours = _median_time(lambda: libmas.forced_align(lp, tg, il, tl, threads=threads), repeat)
    anchor = None
    try:
        import torchaudio.functional as taf
        lpt, tgt = torch.from_numpy(lp), torch.from_numpy(tg).int()

        def per_item():
            for b in range(B):
                taf.forced_align(lpt[b:b + 1], tgt[b:b + 1], blank=0)

        anchor = ("torchaudio forced_align, per item", _median_time(per_item, repeat))
    except Exception as exc:  # noqa: BLE001 - any failure to load: the stand-in
        _progress(f"torchaudio unavailable ({type(exc).__name__}: {str(exc)[:80]}); "
                  "anchor: NumPy Viterbi per item")
        anchor = ("NumPy Viterbi per item (torchaudio unavailable)",
                  _median_time(lambda: [_numpy_ctc_viterbi(lp[b], tg[b]) for b in range(B)],
                               max(1, repeat // 3)))
    r = libmas.forced_align(lp, tg, il, tl)
    same = all((r.state_ids[b] == _numpy_ctc_viterbi(lp[b], tg[b])).all() for b in range(4))
    cells = B * S * (2 * L + 1)
    rows.append(("CTC forced alignment B=32 S=1500 L=300 V=32 f32", t_ours, anchor[0],
                 anchor[1], cells, f"paths = NumPy anchor's on items 0-3: {same}"))
    _progress(f"forced_align {t_ours * 1e3:.2f} ms, anchor {anchor[1] * 1e3:.1f} ms")

    # -- CTC log Z forward + backward -------------------------------------
    if torch is not None:
        x = torch.from_numpy(lp)
        tgt, ilt, tlt = (torch.from_numpy(a) for a in (tg, il, tl))

        def ours_fb():
            y = x.clone().requires_grad_(True)
            libmas.ctc_log_z(y, tgt, ilt, tlt, threads=threads).sum().backward()

        def torch_fb():
            y = x.clone().requires_grad_(True)
            torch.nn.functional.ctc_loss(y.transpose(0, 1), tgt, ilt, tlt,
                                         reduction="none").sum().backward()

        t_o, t_t = _median_time(ours_fb, repeat), _median_time(torch_fb, repeat)
        a = libmas.ctc_log_z(x, tgt, ilt, tlt)
        b = -torch.nn.functional.ctc_loss(x.transpose(0, 1).double(), tgt, ilt, tlt,
                                          reduction="none")
        rel = float(((a.double() - b).abs() / b.abs()).max())
        rows.append(("CTC log Z fwd+bwd, same shapes", t_o, "torch ctc_loss fwd+bwd", t_t,
                     2 * cells, f"max rel. diff of log Z vs float64 ctc_loss {rel:.1e}"))
        _progress(f"ctc_log_z fwd+bwd {t_o * 1e3:.2f} ms, ctc_loss {t_t * 1e3:.2f} ms")

    # -- 3-state HMM Viterbi vs k=1 hard MAS -------------------------------
    B, P, S, k = 32, 150, 800, 3
    em = rng.standard_normal((B, k * P, S)).astype(np.float32)
    v1 = rng.standard_normal((B, P, S)).astype(np.float32)
    topo = libmas.Topology(3, stay=[-0.2, -0.3, -0.2], advance=[-1.0, -1.2, -1.1])
    Ls, Ss = np.full(B, P), np.full(B, S)
    t_hmm = _median_time(lambda: libmas.viterbi(em, Ls, Ss, topo, threads=threads), repeat)
    t_k1 = _median_time(lambda: libmas.align(v1, Ls, Ss, threads=threads), repeat)
    band = B * k * P * (S - k * P + 1)
    rows.append(("3-state HMM Viterbi B=32 150 phones S=800", t_hmm,
                 "libmas hard MAS k=1 [32,150,800]", t_k1, band,
                 f"ratio {t_hmm / t_k1:.2f}x the k=1 time (target <= 2x)"))
    _progress(f"HMM {t_hmm * 1e3:.2f} ms, k=1 {t_k1 * 1e3:.2f} ms")

    # -- hard MAS, the existing op ----------------------------------------
    for T in (256, 512):
        B, S = 32, 4 * T
        v = rng.standard_normal((B, T, S)).astype(np.float32)
        x, y = np.full(B, T), np.full(B, S)
        t = _median_time(lambda: libmas.align(v, x, y, threads=threads), repeat)
        rows.append((f"hard MAS B=32 T={T} S={4 * T}", t, "-", None, B * T * (S - T + 1), ""))
        _progress(f"hard MAS T={T} {t * 1e3:.2f} ms")

    now = datetime.datetime.now().isoformat(timespec="seconds")
    print(f"libmas {__version__} topology bench on {_cpu_name()} ({platform.machine()}), "
          f"{threads} thread(s), {now}")
    print(f"command: python -m libmas bench --topology --threads {threads} --repeat {repeat}")
    print(f"copy bandwidth {copy_bw:.1f} GB/s; medians of {repeat}\n")
    print("| work | libmas (ms) | anchor | anchor (ms) | speed-up | cells/ns | GB/s read "
          "(% of copy) | note |")
    print("|---|---|---|---|---|---|---|---|")
    for name, t, aname, at, cells, note in rows:
        gbs = cells * 4 / t / 1e9
        sp = f"{at / t:.1f}x" if at else "-"
        ams = f"{at * 1e3:.2f}" if at else "-"
        print(f"| {name} | {t * 1e3:.2f} | {aname} | {ams} | {sp} | {cells / t / 1e9:.2f} | "
              f"{gbs:.1f} ({100 * gbs / copy_bw:.0f}%) | {note} |")
