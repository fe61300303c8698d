"""The report's pictures (matplotlib, Agg): one held-out utterance's
spectrogram with true and found boundaries, the histogram of boundary
errors, boundary error against EM iteration."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def utterance(path, logmel, phones, true_ms, found, title, hop_ms=10.0):
    """logmel [T, mels] at a hop of hop_ms; true_ms: true starts of phones
    1..L-1 (ms); found: {method: found starts (ms)}."""
    t_end = logmel.shape[0] * hop_ms
    fig, ax = plt.subplots(figsize=(max(10, t_end / 250.0), 4.2))
    ax.imshow(logmel.T, origin="lower", aspect="auto", cmap="magma",
              extent=(0, t_end, 0, logmel.shape[1]))
    n = logmel.shape[1]
    for x in true_ms:
        ax.axvline(x, color="white", lw=1.2, ls="-")
    colors = {"flat start": "tab:gray", "viterbi": "cyan", "baum-welch": "lime",
              "viterbi + correction": "deepskyblue", "baum-welch + correction": "yellow"}
    for k, (method, xs) in enumerate(found.items()):
        c = colors.get(method, "tab:blue")
        ax.vlines(xs, n * (0.0 + 0.12 * k), n * (0.1 + 0.12 * k), color=c, lw=2.0, label=method)
    bounds = np.concatenate([[0.0], true_ms, [t_end]])
    for i, p in enumerate(phones):
        ax.text((bounds[i] + bounds[i + 1]) / 2, n * 0.93, p, color="white", ha="center",
                va="center", fontsize=8)
    ax.set_xlabel("time (ms); white lines: espeak-ng's phone starts")
    ax.set_ylabel("mel band")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def histogram(path, errors):
    """errors: {method: signed errors (ms)}."""
    fig, ax = plt.subplots(figsize=(7, 4))
    bins = np.arange(-100, 102.5, 5.0)
    for method, e in errors.items():
        ax.hist(np.clip(e, -100, 100), bins=bins, histtype="step", lw=1.5, label=method)
    for x in (-20, 20):
        ax.axvline(x, color="k", lw=0.8, ls=":")
    ax.set_xlabel("found - true boundary (ms; clipped at +-100)")
    ax.set_ylabel("boundaries")
    ax.set_title("Phone boundary errors, held-out utterances")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def curve(path, history, flat_within20, corrected=None):
    """history: {method: [(iteration, G, mae, within20)]}; corrected:
    {method: (mae, within20)} after the boundary correction of the final
    model, drawn as a star at the last iteration."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for method, rows in history.items():
        it = [r[0] for r in rows]
        line, = a1.plot(it, [r[2] for r in rows], marker="o", label=method)
        a2.plot(it, [100 * r[3] for r in rows], marker="o", label=method)
        if corrected and method in corrected:
            mae, w20 = corrected[method]
            kw = dict(marker="*", ms=14, color=line.get_color(), ls="none",
                      label=f"{method} + correction")
            a1.plot([it[-1]], [mae], **kw)
            a2.plot([it[-1]], [100 * w20], **kw)
    a2.axhline(100 * flat_within20, color="tab:gray", ls="--", label="flat start")
    a2.axhline(90, color="k", lw=0.8, ls=":", label="target 90%")
    a1.set_xlabel("EM iteration")
    a1.set_ylabel("mean absolute boundary error (ms)")
    a1.set_yscale("log")
    a2.set_xlabel("EM iteration")
    a2.set_ylabel("boundaries within 20 ms (%)")
    for a in (a1, a2):
        a.grid(alpha=0.3)
        a.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
