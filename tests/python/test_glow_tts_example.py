"""examples/glow_tts_step.py at a tiny size: fused and unfused steps run in
their own processes and give the same loss and gradients (exit status 0)."""

import os
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "glow_tts_step.py")


@pytest.mark.parametrize("precision", ["float32", "tf32"])
def test_glow_tts_step_tiny(precision):
    """(tf32 on the CPU: the default precision, the same loss.)"""
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, EXAMPLE, "--batch", "3", "--tokens", "12",
                          "--frames", "40", "--channels", "8", "--repeat", "1", "--threads", "1",
                          "--precision", precision],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "same loss and gradients (within 0.0001): yes" in out.stdout
    assert f"cpu, {precision}" in out.stdout
