/* Wrappers of the fused Gaussian alignment (mas.h section 8) for
 * libmas.fused: check what the library cannot (vector lengths, the shapes
 * of durations / indices / score / log_z, one device), then call the CPU or
 * the CUDA entry point. Each returns (status, item); Python words errors.
 * x, means and spread come as the views of mas.h ([B, S, J], [B, T, J]). */
#include "module.h"

#include <string.h>

enum {
    F_X, F_MEANS, F_SPREAD, F_XLEN, F_YLEN, /* inputs */
    F_O1, F_O2, F_O3, F_O4,                 /* path, durations, indices, score, or
                                             * log_z, grad_x, grad_means, grad_spread */
    F_WORK, F_ERROR, F_COUNT
};

static const char *const hard_names[F_COUNT] = {
    "x", "means", "spread", "x_lengths", "y_lengths", "path", "durations", "indices", "score",
    "workspace", "error_word"};
static const char *const soft_names[F_COUNT] = {
    "x", "means", "spread", "x_lengths", "y_lengths", "log_z", "grad_x", "grad_means",
    "grad_spread", "workspace", "error_word"};

typedef struct fused_call {
    mas_py_array a[F_COUNT];
    mas_gauss_align_args args;
    mas_hard_outputs hard;
    mas_gauss_soft_outputs soft;
} fused_call;

static int check_vec(const mas_py_array *a, const char *name, int dtype, int64_t n) {
    return mas_py_array_check_kind(a, name, 1, dtype) || mas_py_array_check_vector(a, name, n);
}

/* The arrays of objs (F_COUNT of them, absent ones None), cross-checked. */
static int prepare(fused_call *c, PyObject *const *objs, int soft, int bst, long kind,
                   mas_py_place place) {
    const char *const *names = soft ? soft_names : hard_names;
    memset(c, 0, sizeof *c);
    for (int k = 0; k < F_COUNT; k++)
        if (mas_py_array_get(objs[k], names[k], &c->a[k])) return -1;
    for (int k = F_X; k <= F_YLEN; k++)
        if (!mas_py_array_present(&c->a[k])) {
            PyErr_Format(PyExc_ValueError, "%s is required", names[k]);
            return -1;
        }
    for (int k = 0; k < F_COUNT; k++)
        if (mas_py_array_present(&c->a[k]) &&
            mas_py_array_check_device(&c->a[k], names[k], place, c->a[F_X].device_id))
            return -1;
    for (int k = F_X; k <= F_SPREAD; k++)
        if (mas_py_array_check_kind(&c->a[k], names[k], 3, -1)) return -1;
    const int64_t B = c->a[F_X].shape[0], S = c->a[F_X].shape[1];
    const int64_t T = c->a[F_MEANS].shape[1];
    if (check_vec(&c->a[F_XLEN], names[F_XLEN], MAS_INT64, B) ||
        check_vec(&c->a[F_YLEN], names[F_YLEN], MAS_INT64, B))
        return -1;
    mas_py_array_tensor3(&c->a[F_X], 0, &c->args.x);
    mas_py_array_tensor3(&c->a[F_MEANS], 0, &c->args.params.means);
    mas_py_array_tensor3(&c->a[F_SPREAD], 0, &c->args.params.spread);
    c->args.params.spread_kind = (int32_t)kind;
    c->args.x_len = (const int64_t *)c->a[F_XLEN].data;
    c->args.y_len = (const int64_t *)c->a[F_YLEN].data;
    int acc = c->args.x.dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
    mas_py_array *o = &c->a[F_O1];
    if (!soft) {
        if (mas_py_array_present(&o[0])) {
            if (mas_py_array_check_kind(&o[0], "path", 3, -1)) return -1;
            mas_py_array_tensor3(&o[0], bst, &c->hard.path);
        }
        if (mas_py_array_present(&o[1])) {
            if (mas_py_array_check_kind(&o[1], "durations", 2, MAS_INT32) ||
                mas_py_array_check_inner_contiguous(&o[1], "durations"))
                return -1;
            if (o[1].shape[0] != B || o[1].shape[1] != T) {
                PyErr_SetString(PyExc_ValueError, "durations: expected shape [B, T]");
                return -1;
            }
            c->hard.durations = (int32_t *)o[1].data;
            c->hard.durations_stride = o[1].strides[0];
        }
        if (mas_py_array_present(&o[2])) {
            if (mas_py_array_check_kind(&o[2], "indices", 2, MAS_INT32) ||
                mas_py_array_check_inner_contiguous(&o[2], "indices"))
                return -1;
            if (o[2].shape[0] != B || o[2].shape[1] != S) {
                PyErr_SetString(PyExc_ValueError, "indices: expected shape [B, S]");
                return -1;
            }
            c->hard.indices = (int32_t *)o[2].data;
            c->hard.indices_stride = o[2].strides[0];
        }
        if (mas_py_array_present(&o[3])) {
            if (check_vec(&o[3], "score", acc, B)) return -1;
            c->hard.score = o[3].data;
        }
    } else {
        if (mas_py_array_present(&o[0])) {
            if (check_vec(&o[0], "log_z", acc, B)) return -1;
            c->soft.log_z = o[0].data;
        }
        mas_tensor3 *g[3] = {&c->soft.grad_x, &c->soft.grad_means, &c->soft.grad_spread};
        for (int k = 1; k < 4; k++)
            if (mas_py_array_present(&o[k])) {
                if (mas_py_array_check_kind(&o[k], soft_names[F_O1 + k], 3, acc)) return -1;
                mas_py_array_tensor3(&o[k], 0, g[k - 1]);
            }
    }
    mas_py_array *w = &c->a[F_WORK];
    if (mas_py_array_present(w) && (mas_py_array_check_kind(w, "workspace", 1, MAS_UINT8) ||
                                    mas_py_array_check_inner_contiguous(w, "workspace")))
        return -1;
    if (mas_py_array_present(&c->a[F_ERROR]) &&
        check_vec(&c->a[F_ERROR], "error_word", MAS_INT64, 1))
        return -1;
    return 0;
}

