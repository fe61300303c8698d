/* The topology kernels for __nv_bfloat16 emissions (topo_launch.cuh). */
#define MAS_TOPO_INSTANTIATE __nv_bfloat16
#include "cuda/topo_launch.cuh"
