"""The device peaks the CUDA benchmarks print their TFLOP/s against
(libmas._peaks): data-sheet values for known devices, else FP32 from the
device's own multiprocessor count and clock, and no tensor-core peak."""

import pytest

from libmas import _peaks


def test_known_devices_by_name():
    h100 = _peaks.peaks("NVIDIA H100 80GB HBM3", 9, 0, 132, 1980)
    assert (h100["float32"], h100["tf32"], h100["bf16"]) == (66.9, 494.7, 989.4)
    assert _peaks.peaks("NVIDIA H100 PCIe", 9, 0, 114, 1755)["float32"] == 51.2
    assert _peaks.peaks("NVIDIA H200", 9, 0, 132, 1980)["tf32"] == 494.7
    assert _peaks.peaks("NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410)["float32"] == 19.5


def test_other_devices_from_their_clock():
    # an RTX 4090 (sm_89, 128 SMs, 2520 MHz): its data sheet says 82.6 FP32
    p = _peaks.peaks("NVIDIA GeForce RTX 4090", 8, 9, 128, 2520)
    assert p["float32"] == pytest.approx(82.6, abs=0.05)
    assert p["tf32"] is None and p["bf16"] is None
    # 64 FP32 lanes a multiprocessor on sm_70 (V100: 80 SMs, 1530 MHz, 15.7)
    assert _peaks.peaks("Tesla V100-SXM2-16GB", 7, 0, 80, 1530)["float32"] == pytest.approx(
        15.67, abs=0.01)
    assert _peaks.peaks("Some GPU", 9, 0, 10, None)["float32"] is None


def test_percent_text():
    assert _peaks.percent(33.45, 66.9) == " (50% of 67)"
    assert _peaks.percent(10.0, None) == ""