/* fused(soft, cuda, x, means, spread, spread_kind, x_len, y_len, o1, o2, o3,
 *       o4, bst, workspace, how, error_word[, precision]) -> (status, item)
 * o1..o4: path, durations, indices, score (hard) or log_z, grad_x,
 * grad_means, grad_spread (soft); None: not wanted. how: threads on the CPU,
 * the stream on CUDA. precision: a mas_precision (default 0). */
PyObject *mas_py_fused(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 16 && nargs != 17) {
        PyErr_SetString(PyExc_TypeError, "fused expects 16 or 17 arguments");
        return NULL;
    }
    int soft = PyObject_IsTrue(args[0]), cuda = PyObject_IsTrue(args[1]);
    int bst = PyObject_IsTrue(args[12]);
    long kind = PyLong_AsLong(args[5]), precision = nargs == 17 ? PyLong_AsLong(args[16]) : 0;
    if (soft < 0 || cuda < 0 || bst < 0 || PyErr_Occurred()) return NULL;
    int32_t threads = 0;
    void *stream = NULL;
    if (cuda) stream = args[14] == Py_None ? NULL : PyLong_AsVoidPtr(args[14]);
    else threads = (int32_t)PyLong_AsLong(args[14]);
    if (PyErr_Occurred()) return NULL;
    PyObject *objs[F_COUNT] = {args[2], args[3],  args[4],  args[6],  args[7], args[8],
                               args[9], args[10], args[11], args[13], args[15]};
    fused_call c;
    if (prepare(&c, objs, soft, bst, kind, cuda ? MAS_PY_CUDA : MAS_PY_HOST)) {
        mas_py_array_release_all(c.a, F_COUNT);
        return NULL;
    }
    c.args.precision = (int32_t)precision;
    void *work = c.a[F_WORK].data;
    size_t wsize = mas_py_array_present(&c.a[F_WORK]) ? (size_t)c.a[F_WORK].shape[0] : 0;
    uint64_t *word = (uint64_t *)c.a[F_ERROR].data;
    mas_error err = {0, 0, -1};
    mas_status st;
    Py_BEGIN_ALLOW_THREADS
    if (soft)
        st = cuda ? mas_forward_sum_gaussian_cuda(&c.args, &c.soft, work, wsize, stream, word)
                  : mas_forward_sum_gaussian_cpu(&c.args, &c.soft, work, wsize, threads, &err);
    else
        st = cuda ? mas_align_gaussian_cuda(&c.args, &c.hard, work, wsize, stream, word)
                  : mas_align_gaussian_cpu(&c.args, &c.hard, work, wsize, threads, &err);
    Py_END_ALLOW_THREADS
    mas_py_array_release_all(c.a, F_COUNT);
    return Py_BuildValue("(iL)", (int)st, (long long)(st == MAS_OK ? -1 : err.item));
}

/* fused_workspace_size(soft, cuda, x, means, spread, spread_kind, x_len,
 * y_len, threads[, minimum]) -> bytes (0 for a call the library would
 * reject); minimum true: the smallest a hard CPU call takes (long-form). */
PyObject *mas_py_fused_workspace_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 9 && nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "fused_workspace_size expects 9 or 10 arguments");
        return NULL;
    }
    int minimum = nargs == 10 ? PyObject_IsTrue(args[9]) : 0;
    if (minimum < 0) return NULL;
    int soft = PyObject_IsTrue(args[0]), cuda = PyObject_IsTrue(args[1]);
    long kind = PyLong_AsLong(args[5]), threads = PyLong_AsLong(args[8]);
    if (soft < 0 || cuda < 0 || PyErr_Occurred()) return NULL;
    PyObject *objs[F_COUNT] = {args[2], args[3], args[4], args[6], args[7], Py_None,
                               Py_None, Py_None, Py_None, Py_None, Py_None};
    fused_call c;
    if (prepare(&c, objs, soft, 0, kind, cuda ? MAS_PY_CUDA : MAS_PY_HOST)) {
        mas_py_array_release_all(c.a, F_COUNT);
        return NULL;
    }
    size_t n = soft ? (cuda ? mas_forward_sum_gaussian_cuda_workspace_size(&c.args)
                            : mas_forward_sum_gaussian_cpu_workspace_size(&c.args, (int32_t)threads))
                    : cuda ? mas_align_gaussian_cuda_workspace_size(&c.args)
                    : minimum ? mas_align_gaussian_cpu_min_workspace_size(&c.args, (int32_t)threads)
                              : mas_align_gaussian_cpu_workspace_size(&c.args, (int32_t)threads);
    mas_py_array_release_all(c.a, F_COUNT);
    return PyLong_FromSize_t(n);
}
