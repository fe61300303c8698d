# Two entry points, each installing what it needs on a fresh machine:
#   make demo    the main job: the speech aligner end to end (examples/speech)
#   make test    every test: C tests under ASan/UBSan, CUDA compile, Python tests
# and make bench (python -m libmas bench), make fuzz.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
JOBS ?= 2

.PHONY: bench test venv install c-test cuda-build py-test clean fuzz demo speech-deps

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

venv: $(PY)

# The package (C library, CUDA backend when nvcc is found, the module, and
# the PyTorch glue libmas._torch: built without build isolation so that
# CMake sees this venv's PyTorch).
install: $(PY)
	$(PIP) install -q numpy matplotlib scikit-build-core torch
	$(PIP) install -q --no-build-isolation .

bench: install
	$(PY) -m libmas bench --plot bench/results/cpu-bench.png

c-test:
	cmake -S . -B build/asan -DMAS_CUDA=OFF -DMAS_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build/asan -j$(JOBS)
	ctest --test-dir build/asan --output-on-failure
	MAS_CPU_ISA=avx2 ctest --test-dir build/asan --output-on-failure
	MAS_CPU_ISA=sse2 ctest --test-dir build/asan --output-on-failure
	MAS_CPU_MIN_CELLS_PER_THREAD=1 ctest --test-dir build/asan --output-on-failure

# CUDA sources and GPU test programs must compile everywhere; the GPU tests
# skip without a device, the tile loader's check and the fused ops' workspace
# bounds run on the host.
cuda-build:
	@if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then \
	  PATH="$$PATH:/usr/local/cuda/bin" cmake -S . -B build/cuda -DMAS_CUDA=ON && \
	  cmake --build build/cuda -j$(JOBS) && \
	  build/cuda/test_hard_loader && build/cuda/test_hard_cuda && build/cuda/test_soft_cuda && \
	  build/cuda/test_topology_cuda && build/cuda/test_fused_cuda && \
	  build/cuda/test_fused_forward_sum_cuda && build/cuda/test_likelihood_cuda; \
	else echo "cuda-build: no nvcc, skipped"; fi

py-test: install
	$(PIP) install -q pytest
	LIBMAS_EXPECT_GLUE=1 $(PY) -m pytest -q tests/python

test: c-test cuda-build py-test

clean:
	rm -rf build $(VENV)

# libFuzzer targets (tests/fuzz/): FUZZ_SECONDS per target (default 45, a few
# minutes in all); installs clang's fuzzer runtime with apt-get when it can,
# else prints the command. Corpus: tests/fuzz/corpus/<target>/ (generated).
FUZZ_SECONDS ?= 45
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh

# Speech demo (examples/speech/): espeak-ng speech with exact phone timings,
# GMM-HMM phone models trained from a flat start with libmas, boundary table
# and report (build/speech/report/). Installs espeak-ng with apt-get when it
# is missing and we are root or have sudo without a password; otherwise
# prints the command. SPEECH_ARGS: e.g. --train 2000 --test 200 --device cuda.
SPEECH_ARGS ?=
ESPEAK_PKGS := espeak-ng libespeak-ng-dev
speech-deps: install
	@if ! $(PY) -c "import ctypes; ctypes.CDLL('libespeak-ng.so.1')" 2>/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get install -y $(ESPEAK_PKGS) || { apt-get update && apt-get install -y $(ESPEAK_PKGS); }; \
	  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null && command -v apt-get >/dev/null; then \
	    sudo apt-get install -y $(ESPEAK_PKGS) || { sudo apt-get update && sudo apt-get install -y $(ESPEAK_PKGS); }; \
	  else \
	    echo "demo: espeak-ng is missing; install it with:"; \
	    echo "    sudo apt-get install -y $(ESPEAK_PKGS)"; exit 1; \
	  fi; \
	fi

demo: speech-deps
	$(PY) examples/speech/run.py $(SPEECH_ARGS)
