#!/usr/bin/env bash
# Forms of the tiles-ahead kernel (fused_forward's AH instance) side by side,
# built here (nvcc, sm_90) so that the device call only times them. Why
# (session 39): the kernel's own code costs ~2% of its calls against main's
# kernel (ptxas allocates its products and sweep anew), and which source form
# keeps it cheaper cannot be told from the SASS alone. Every side is HEAD's
# library with lib/cuda/fused_forward.cuh replaced by one file of FORMS
# (fused.cu recompiled; the other objects shared in one libmas_rest.so), plus
# side "head" (BASE's header; BASE defaults to HEAD and gives every other file).
# Here:   FORMS="a.cuh b.cuh ..." [BASE=rev] bash bench/lab/ahead_forms_ab.sh   (~3.5 min + 1.5 a form)
# Session 39's forms are bench/lab/ahead_forms/*.patch (each against 8e79e84's header: t1 the
# roles' loops apart, t5 also the copy-backs in a loop of their own, u16 / u4 the products'
# unrolling, vi t5 with bar.arrive / bar.sync hand-overs, vb t5 merged into two loops of both
# roles); main's form is t5 with role_barrier. Each becomes a header by
# `git show 8e79e84:lib/cuda/fused_forward.cuh > f.cuh && patch f.cuh P`.
# Device: run(command="bash build-forms/run.sh", carry=["build-forms"])
# Output: $OUT/forms.log: fused_loop at B=32 T=512 S=2048 (ms a call, hash),
#         each side with the default plan, the plan off (MAS_FUSED_AHEAD="1 999 1":
#         the AH kernel, nothing ahead) and, for head, main's kernel (MAS_FUSED_AHEAD="0 0 0"), rounds
#         alternating the sides; then each side's test_fused_cuda --small, and
#         racecheck of it for the sides in RACE (" v_a v_b").
set -u -o pipefail
cd "$(dirname "$0")/../.."
R=$PWD OUTD=$R/build-forms W=/tmp/forms
rm -rf "$OUTD" "$W" && mkdir -p "$OUTD" "$W/src"
git archive "${BASE:-HEAD}" | tar -x -C "$W/src" || exit 1
cuda=(fused hard_mas hard_chain likelihood topology)
cmake -S "$W/src" -B "$W/b" -DMAS_CUDA=ON -DMAS_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 >"$W/cmake.log" 2>&1 || { tail -20 "$W/cmake.log"; exit 1; }
targets=$(make -C "$W/b" help | sed -n 's/^\.\.\. \(lib\/.*\.o\)$/\1/p' | grep -v '^lib/cuda/';
  printf 'lib/cuda/%s.o\n' "${cuda[@]}")
make -C "$W/b" -j"$(nproc)" $targets >>"$W/make.log" 2>&1 || { tail -20 "$W/make.log"; exit 1; }
O=$W/b/CMakeFiles/mas.dir
rest=($(cd "$O" && ls lib/cpu/*.o lib/common/*.o) $(printf 'lib/cuda/%s.cu.o ' hard_mas hard_chain likelihood topology))
(cd "$O" && g++ -shared -o "$OUTD/libmas_rest.so" "${rest[@]}" -L/usr/local/cuda/lib64 -lcudart -lpthread -lm) || exit 1
link=(-std=c++17 -O2 -arch=sm_90 -cudart shared -Xlinker -rpath='$ORIGIN:$ORIGIN/..' -Xlinker --allow-shlib-undefined)
sides=""
for f in head ${FORMS:-}; do
  v=$(basename "$f" .cuh); sides="$sides $v"
  if [ "$f" = head ]; then git show "${BASE:-HEAD}":lib/cuda/fused_forward.cuh >"$W/src/lib/cuda/fused_forward.cuh"
  else cp "$f" "$W/src/lib/cuda/fused_forward.cuh"; fi
  rm -f "$O/lib/cuda/fused.cu.o" # (the build does not track the header)
  make -C "$W/b" lib/cuda/fused.o >>"$W/make.log" 2>&1 || { tail -20 "$W/make.log"; exit 1; }
  mkdir -p "$OUTD/$v"
  g++ -shared -o "$OUTD/$v/libmas.so" "$O/lib/cuda/fused.cu.o" -L"$OUTD" -lmas_rest \
    -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,'$ORIGIN/..' || exit 1
  for p in bench/lab/fused_loop.cu tests/cuda/test_fused_cuda.cu; do
    (cd "$W/src" && nvcc "${link[@]}" -Iinclude -Ilib -Itests/c -Itests/cuda -Ibench/lab "$p" \
      -L"$OUTD/$v" -lmas -L"$OUTD" -lmas_rest -lm -lpthread -o "$OUTD/$v/$(basename "$p" .cu)") || exit 1
  done
  cp "$W/src/lib/cuda/fused_forward.cuh" "$OUTD/$v/"
done
cat >"$OUTD/run.sh" <<RUN
#!/usr/bin/env bash
set -u
cd "\$(dirname "\$0")"
export PATH="\$PATH:/usr/local/cuda/bin" LD_LIBRARY_PATH="/usr/local/cuda/lib64:\${LD_LIBRARY_PATH:-}" MAS_LOOP_SHAPES="32 512 2048 80"
F=\$OUT/forms.log t0=\$SECONDS
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader >"\$F"
for k in 1 2 3; do for v in$sides; do for plan in default "1 999 1" "0 0 0"; do
  [ "\$v" != head ] && [ "\$plan" = "0 0 0" ] && continue # main's kernel: the same in every side
  echo "=== \$v plan=\$plan round \$k" >>"\$F"
  if [ "\$plan" = default ]; then timeout 60 ./\$v/fused_loop 40 >>"\$F" 2>&1
  else MAS_FUSED_AHEAD="\$plan" timeout 60 ./\$v/fused_loop 40 >>"\$F" 2>&1; fi
done; done; done
echo "timings: \$((SECONDS - t0)) s" >>"\$F"
for v in$sides; do echo "=== tests \$v" >>"\$F"; timeout 100 ./\$v/test_fused_cuda --small 2>&1 | tail -2 >>"\$F"; done
for v in${RACE:-}; do echo "=== racecheck \$v" >>"\$F"; timeout 100 compute-sanitizer --tool racecheck ./\$v/test_fused_cuda --small 2>&1 | tail -2 >>"\$F"; done
echo "done: \$((SECONDS - t0)) s" >>"\$F"
RUN
chmod +x "$OUTD/run.sh"
du -sh "$OUTD"
