#!/usr/bin/env bash
# Builds the fuzz targets, writes the seed corpus (when missing) and runs each
# target for FUZZ_SECONDS seconds (default 45) with one job, growing its
# corpus in tests/fuzz/corpus/<target>/. Crash artefacts go to
# build/fuzz/artifacts/ (git-ignored). Exit status 0 when clang's fuzzer
# runtime cannot be had (the message says how to install it) unless
# FUZZ_REQUIRED=1. FUZZ_SEED fixes libFuzzer's seed (CI: a red run is
# reproducible from its log; by hand leave it unset to explore further).
set -uo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${FUZZ_SECONDS:-45}
tests/fuzz/build.sh build/fuzz >/tmp/fuzz-build.$$ 2>&1
rc=$?
if [ $rc -eq 2 ]; then
  cat /tmp/fuzz-build.$$; rm -f /tmp/fuzz-build.$$
  echo "fuzz: skipped (no libFuzzer)"
  [ "${FUZZ_REQUIRED:-0}" = 1 ] && exit 1 || exit 0
elif [ $rc -ne 0 ]; then
  cat /tmp/fuzz-build.$$; rm -f /tmp/fuzz-build.$$; exit $rc
fi
targets=$(grep '^build/fuzz/' /tmp/fuzz-build.$$); rm -f /tmp/fuzz-build.$$
# (re)writes the seeds when a target's corpus folder is missing (a new
# target); grown corpus files are kept
for t in $targets; do
  [ -d "tests/fuzz/corpus/$(basename "$t")" ] || { python3 tests/fuzz/make_corpus.py; break; }
done
mkdir -p build/fuzz/artifacts
status=0
for t in $targets; do
  name=$(basename "$t")
  mkdir -p "tests/fuzz/corpus/$name"
  echo "fuzz: $name for ${SECONDS_EACH}s"
  if ! "$t" -max_total_time="$SECONDS_EACH" ${FUZZ_SEED:+-seed=$FUZZ_SEED} -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix=build/fuzz/artifacts/"$name"- "tests/fuzz/corpus/$name" \
       >"build/fuzz/$name.log" 2>&1; then
    echo "fuzz: $name FAILED; its log:"; tail -40 "build/fuzz/$name.log"; status=1
  else
    grep -E '^#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss' "build/fuzz/$name.log" | sed "s/^/  /"
  fi
done
exit $status
