"""The dense arithmetic peaks (TFLOP/s) of the CUDA device a benchmark runs on,
for its ceiling column.

Known devices come from their data sheets (dense, no sparsity, boost clock).
Any other device gets its FP32 peak from what it reports: multiprocessors x
FP32 lanes a multiprocessor (by compute capability) x 2 x the highest SM
clock nvidia-smi states; its tensor-core peaks are then unknown (None)."""

import shutil
import subprocess

# name fragment (lower case) -> (FP32, TF32, BF16) dense TFLOP/s; the first match wins
_KNOWN = [
    ("h100 pcie", (51.2, 378.0, 756.0)),
    ("h100", (66.9, 494.7, 989.4)),  # SXM5 (H100 80GB HBM3)
    ("h200", (66.9, 494.7, 989.4)),  # the same GH100 SXM compute
    ("a100", (19.5, 156.0, 312.0)),
]

# compute capability -> FP32 lanes a multiprocessor
_LANES = {(6, 0): 64, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64}


def lanes_per_sm(major, minor):
    return _LANES.get((major, minor), 128)


def _max_sm_clock_mhz(index):
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, "-i", str(index), "--query-gpu=clocks.max.sm",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        return float(out.splitlines()[0])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def peaks(name, major, minor, sms, clock_mhz):
    """{"float32", "tf32", "bf16": TFLOP/s or None, "source": str} for a
    device of this name, compute capability, multiprocessor count and
    highest SM clock (MHz, None when unknown)."""
    low = name.lower()
    for frag, (f32, tf32, bf16) in _KNOWN:
        if frag in low:
            return {"float32": f32, "tf32": tf32, "bf16": bf16, "source": f"{name}, data sheet"}
    if clock_mhz:
        f32 = sms * lanes_per_sm(major, minor) * 2 * clock_mhz * 1e6 / 1e12
        return {"float32": f32, "tf32": None, "bf16": None,
                "source": f"{name}: {sms} SMs x {lanes_per_sm(major, minor)} FP32 lanes x 2 x "
                          f"{clock_mhz:.0f} MHz"}
    return {"float32": None, "tf32": None, "bf16": None, "source": f"{name}: peak unknown"}


def device_peaks(torch, index=None):
    """peaks() of the current (or given) CUDA device."""
    index = torch.cuda.current_device() if index is None else index
    p = torch.cuda.get_device_properties(index)
    return peaks(p.name, p.major, p.minor, p.multi_processor_count, _max_sm_clock_mhz(index))


def percent(tflops, peak):
    """' (x% of P)' or '' when the peak is unknown."""
    return f" ({100 * tflops / peak:.0f}% of {peak:.0f})" if peak else ""
