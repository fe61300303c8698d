# round-frames variants of the topology sweep: kernel times of test_topology_cuda --bench
export PATH=$PATH:/usr/local/cuda/bin
for C in 8 32; do
  cmake -S . -B bv$C -DMAS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_FLAGS="-DMAS_ROUND_FRAMES=$C" >/dev/null && cmake --build bv$C -j16 --target mas >/dev/null 2>&1 &&
  nvcc -std=c++17 -O2 -arch=sm_90 -Iinclude -Ilib -Itests/c tests/cuda/test_topology_cuda.cu bv$C/libmas.a -lm -lpthread -o bv$C/tt &&
  echo "== kRoundFrames $C" && bv$C/tt 1 --bench | grep bench
done
