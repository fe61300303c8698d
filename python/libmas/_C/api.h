/* The library's entry points that libmas._torch calls, handed over by
 * libmas._C as a capsule (libmas._C._api). The PyTorch glue thus calls the
 * very library this module links, with its CUDA state and device caches,
 * instead of linking a second copy of it (a second static CUDA runtime and
 * every kernel twice in the process).
 *
 * Append only: a field is never moved or removed, and `size` tells the
 * reader how many of them the module it got the table from has. */
#ifndef LIBMAS_PY_API_H
#define LIBMAS_PY_API_H

#include "mas.h"

#define MAS_PY_API_CAPSULE "libmas._C._api"

/* Each field has the type of a pointer to the mas.h function it names
 * (__typeof__, which GCC, Clang and their C++ front ends accept), so the
 * table cannot drift from the header. */
#define MAS_PY_API_ENTRY(name) __typeof__(&mas_##name) name

typedef struct mas_py_api {
    size_t size; /* sizeof(mas_py_api) of the module that filled it */
    MAS_PY_API_ENTRY(hard_cpu_workspace_size);
    MAS_PY_API_ENTRY(hard_cpu);
    MAS_PY_API_ENTRY(hard_cuda_workspace_size);
    MAS_PY_API_ENTRY(hard_cuda);
    MAS_PY_API_ENTRY(attention_cpu_workspace_size);
    MAS_PY_API_ENTRY(attention_forward_cpu);
    MAS_PY_API_ENTRY(attention_cuda_workspace_size);
    MAS_PY_API_ENTRY(attention_forward_cuda);
    MAS_PY_API_ENTRY(hard_cuda_mask_workspace_size);
    MAS_PY_API_ENTRY(hard_cuda_mask);
    MAS_PY_API_ENTRY(forward_sum_cpu_workspace_size);
    MAS_PY_API_ENTRY(forward_sum_cpu);
    MAS_PY_API_ENTRY(forward_sum_cuda_workspace_size);
    MAS_PY_API_ENTRY(forward_sum_cuda);
    MAS_PY_API_ENTRY(attention_backward_cpu);
    MAS_PY_API_ENTRY(attention_backward_cuda);
    MAS_PY_API_ENTRY(align_gaussian_cpu_workspace_size);
    MAS_PY_API_ENTRY(align_gaussian_cpu);
    MAS_PY_API_ENTRY(align_gaussian_cuda_workspace_size);
    MAS_PY_API_ENTRY(align_gaussian_cuda);
} mas_py_api;

#endif
