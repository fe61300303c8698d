#!/usr/bin/env bash
# An A/B whose builds are made here, on the CPU machine (nvcc for sm_90), so
# that the device call only runs them: libmas.so of a base revision and of
# this working tree (PATCHES applied to its copy), each with the objects of
# the fused Gaussian path only (fused, hard_mas, hard_chain, likelihood, the
# CPU code; the topology kernels left out: 12 MB instead of 50, unresolved
# calls that these programs never make), bench/lab/fused_loop.cu linked to
# each, and the CUDA tests of that path linked to the new side. Why (session
# 30): a device call's two CMake builds took ~100 s, and with machines scarce
# each start took 200-400 s of the session's 1800.
# Here:   bash bench/lab/prebuilt_ab.sh BASE_REV        (~5 min on 2 cores)
#         [PATCHES="bench/lab/x.patch ..."]: applied to the new side's copy
# Device: run(command="bash build-prebuilt/run.sh", carry=["build-prebuilt"])
#         (~2 min: tests, three rounds of old / new, memcheck and racecheck)
# Output: $OUT/tests.log, $OUT/ab.log (ms a call and a hash of the outputs).
set -u -o pipefail
cd "$(dirname "$0")/../.."
R=$PWD BASE=${1:?usage: bench/lab/prebuilt_ab.sh BASE_REV}
OUTD=$R/build-prebuilt W=/tmp/prebuilt
rm -rf "$W" "$OUTD" && mkdir -p "$W/old" "$W/new" "$OUTD/old" "$OUTD/new"
git archive "$BASE" | tar -x -C "$W/old" || exit 1
cp -r include lib tests bench python CMakeLists.txt "$W/new"/ || exit 1
for p in ${PATCHES:-}; do (cd "$W/new" && git apply "$R/$p") || { echo "patch $p failed"; exit 1; }; done
objs=(lib/cpu/*.o lib/common/*.o lib/cuda/fused.cu.o lib/cuda/hard_mas.cu.o lib/cuda/hard_chain.cu.o
      lib/cuda/likelihood.cu.o lib/cuda/topology.cu.o)
link=(-std=c++17 -O2 -arch=sm_90 -cudart shared -Xlinker -rpath='$ORIGIN' -Xlinker --allow-shlib-undefined)
for v in old new; do
  # only those objects (the Makefile generator's object targets): the topology kernels are most
  # of a whole build's time
  cmake -S "$W/$v" -B "$W/b_$v" -DMAS_CUDA=ON -DMAS_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 >"$W/$v.log" 2>&1 || { tail -20 "$W/$v.log"; exit 1; }
  targets=$(make -C "$W/b_$v" help | sed -n 's/^\.\.\. \(lib\/.*\.o\)$/\1/p' |
    grep -v '^lib/cuda/' ; printf '%s\n' lib/cuda/fused.o lib/cuda/hard_mas.o lib/cuda/hard_chain.o \
    lib/cuda/likelihood.o lib/cuda/topology.o)
  make -C "$W/b_$v" -j"$(nproc)" $targets >>"$W/$v.log" 2>&1 || { tail -20 "$W/$v.log"; exit 1; }
  (cd "$W/b_$v/CMakeFiles/mas.dir" && g++ -shared -o "$OUTD/$v/libmas.so" ${objs[@]} \
    -L/usr/local/cuda/lib64 -lcudart -lpthread -lm) || exit 1
  (cd "$W/$v" && nvcc "${link[@]}" -Iinclude -Itests/c -Itests/cuda -Ibench/lab "$R/bench/lab/fused_loop.cu" \
    -L"$OUTD/$v" -lmas -lm -lpthread -o "$OUTD/$v/loop") || exit 1
done
for t in test_fused_cuda test_hard_cuda test_likelihood_cuda; do
  (cd "$W/new" && nvcc "${link[@]}" -Iinclude -Ilib -Itests/c -Itests/cuda "tests/cuda/$t.cu" \
    -L"$OUTD/new" -lmas -lm -lpthread -o "$OUTD/new/$t") || exit 1
done
cat >"$OUTD/run.sh" <<'RUN'
#!/usr/bin/env bash
set -u
cd "$(dirname "$0")"
export PATH="$PATH:/usr/local/cuda/bin" LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
t0=$SECONDS L=$OUT/tests.log A=$OUT/ab.log
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$L" >"$A"
timeout 100 ./new/test_fused_cuda 2>&1 | tail -2 >>"$L"
timeout 60 ./new/test_hard_cuda --small 2>&1 | tail -2 >>"$L"
timeout 60 ./new/test_likelihood_cuda --small 2>&1 | tail -2 >>"$L"
echo "tests: $((SECONDS - t0)) s" >>"$L"
for k in 1 2 3; do for v in old new; do
  echo "=== $v, round $k" >>"$A"
  timeout 60 "./$v/loop" 40 >>"$A" 2>&1
done; done
echo "ab: $((SECONDS - t0)) s" >>"$L"
timeout 100 compute-sanitizer --tool memcheck ./new/test_fused_cuda --small 2>&1 | tail -2 >>"$L"
timeout 100 compute-sanitizer --tool racecheck ./new/test_fused_cuda --small 2>&1 | tail -2 >>"$L"
timeout 60 compute-sanitizer --tool racecheck ./new/test_hard_cuda --small 2>&1 | tail -2 >>"$L"
echo "done: $((SECONDS - t0)) s" >>"$L"
RUN
chmod +x "$OUTD/run.sh"
du -sh "$OUTD"
