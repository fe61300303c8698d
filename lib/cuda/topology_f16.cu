/* The topology kernels for __half emissions (topo_launch.cuh). */
#define MAS_TOPO_INSTANTIATE __half
#include "cuda/topo_launch.cuh"
