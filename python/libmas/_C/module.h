/* Functions of the libmas._C module, one group per source file; module.c
 * puts them in the method table. Every one uses the vectorcall-style
 * METH_FASTCALL signature. */
#ifndef LIBMAS_PY_MODULE_H
#define LIBMAS_PY_MODULE_H

#include "pytensor.h"

/* hard.c */
PyObject *mas_py_hard_cpu(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *mas_py_hard_cuda(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *mas_py_hard_cuda_mask(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *mas_py_hard_cuda_mask_workspace_size(PyObject *self, PyObject *const *args,
                                               Py_ssize_t nargs);
PyObject *mas_py_hard_cpu_min_workspace_size(PyObject *self, PyObject *const *args,
                                             Py_ssize_t nargs);
PyObject *mas_py_hard_cpu_workspace_size(PyObject *self, PyObject *const *args,
                                         Py_ssize_t nargs);
PyObject *mas_py_hard_cuda_min_workspace_size(PyObject *self, PyObject *const *args,
                                              Py_ssize_t nargs);
PyObject *mas_py_hard_cuda_workspace_size(PyObject *self, PyObject *const *args,
                                          Py_ssize_t nargs);

/* soft.c */
PyObject *mas_py_forward_sum(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *mas_py_attention(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *mas_py_soft_workspace_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* likelihood.c */
PyObject *mas_py_gauss_coef(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *mas_py_loglik(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *mas_py_loglik_workspace_size(PyObject *self, PyObject *const *args,
                                       Py_ssize_t nargs);

/* baseline.c */
PyObject *mas_py_baseline_glow(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* topology.c */
PyObject *mas_py_topo(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* fused.c: fused Gaussian alignment (mas.h section 8) */
PyObject *mas_py_fused(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *mas_py_fused_workspace_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *mas_py_topo_workspace_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
