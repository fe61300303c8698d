/* The topology kernels for float emissions (topo_launch.cuh). */
#define MAS_TOPO_INSTANTIATE float
#include "cuda/topo_launch.cuh"
