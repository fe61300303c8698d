"""examples/glow_tts_step.py at a tiny size: fused and unfused steps run in
their own processes and give the same loss and gradients (exit status 0)."""

import os
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "glow_tts_step.py")


def test_glow_tts_step_tiny():
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, EXAMPLE, "--batch", "3", "--tokens", "12",
                          "--frames", "40", "--channels", "8", "--repeat", "1", "--threads", "1"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "same loss and gradients: yes" in out.stdout
