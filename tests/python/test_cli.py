"""`python -m libmas`: --help, --version and a tiny bench run exit 0 and
print what they promise. Run in a subprocess, as a user would."""

import json
import subprocess
import sys

import pytest

import libmas


def run_cli(*args, timeout=120):
    proc = subprocess.run([sys.executable, "-m", "libmas", *args], capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


def test_help():
    out = run_cli("--help")
    assert "usage" in out.lower() and "bench" in out


def test_version():
    out = run_cli("--version")
    assert libmas.__version__ in out
    assert libmas.c_version() in out


def test_bench_help_lists_the_size_flags():
    out = run_cli("bench", "--help")
    for flag in ("--T", "--batch", "--repeat", "--threads", "--dtype"):
        assert flag in out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tiny_bench_runs(tmp_path, dtype):
    table = tmp_path / "bench.json"
    out = run_cli("bench", "--T", "8", "16", "--batch", "2", "--repeat", "1", "--dtype", dtype,
                  "--json", str(table))
    lines = [line for line in out.splitlines() if line.startswith("|")]
    # Header, separator, one row per T.
    assert len(lines) >= 4, out
    assert any(line.startswith("| 8 ") for line in lines)
    assert any(line.startswith("| 16 ") for line in lines)
    data = json.loads(table.read_text())
    assert [row["T"] for row in data["rows"]] == [8, 16]
    for row in data["rows"]:
        assert row["S"] == 4 * row["T"]
        assert row["ours_ms"] > 0


def test_bench_rejects_a_bad_flag():
    proc = subprocess.run([sys.executable, "-m", "libmas", "bench", "--no-such-flag"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
