"""libmas: monotonic alignment search (Glow-TTS MAS) for NumPy and PyTorch,
on the CPU and on CUDA, from a C library.

    import libmas
    path = libmas.maximum_path(value, mask)             # Glow-TTS drop-in
    res = libmas.align(value, x_lengths, y_lengths)     # durations, indices, score
    res.path()                                          # dense 0/1 path on request

CUDA calls never synchronise the host; their value errors are reported
lazily (see ``libmas.errors``, ``libmas.check_errors()``).
"""

from . import _C
from .errors import check_errors
from .hard import AlignResult, align, maximum_path
from .soft import forward_sum, monotonic_attention, monotonic_attention_m2m, posterior
from .likelihood import GMM, gaussian_loglik, gmm_loglik
from .fused import (align_gaussian, durations_to_indices, expand, forward_sum_gaussian,
                    indices_to_durations)
from .topology import (ForcedAlignResult, Topology, ViterbiResult, ctc_log_z, forced_align,
                       log_z, state_posterior, viterbi)

__version__ = "0.1.0"


def c_version():
    """Version string of the linked C library."""
    return _C.version()


def has_cuda():
    """True when the C library was built with its CUDA backend."""
    return bool(_C.has_cuda())


__all__ = ["AlignResult", "align", "maximum_path", "check_errors", "c_version", "has_cuda",
           "__version__", "forward_sum", "posterior", "monotonic_attention",
           "monotonic_attention_m2m", "GMM", "gmm_loglik", "gaussian_loglik",
           "Topology", "ForcedAlignResult", "ViterbiResult", "forced_align", "ctc_log_z",
           "viterbi", "log_z", "state_posterior", "align_gaussian", "forward_sum_gaussian",
           "expand", "durations_to_indices", "indices_to_durations"]


def torch_ops():
    """Registers the PyTorch custom operators (once) and returns their
    namespace, torch.ops.libmas (see libmas._ops for the schemas). Imports
    torch. Done by itself when libmas is imported after torch or at the
    first call with a tensor; call it before compiling when libmas was
    imported first."""
    from . import _ops

    return _ops.registered()


__all__.append("torch_ops")

if "torch" in __import__("sys").modules:
    torch_ops()
