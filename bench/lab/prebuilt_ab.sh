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
#         [PATCHES2="..."]: a third side, new2, this tree with those applied
#         (cumulative: list every patch it needs; "-": none), timed and tested
#         beside the others in the same call
#         [KEEP=1]: keep sides already built (add new2 to an existing A/B)
# Device: run(command="bash build-prebuilt/run.sh", carry=["build-prebuilt"])
#         (~3-4 min: three rounds of old / new, the likelihood rows, the tests, the
#         products lab under ncu, memcheck and racecheck)
# Output: $OUT/ab.log (ms a call and a hash of the outputs; the likelihood rows),
#         $OUT/tests.log, $OUT/products.log.
set -u -o pipefail
cd "$(dirname "$0")/../.."
R=$PWD BASE=${1:?usage: bench/lab/prebuilt_ab.sh BASE_REV}
OUTD=$R/build-prebuilt W=/tmp/prebuilt
sides="old new"
[ -n "${PATCHES2:-}" ] && sides="$sides new2"
[ "${KEEP:-0}" = 1 ] || rm -rf "$OUTD"
build=""
for v in $sides; do [ -x "$OUTD/$v/loop" ] || build="$build $v"; done
rm -rf "$W" && mkdir -p "$W"
for v in $build; do
  rm -rf "$OUTD/$v" && mkdir -p "$W/$v" "$OUTD/$v"
  if [ "$v" = old ]; then git archive "$BASE" | tar -x -C "$W/old" || exit 1; continue; fi
  cp -r include lib tests bench python CMakeLists.txt "$W/$v"/ || exit 1
  ps=${PATCHES:-}; [ "$v" = new2 ] && ps=$PATCHES2
  for p in $ps; do [ "$p" = - ] && continue; (cd "$W/$v" && git apply "$R/$p") || { echo "patch $p failed"; exit 1; }; done
done
cuda=(fused hard_mas hard_chain likelihood topology) # lib/cuda/<name>.cu: the fused path's
# (the globs expand in the build's object folder, at the link)
objs=(lib/cpu/*.o lib/common/*.o $(printf 'lib/cuda/%s.cu.o ' "${cuda[@]}"))
link=(-std=c++17 -O2 -arch=sm_90 -cudart shared -Xlinker -rpath='$ORIGIN' -Xlinker --allow-shlib-undefined)
for v in $build; do
  # only those objects (the Makefile generator's object targets): the topology kernels are most
  # of a whole build's time
  cmake -S "$W/$v" -B "$W/b_$v" -DMAS_CUDA=ON -DMAS_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 >"$W/$v.log" 2>&1 || { tail -20 "$W/$v.log"; exit 1; }
  targets=$(make -C "$W/b_$v" help | sed -n 's/^\.\.\. \(lib\/.*\.o\)$/\1/p' |
    grep -v '^lib/cuda/' ; printf 'lib/cuda/%s.o\n' "${cuda[@]}")
  make -C "$W/b_$v" -j"$(nproc)" $targets >>"$W/$v.log" 2>&1 || { tail -20 "$W/$v.log"; exit 1; }
  (cd "$W/b_$v/CMakeFiles/mas.dir" && g++ -shared -o "$OUTD/$v/libmas.so" ${objs[@]} \
    -L/usr/local/cuda/lib64 -lcudart -lpthread -lm) || exit 1
  (cd "$W/$v" && nvcc "${link[@]}" -Iinclude -Itests/c -Itests/cuda -Ibench/lab "$R/bench/lab/fused_loop.cu" \
    -L"$OUTD/$v" -lmas -lm -lpthread -o "$OUTD/$v/loop") || exit 1
  # the likelihood kernels' rows (issue 10), GPU time a call
  (cd "$W/$v" && nvcc "${link[@]}" -Iinclude -Itests/cuda tests/cuda/bench_likelihood_cuda.cu \
    -L"$OUTD/$v" -lmas -lm -lpthread -o "$OUTD/$v/bench_lik") || exit 1
done
# not test_hard_cuda: it also calls the chain topologies' kernels, which these libraries leave
# out (a run stops at an unresolved symbol); bench/gpu_one_call.sh builds everything
for v in $build; do
  [ "$v" = old ] && continue
  for t in test_fused_cuda test_likelihood_cuda; do
    (cd "$W/$v" && nvcc "${link[@]}" -Iinclude -Ilib -Itests/c -Itests/cuda "tests/cuda/$t.cu" \
      -L"$OUTD/$v" -lmas -lm -lpthread -o "$OUTD/$v/$t") || exit 1
  done
done
# the products lab (bench/lab/products_ncu.sh runs it under ncu in the same call)
nvcc -std=c++17 -O3 -arch=sm_90 -Itests/cuda bench/lab/products_lab.cu -o "$OUTD/products_lab" || exit 1
cp bench/lab/products_ncu.sh bench/lab/ncu_launches.py bench/ncu_metrics.sh "$OUTD"/ || exit 1
# What the call runs, the timings first (what comes back if the call is cut short): old / new
# (/ new2) in loops of back-to-back calls, then the likelihood rows, then the new sides' tests
# (full sets), the products lab under ncu, and the sanitizers.
cat >"$OUTD/run.sh" <<'RUN'
#!/usr/bin/env bash
set -u
cd "$(dirname "$0")"
export PATH="$PATH:/usr/local/cuda/bin" LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
t0=$SECONDS L=$OUT/tests.log A=$OUT/ab.log
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$L" >"$A"
sides="old new"; [ -x new2/loop ] && sides="old new new2"
for k in 1 2 3; do for v in $sides; do
  echo "=== $v, round $k" >>"$A"
  timeout 60 "./$v/loop" 40 >>"$A" 2>&1
done; done
for k in 1 2; do for v in $sides; do
  [ -x "$v/bench_lik" ] || continue
  echo "=== likelihood, $v, round $k" >>"$A"
  timeout 60 "./$v/bench_lik" --quick 2>&1 | grep -E "^\|" >>"$A"
done; done
echo "ab: $((SECONDS - t0)) s" >>"$L"
for v in new new2; do for t in test_fused_cuda test_likelihood_cuda; do
  [ -x "$v/$t" ] || continue
  echo "$v/$t" >>"$L"; timeout 120 "./$v/$t" 2>&1 | tail -2 >>"$L"
done; done
echo "tests: $((SECONDS - t0)) s" >>"$L"
timeout 100 bash ./products_ncu.sh ./products_lab >"$OUT/products.log" 2>&1
echo "products: $((SECONDS - t0)) s" >>"$L"
for v in new new2; do for t in test_fused_cuda test_likelihood_cuda; do for tool in memcheck racecheck; do
  [ -x "$v/$t" ] || continue
  echo "$tool $v/$t --small" >>"$L"
  timeout 100 compute-sanitizer --tool $tool "./$v/$t" --small 2>&1 | tail -2 >>"$L"
done; done; done
echo "done: $((SECONDS - t0)) s" >>"$L"
RUN
chmod +x "$OUTD/run.sh"
du -sh "$OUTD"
