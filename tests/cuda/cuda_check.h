/* The CUDA test and benchmark programs' one error check: a failed runtime
 * call names itself and ends the program (exit 2). */
#ifndef MAS_TESTS_CUDA_CHECK_H
#define MAS_TESTS_CUDA_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#define CUDA_OK(call)                                                                  \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,              \
                    cudaGetErrorString(e_));                                           \
            exit(2);                                                                   \
        }                                                                              \
    } while (0)

#endif
