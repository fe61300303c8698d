"""Command line: ``python -m libmas --version`` and ``python -m libmas bench``."""

import argparse
import sys

from . import _C, __version__


def _version_text():
    import importlib.util

    cuda = "with CUDA backend" if _C.has_cuda() else "without CUDA backend"
    # whether libmas._torch was built (not imported here: that imports PyTorch)
    glue = "with" if importlib.util.find_spec("libmas._torch") else "without"
    return f"libmas {__version__} (C library {_C.version()}, {cuda}, {glue} PyTorch glue)"


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m libmas",
        description="libmas: monotonic alignment search (Glow-TTS MAS) on CPU and CUDA.")
    parser.add_argument("--version", action="version", version=_version_text())
    sub = parser.add_subparsers(dest="command")
    bench = sub.add_parser(
        "bench", help="time hard MAS against a baseline and print a markdown table",
        description="Time hard MAS (B items, S = ratio*T frames, standard-normal values) "
                    "against Glow-TTS's scalar loop (CPU) or Super-MAS (CUDA, when installed) "
                    "in the same run.")
    bench.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    bench.add_argument("--batch", type=int, default=32, help="items per batch (default 32)")
    bench.add_argument("--T", type=int, nargs="+", default=None,
                       help="token counts (default 128 256 512 1024; CUDA adds 2048)")
    bench.add_argument("--ratio", type=int, default=4, help="frames per token, S = ratio*T")
    bench.add_argument("--dtype", default="float32",
                       choices=("float32", "float64", "float16", "bfloat16"))
    bench.add_argument("--threads", type=int, default=None,
                       help="CPU threads for libmas (default: every core)")
    bench.add_argument("--repeat", type=int, default=None,
                       help="timed runs per case, median taken (default 5 on CPU, 100 on CUDA)")
    bench.add_argument("--output", choices=("durations", "path"), default=None,
                       help="what libmas writes (default: durations on CPU, path on CUDA)")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--plot", metavar="FILE.png", help="also write a plot (matplotlib)")
    bench.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    bench.add_argument("--calls", action="store_true",
                       help="cost of a call per op at training shapes: wall, kernels, overhead "
                            "(CUDA), or against the C call alone (CPU); see libmas.bench_calls")
    bench.add_argument("--calls-n", type=int, default=200,
                       help="--calls on CUDA: back-to-back calls per loop (default 200)")
    bench.add_argument("--budget", type=float, default=0.2,
                       help="--calls on the CPU: seconds per timed loop (default 0.2)")
    bench.add_argument("--likelihood", action="store_true",
                       help="time the likelihood kernels (GMM, Glow-TTS logp) against "
                            "PyTorch / NumPy instead of hard MAS")
    bench.add_argument("--topology", action="store_true",
                       help="the topology rows (CTC forced alignment, CTC log Z, 3-state HMM "
                            "Viterbi, hard MAS) against their anchors; CPU, one thread unless "
                            "--threads")
    bench.add_argument("--fused", action="store_true",
                       help="fused Glow-TTS alignment (align_gaussian) against gaussian_loglik "
                            "+ align: time and peak memory (CPU: one thread unless --threads)")
    return parser


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command != "bench":
        parser.print_help()
        return 0
    if args.calls:
        from . import bench_calls

        bench_calls.run(args)
        return 0
    if args.likelihood:
        from . import bench_likelihood

        bench_likelihood.run(args)
        return 0
    if args.fused:
        from . import bench_fused

        bench_fused.run(args)
        return 0
    if args.topology:
        if args.device == "cuda":
            from . import bench_topology_cuda

            bench_topology_cuda.run(args)
        else:
            from . import bench_topology

            bench_topology.run(args)
        return 0
    if args.T is None:
        args.T = [128, 256, 512, 1024] + ([2048] if args.device == "cuda" else [])
    if args.repeat is None:
        args.repeat = 100 if args.device == "cuda" else 5
    if args.output is None:
        args.output = "path" if args.device == "cuda" else "durations"
    if args.batch < 1 or args.ratio < 1 or args.repeat < 1 or min(args.T) < 1:
        parser.error("--batch, --ratio, --repeat and --T must be >= 1")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    from . import bench as bench_module

    bench_module.run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
