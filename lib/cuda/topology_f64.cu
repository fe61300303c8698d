/* The topology kernels for double emissions (topo_launch.cuh). */
#define MAS_TOPO_INSTANTIATE double
#include "cuda/topo_launch.cuh"
