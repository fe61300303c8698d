"""End to end: espeak-ng speech -> MFCCs -> GMM-HMM phone models trained
from a flat start with libmas -> phone boundaries on held-out utterances,
scored against espeak-ng's own timings, as found and after a correction by
the offsets per phone pair that the model makes on the training utterances.

    python examples/speech/run.py [--train 200 --test 50 --device cpu]

Writes the report (report.md and PNGs) to --out (default build/speech/report)
and prints the boundary table.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import correct  # noqa: E402
import data  # noqa: E402
import features  # noqa: E402

METHODS = ("viterbi", "baum-welch")
CORRECTED = " + correction"
CORRECTION_NOTE = ("\"+ correction\": the held-out boundaries minus an offset per phone pair "
                   "(left, right) learnt from the training utterances' alignments against "
                   "their true starts (examples/speech/correct.py); training (s) includes "
                   "that pass.\n\n")


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", type=int, default=200, help="training utterances (200)")
    p.add_argument("--test", type=int, default=50, help="held-out utterances (50)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--method", choices=METHODS + ("both",), default="both")
    p.add_argument("--device", default="cpu", help="cpu or cuda (likelihoods and statistics)")
    p.add_argument("--iters", type=int, default=2,
                   help="EM iterations per mixture size (2)")
    p.add_argument("--gauss", type=int, default=8, help="Gaussians per state at the end (8)")
    p.add_argument("--chunk", type=int, default=12000,
                   help="padded frames per batch of utterances (12000)")
    p.add_argument("--context", choices=("mono", "rclass"), default="mono",
                   help="phone models: monophones (default), or phones before a voiceless "
                        "stop apart (rclass)")
    p.add_argument("--no-correct", dest="correct", action="store_false",
                   help="no boundary correction (offsets per phone pair, learnt on the "
                        "training utterances' alignments)")
    p.add_argument("--hop", type=float, default=10.0, help="frame hop in ms (10)")
    p.add_argument("--threads", type=int, default=None, help="PyTorch CPU threads")
    p.add_argument("--data", default="build/speech/data", help="utterances (built if missing)")
    p.add_argument("--out", default="build/speech/report", help="report directory")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--progress", action="store_true", help="progress bars even when not a tty")
    args = p.parse_args(argv)
    if not 1.0 <= args.hop <= 25.0:
        p.error(f"--hop must be in [1, 25] ms, got {args.hop}")
    return args


# espeak-ng counts most of the closure of a voiceless stop to the phone
# before it: where that phone ends depends on what follows. A phone before a
# voiceless stop gets a model of its own ("right context class"; measured:
# boundaries into k/p/t within 20 ms from 11-25% to 44-68%; doing the same
# before pauses made the boundaries into pauses worse). With the boundary
# correction (correct.py), which learns such offsets per phone pair, plain
# monophones are better (94.6% against 91.3% within 20 ms, quick config) and
# cheaper, so they are the default.
STOPS = ("p", "t", "k")


def model_names(phones, context):
    """The HMM of each phone: the phone itself (context "mono"), or with
    "rclass" the phone + "+stop" before a voiceless stop."""
    if context == "mono":
        return list(phones)
    out = []
    for k, p in enumerate(phones):
        q = phones[k + 1] if k + 1 < len(phones) else None
        cls = "+stop" if q in STOPS else ""
        out.append(p + cls if p != data.SIL else p)
    return out


def ensure_data(root, part, n, seed, progress):
    """The manifest of root/part, built when missing or made with other
    arguments."""
    d = os.path.join(root, part)
    want = dict(seed=seed, n=n, part=part)
    try:
        with open(os.path.join(d, "manifest.json")) as f:
            m = json.load(f)
        if all(m.get(k) == v for k, v in want.items()):
            return d, m["utterances"]
    except (OSError, ValueError):
        pass
    bar = progress(f"espeak-ng ({part})", n)
    utts = data.build(d, n, seed=seed, part=part, progress=lambda i, t: bar.update())
    bar.close()
    return d, utts


def cache_path(d, hop_s):
    return os.path.join(d, f"cepstra-{hop_s * 1000.0:g}ms.npz")


def load_features(d, utts, progress, label, hop_s):
    """MFCCs + deltas of every utterance of d. The cepstra are kept in
    d/cepstra-<hop>ms.npz (float32, compressed: about 18 MB an hour of
    speech): a second run, or a machine that has only the manifest and that
    file (the GPU machine, which has no espeak-ng), skips the audio."""
    path = cache_path(d, hop_s)
    key = np.asarray([u["num_samples"] for u in utts], np.int64)
    try:
        with np.load(path) as z:
            if np.array_equal(z["num_samples"], key):
                lengths = z["lengths"]
                cuts = np.concatenate([[0], np.cumsum(lengths)])
                cep = z["cepstra"]
                return [features.from_cepstra(cep[cuts[i]:cuts[i + 1]], hop_s)
                        for i in range(len(utts))]
    except (OSError, KeyError, ValueError):
        pass
    bar = progress(f"features ({label})", len(utts))
    ceps = []
    for u in utts:
        x, sr = data.read_wav(os.path.join(d, u["wav"]))
        ceps.append(features.cepstra(x, sr, hop_s))
        bar.update()
    bar.close()
    np.savez_compressed(path, cepstra=np.concatenate(ceps), lengths=[len(c) for c in ceps],
             num_samples=key)
    return [features.from_cepstra(c, hop_s) for c in ceps]


def boundary_truth(u):
    """True starts of phones 1..L-1 in ms."""
    return np.asarray(u["starts"][1:], np.float64) / u["sample_rate"] * 1000.0


def score(errors):
    a = np.abs(errors)
    return dict(mae=float(a.mean()), w10=float((a <= 10).mean()), w20=float((a <= 20).mean()),
                w40=float((a <= 40).mean()), n=int(a.size))


def errors_of(found, utts, keep):
    """Signed errors (ms) of found {utterance: boundaries in ms} over utterances keep."""
    return np.concatenate([found[i] - boundary_truth(utts[i]) for i in keep])


def to_ms(frames, hop_s):
    """{utterance: first frames} -> {utterance: ms}."""
    return {i: f * hop_s * 1000.0 for i, f in frames.items()}


def corrected(model, train_chunks, train_u, test_found, test_u, args):
    """Held-out boundaries (ms) corrected by the offsets per kind of boundary
    that the model makes on the training utterances (correct.py)."""
    import hmm

    found = to_ms(hmm.test_boundaries(model, train_chunks), args.hop / 1000.0)
    keep = sorted(found)
    fix = correct.BoundaryCorrection().fit([found[i] - boundary_truth(train_u[i]) for i in keep],
                                           [train_u[i]["phones"] for i in keep])
    return {i: fix.apply(f, test_u[i]["phones"]) for i, f in test_found.items()}


def main(argv=None):
    args = parse(argv)
    import torch

    import hmm

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("run.py: --device cuda, but PyTorch sees no CUDA device")

    def progress(label, total):
        return hmm.Progress(label, total, True if args.progress else None)

    t_start = time.perf_counter()
    try:
        train_dir, train_u = ensure_data(args.data, "train", args.train, args.seed, progress)
        test_dir, test_u = ensure_data(args.data, "test", args.test, args.seed + 1, progress)
    except data.EspeakMissing as e:
        sys.exit(f"run.py: {e}")
    t_data = time.perf_counter() - t_start
    hop_s = args.hop / 1000.0
    train_f = load_features(train_dir, train_u, progress, "train", hop_s)
    test_f = load_features(test_dir, test_u, progress, "test", hop_s)
    t_feat = time.perf_counter() - t_start - t_data

    train_names = [model_names(u["phones"], args.context) for u in train_u]
    trained = {p for names in train_names for p in names}
    test_names = [[p if p in trained else p.split("+")[0] for p in
                   model_names(u["phones"], args.context)] for u in test_u]
    phones = sorted(trained | {p for names in test_names for p in names})
    index = {p: i for i, p in enumerate(phones)}
    train_ids = [[index[p] for p in names] for names in train_names]
    test_ids = [[index[p] for p in names] for names in test_names]
    # a transcript needs 3 frames a phone (no state is skipped)
    fits = lambda f, ids: len(f) >= hmm.K * len(ids)  # noqa: E731
    tr_keep = [i for i in range(len(train_u)) if fits(train_f[i], train_ids[i])]
    te_keep = [i for i in range(len(test_u)) if fits(test_f[i], test_ids[i])]
    dropped = (len(train_u) - len(tr_keep), len(test_u) - len(te_keep))
    sub = lambda xs, keep: [xs[i] for i in keep]  # noqa: E731
    train_chunks = hmm.make_chunks(sub(train_f, tr_keep), sub(train_ids, tr_keep), device,
                                   args.chunk)
    test_chunks = hmm.make_chunks(sub(test_f, te_keep), sub(test_ids, te_keep), device,
                                  args.chunk)
    test_kept_u = sub(test_u, te_keep)
    keep_all = range(len(te_keep))
    hours = sum(len(f) for f in train_f) * hop_s / 3600.0

    flat = to_ms({i: hmm.uniform_boundaries(len(test_f[te_keep[i]]), len(test_ids[te_keep[i]]))
                  for i in keep_all}, hop_s)
    results = {"flat start": dict(score(errors_of(flat, test_kept_u, keep_all)),
                                  per_iter=None, total=None)}
    found_all = {"flat start": flat}
    history = {}
    sched = hmm.schedule(args.iters, args.gauss)
    methods = METHODS if args.method == "both" else (args.method,)
    for method in methods:
        model = hmm.Model(len(phones), train_f[0].shape[1], device)
        timer = hmm.Timer(device)
        t0 = time.perf_counter()
        hmm.init_flat(model, train_chunks)
        t_init = time.perf_counter() - t0
        found = to_ms(hmm.test_boundaries(model, test_chunks), hop_s)
        s = score(errors_of(found, test_kept_u, keep_all))
        history[method] = [(0, 1, s["mae"], s["w20"])]
        bar = progress(f"EM ({method})", len(sched) * len(train_chunks))
        iter_times = []
        for it, g in enumerate(sched, 1):
            t0 = time.perf_counter()
            if g > model.G:
                model.split()
            hmm.em_iteration(model, train_chunks, method, timer, bar)
            iter_times.append(time.perf_counter() - t0)
            found = to_ms(hmm.test_boundaries(model, test_chunks), hop_s)
            s = score(errors_of(found, test_kept_u, keep_all))
            history[method].append((it, g, s["mae"], s["w20"]))
        bar.close()
        results[method] = dict(s, per_iter=float(np.mean(iter_times)),
                               total=float(t_init + sum(iter_times)),
                               parts={k: v / len(sched) for k, v in timer.total.items()})
        found_all[method] = found
        if args.correct:
            t0 = time.perf_counter()
            fixed = corrected(model, train_chunks, sub(train_u, tr_keep), found, test_kept_u,
                              args)
            results[method + CORRECTED] = dict(score(errors_of(fixed, test_kept_u, keep_all)),
                                               per_iter=None,
                                               total=results[method]["total"] +
                                               time.perf_counter() - t0)
            found_all[method + CORRECTED] = fixed

    t_total = time.perf_counter() - t_start
    info = dict(train=len(tr_keep), test=len(te_keep), dropped=dropped, phones=len(phones),
                hours=hours, device=str(device), data_s=t_data, features_s=t_feat,
                total_s=t_total, schedule=sched, boundaries=results["flat start"]["n"],
                args=" ".join(sys.argv[1:]) if argv is None else " ".join(argv))
    table = format_table(results)
    print(table)
    print(f"\n{info['train']} training utterances ({hours:.2f} h), {info['test']} held out, "
          f"{info['boundaries']} boundaries, {len(phones)} phones, device {device}; "
          f"data {t_data:.1f} s, features {t_feat:.1f} s, all {t_total:.1f} s")
    if dropped != (0, 0):
        print(f"(dropped {dropped[0]} training and {dropped[1]} test utterances shorter than "
              "3 frames a phone)")
    os.makedirs(args.out, exist_ok=True)
    pairs = [(u["phones"][k - 1], u["phones"][k]) for u in test_kept_u
             for k in range(1, len(u["phones"]))]
    np.savez(os.path.join(args.out, "errors.npz"), left=[a for a, _ in pairs],
             right=[b for _, b in pairs],
             **{npz_key(m): errors_of(f, test_kept_u, keep_all) for m, f in found_all.items()})
    write_report(args, info, results, history, table, test_dir, test_kept_u, found_all,
                 found_all and errors_of, keep_all)
    print(f"report: {os.path.join(args.out, 'report.md')}")
    return results


def npz_key(name):
    """"viterbi + correction" -> "viterbi_correction"."""
    return name.replace(" + ", "_").replace(" ", "_").replace("-", "_")


def format_table(results):
    lines = ["| alignment | mean abs. error (ms) | <= 10 ms | <= 20 ms | <= 40 ms | "
             "s / EM iteration | training (s) |",
             "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        it = "-" if r["per_iter"] is None else f"{r['per_iter']:.2f}"
        tot = "-" if r["total"] is None else f"{r['total']:.1f}"
        label = name if name == "flat start" else f"{name} training" if name in METHODS \
            else name.replace(CORRECTED, " training" + CORRECTED)
        lines.append(f"| {label} | {r['mae']:.1f} | {100 * r['w10']:.1f}% | "
                     f"{100 * r['w20']:.1f}% | {100 * r['w40']:.1f}% | {it} | {tot} |")
    return "\n".join(lines)


def write_report(args, info, results, history, table, test_dir, test_u, found_all, errs, keep):
    out = args.out
    pics = []
    if not args.no_plots:
        import plots

        errors = {m: errs(f, test_u, keep) for m, f in found_all.items()}
        plots.histogram(os.path.join(out, "errors.png"), errors)
        plots.curve(os.path.join(out, "iterations.png"), history,
                    results["flat start"]["w20"],
                    {m: (results[m + CORRECTED]["mae"], results[m + CORRECTED]["w20"])
                     for m in history if m + CORRECTED in results})
        i = 0
        u = test_u[i]
        x, sr = data.read_wav(os.path.join(test_dir, u["wav"]))
        logmel, _ = features.log_mel(x, sr, args.hop / 1000.0)
        found_ms = {m: f[i] for m, f in found_all.items()}
        plots.utterance(os.path.join(out, "utterance.png"), logmel, u["phones"],
                        boundary_truth(u), found_ms,
                        f"\"{u['text']}\" ({u['voice']}, {u['rate']} wpm)", args.hop)
        pics = ["utterance.png", "errors.png", "iterations.png"]
    parts = "\n".join(
        f"- {m}: " + ", ".join(f"{k} {v:.3f} s" for k, v in r["parts"].items())
        for m, r in results.items() if r.get("parts"))
    hist = "\n".join(f"- {m}: " + ", ".join(f"it {it} (G={g}) {w * 100:.1f}%"
                                             for it, g, _, w in rows)
                     for m, rows in history.items())
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(f"# Phone boundaries on held-out espeak-ng speech\n\n"
                f"Command: `python examples/speech/run.py {info['args']}`, "
                f"{time.strftime('%Y-%m-%d')}, device {info['device']}.\n\n"
                f"{info['train']} training utterances ({info['hours']:.2f} h), {info['test']} "
                f"held out ({info['boundaries']} boundaries), {info['phones']} phones, 3-state "
                f"HMMs, schedule (Gaussians per state by iteration) {info['schedule']}.\n\n"
                f"{table}\n\n{CORRECTION_NOTE if args.correct else ''}"
                f"Time per EM iteration by part (mean):\n{parts}\n\n"
                f"Within 20 ms by iteration:\n{hist}\n\n"
                f"Data {info['data_s']:.1f} s, features {info['features_s']:.1f} s, "
                f"everything {info['total_s']:.1f} s.\n\n")
        for p in pics:
            f.write(f"![{p}]({p})\n\n")


if __name__ == "__main__":
    main()
