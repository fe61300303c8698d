#!/usr/bin/env bash
# Builds every fuzz target (tests/fuzz/fuzz_*.c) with clang and libFuzzer,
# ASan and UBSan, against the library's own C sources compiled here with the
# same instrumentation (not the gcc-built libmas.a).
#   tests/fuzz/build.sh [OUT_DIR]      (default build/fuzz)
# Exit status 2 when clang or its fuzzer runtime is missing and cannot be
# installed (the message names the command to run).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-build/fuzz}
CC=${FUZZ_CC:-clang}
mkdir -p "$OUT/obj"

probe() {
  printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' >"$OUT/probe.c"
  "$CC" -fsanitize=fuzzer,address,undefined "$OUT/probe.c" -o "$OUT/probe" >/dev/null 2>&1
}
if ! command -v "$CC" >/dev/null 2>&1 || ! probe; then
  ver=14
  if command -v "$CC" >/dev/null 2>&1; then
    ver=$("$CC" -dumpversion | cut -d. -f1)
  fi
  cmd="apt-get install -y clang-$ver libclang-rt-$ver-dev"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fuzz: installing clang's fuzzer runtime: $cmd"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive $cmd -qq; } >/dev/null 2>&1 || true
    command -v "$CC" >/dev/null 2>&1 || CC=clang-$ver
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    echo "fuzz: installing clang's fuzzer runtime: sudo $cmd"
    { sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive $cmd -qq; } >/dev/null 2>&1 || true
    command -v "$CC" >/dev/null 2>&1 || CC=clang-$ver
  fi
  if ! command -v "$CC" >/dev/null 2>&1 || ! probe; then
    echo "fuzz: clang with libFuzzer (-fsanitize=fuzzer) is not available; install it with:"
    echo "  $cmd"
    exit 2
  fi
fi

SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS="-std=c11 -g -O1 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Iinclude -Ilib"
objs=()
for src in lib/common/*.c lib/cpu/*.c lib/cuda/no_cuda.c; do
  extra=""
  case "$src" in
    *avx512.c) extra="-mavx512f -mavx512dq -mavx512vl -mavx512bw -mavx2 -mfma" ;;
    *avx2.c) extra="-mavx2 -mfma" ;;
  esac
  obj="$OUT/obj/$(basename "${src%.c}").o"
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find lib include -newer "$obj" -name '*.h' | head -1)" ]; then
    # shellcheck disable=SC2086
    "$CC" $CFLAGS $SAN -fsanitize=fuzzer-no-link $extra -c "$src" -o "$obj"
  fi
  objs+=("$obj")
done
for src in tests/fuzz/fuzz_*.c; do
  name=$(basename "${src%.c}")
  if [ ! -x "$OUT/$name" ] || [ -n "$(find "$src" tests/fuzz/*.h "${objs[@]}" -newer "$OUT/$name" | head -1)" ]; then
    # shellcheck disable=SC2086
    "$CC" $CFLAGS $SAN -fsanitize=fuzzer "$src" "${objs[@]}" -lm -lpthread -o "$OUT/$name"
  fi
  echo "$OUT/$name"
done
