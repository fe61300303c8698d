/* Wrappers of the topology functions (mas.h section 7) for libmas.topology:
 * the topology from a tuple, the arrays checked against each other (a wrong
 * shape would make the library address memory outside them), then the CPU
 * or CUDA entry point. Returns (status, item); Python words the errors. */
#include "module.h"

#include <math.h>
#include <string.h>

/* (k, has_blank, blank, stay or None, advance or None, blank_stay,
 *  blank_advance, skip_penalty); stay/advance go into the caller's
 * buffers of 8 doubles. */
static int parse_topology(PyObject *obj, mas_topology *t, double *stay, double *adv) {
    memset(t, 0, sizeof *t);
    PyObject *st = NULL, *ad = NULL;
    int k, has_blank, blank;
    if (!PyArg_ParseTuple(obj, "iiiOOddd", &k, &has_blank, &blank, &st, &ad, &t->blank_stay,
                          &t->blank_advance, &t->skip_penalty))
        return -1;
    if (k < 1 || k > 8) {
        PyErr_SetString(PyExc_ValueError, "states_per_token must be in [1, 8]");
        return -1;
    }
    t->states_per_token = k;
    t->has_blank = has_blank;
    t->blank = blank;
    PyObject *src[2] = {st, ad};
    double *dst[2] = {stay, adv};
    for (int q = 0; q < 2; q++) {
        if (src[q] == Py_None) continue;
        if (!PyTuple_Check(src[q]) || PyTuple_GET_SIZE(src[q]) != k) {
            PyErr_SetString(PyExc_ValueError, "stay/advance must be tuples of k floats");
            return -1;
        }
        for (int j = 0; j < k; j++) {
            dst[q][j] = PyFloat_AsDouble(PyTuple_GET_ITEM(src[q], j));
            if (PyErr_Occurred()) return -1;
        }
        if (q == 0) t->stay = stay;
        else t->advance = adv;
    }
    return 0;
}

/* topo_workspace_size(cuda, topology, gathered, B, dim1, dim2, dtype, tokens,
 *                     threads, which) -> bytes; which: 0 hard (unbounded), 1
 * soft, 2 the smallest a hard call accepts (long-form). */
PyObject *mas_py_topo_workspace_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "topo_workspace_size expects 10 arguments");
        return NULL;
    }
    double stay[8], adv[8];
    mas_topo_args a;
    memset(&a, 0, sizeof a);
    int cuda = PyObject_IsTrue(args[0]);
    if (cuda < 0 || parse_topology(args[1], &a.topology, stay, adv)) return NULL;
    a.gathered = PyObject_IsTrue(args[2]);
    long long B = PyLong_AsLongLong(args[3]), d1 = PyLong_AsLongLong(args[4]),
              d2 = PyLong_AsLongLong(args[5]), tokens = PyLong_AsLongLong(args[7]);
    long dtype = PyLong_AsLong(args[6]), threads = PyLong_AsLong(args[8]);
    long which = PyLong_AsLong(args[9]);
    if (PyErr_Occurred()) return NULL;
    int soft = which == 1;
    static const int32_t dummy_label = 0;
    static const int64_t dummy_len = 1;
    char dummy_data = 0;
    mas_tensor3 e = {&dummy_data, (int32_t)dtype, 0, {B, d1, d2}, {0, 0, 0}};
    a.emissions = e;
    a.labels = &dummy_label;
    a.tokens = tokens;
    a.token_len = &dummy_len;
    a.frame_len = &dummy_len;
    size_t n = cuda ? (which == 2 ? mas_topo_cuda_min_workspace_size(&a)
                                  : mas_topo_cuda_workspace_size(&a, soft))
               : which == 2 ? mas_topo_cpu_min_workspace_size(&a, (int32_t)threads)
                            : mas_topo_cpu_workspace_size(&a, soft, (int32_t)threads);
    return PyLong_FromSize_t(n);
}

enum {
    T_EMIT, T_LABELS, T_LLEN, T_SLEN, T_IDS, T_FLAB, T_SPANS, T_TSC, T_SCORE, T_LOGZ, T_POST,
    T_GRAD, T_WORK, T_ERROR, T_COUNT
};

static int check_out(const mas_py_array *a, const char *what, int ndim, int32_t dtype,
                     const int64_t *shape) {
    if (!mas_py_array_present(a)) return 0;
    if (mas_py_array_check_kind(a, what, ndim, dtype)) return -1;
    for (int q = 0; q < ndim; q++)
        if (a->shape[q] != shape[q]) {
            PyErr_Format(PyExc_ValueError, "%s: wrong shape", what);
            return -1;
        }
    if (ndim < 3 && mas_py_array_check_inner_contiguous(a, what)) return -1;
    return 0;
}

/* topo(cuda, soft, topology, gathered, emissions, labels, token_len,
 *      frame_len, tokens, state_ids, frame_labels, token_spans, token_scores,
 *      score, log_z, posterior, grad, workspace, how, error_word)
 * -> (status, item). Arrays: emissions [B, n or S', S' or V]; labels int32
 * [B, tokens*k] or None; lengths int64 [B]; outputs or None. */
PyObject *mas_py_topo(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char *const names[T_COUNT] = {
        "emissions", "labels", "token_lengths", "frame_lengths", "state_ids", "frame_labels",
        "token_spans", "token_scores", "score", "log_z", "posterior", "grad", "workspace",
        "error_word"};
    if (nargs != 20) {
        PyErr_SetString(PyExc_TypeError, "topo expects 20 arguments");
        return NULL;
    }
    int cuda = PyObject_IsTrue(args[0]), soft = PyObject_IsTrue(args[1]);
    double stay[8], adv[8];
    mas_topo_args ta;
    memset(&ta, 0, sizeof ta);
    if (cuda < 0 || soft < 0 || parse_topology(args[2], &ta.topology, stay, adv)) return NULL;
    ta.gathered = PyObject_IsTrue(args[3]);
    long long tokens = PyLong_AsLongLong(args[8]);
    int32_t threads = 0;
    void *stream = NULL;
    if (cuda) {
        if (args[18] != Py_None) stream = PyLong_AsVoidPtr(args[18]);
    } else {
        threads = (int32_t)PyLong_AsLong(args[18]);
    }
    if (PyErr_Occurred()) return NULL;
    PyObject *objs[T_COUNT] = {args[4],  args[5],  args[6],  args[7],  args[9],
                               args[10], args[11], args[12], args[13], args[14],
                               args[15], args[16], args[17], args[19]};
    mas_py_array a[T_COUNT];
    memset(a, 0, sizeof a);
    int bad = 0;
    for (int q = 0; q < T_COUNT && !bad; q++) bad = mas_py_array_get(objs[q], names[q], &a[q]);
    mas_py_place place = cuda ? MAS_PY_CUDA : MAS_PY_HOST;
    for (int q = 0; q < T_COUNT && !bad; q++)
        if (mas_py_array_present(&a[q]))
            bad = mas_py_array_check_device(&a[q], names[q], place, a[T_EMIT].device_id);
    if (!bad && !mas_py_array_present(&a[T_EMIT])) {
        PyErr_SetString(PyExc_ValueError, "emissions is required");
        bad = 1;
    }
    if (!bad) bad = mas_py_array_check_kind(&a[T_EMIT], "emissions", 3, -1);
    int64_t B = bad ? 0 : a[T_EMIT].shape[0];
    int64_t frames = bad ? 0 : a[T_EMIT].shape[ta.gathered ? 1 : 2];
    int64_t k = ta.topology.states_per_token;
    int32_t acc = !bad && a[T_EMIT].dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
    int64_t n_max = mas_topology_states(&ta.topology, tokens);
    if (!bad && mas_py_array_present(&a[T_LABELS])) {
        int64_t sh[2] = {B, tokens * k};
        bad = check_out(&a[T_LABELS], "labels", 2, MAS_INT32, sh);
    }
    for (int q = T_LLEN; q <= T_SLEN && !bad; q++)
        bad = !mas_py_array_present(&a[q]) ||
              mas_py_array_check_kind(&a[q], names[q], 1, MAS_INT64) ||
              mas_py_array_check_vector(&a[q], names[q], B);
    if (!bad && !PyErr_Occurred()) {
        int64_t s_ids[2] = {B, frames}, s_spans[3] = {B, tokens, 2}, s_tsc[2] = {B, tokens},
                s_b[1] = {B}, s_post[3] = {B, n_max, frames};
        bad = check_out(&a[T_IDS], "state_ids", 2, MAS_INT32, s_ids) ||
              check_out(&a[T_FLAB], "frame_labels", 2, MAS_INT32, s_ids) ||
              check_out(&a[T_SPANS], "token_spans", 3, MAS_INT32, s_spans) ||
              check_out(&a[T_TSC], "token_scores", 2, acc, s_tsc) ||
              check_out(&a[T_SCORE], "score", 1, acc, s_b) ||
              check_out(&a[T_LOGZ], "log_z", 1, acc, s_b) ||
              check_out(&a[T_POST], "posterior", 3, acc, s_post) ||
              check_out(&a[T_GRAD], "grad", 3, acc, a[T_EMIT].shape);
        /* spans are addressed as b*stride + 2i + {0,1} */
        if (!bad && mas_py_array_present(&a[T_SPANS]) &&
            (a[T_SPANS].strides[2] != 1 || (tokens > 1 && a[T_SPANS].strides[1] != 2))) {
            PyErr_SetString(PyExc_ValueError, "token_spans must be contiguous per item");
            bad = 1;
        }
        for (int q = T_SCORE; q <= T_LOGZ && !bad; q++)
            if (mas_py_array_present(&a[q]))
                bad = mas_py_array_check_vector(&a[q], names[q], B);
    }
    if (!bad && (!mas_py_array_present(&a[T_WORK]) ||
                 mas_py_array_check_kind(&a[T_WORK], "workspace", 1, MAS_UINT8))) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "workspace is required");
        bad = 1;
    }
    if (bad || PyErr_Occurred()) {
        mas_py_array_release_all(a, T_COUNT);
        return NULL;
    }
    mas_py_array_tensor3(&a[T_EMIT], 0, &ta.emissions);
    ta.labels = (const int32_t *)a[T_LABELS].data;
    ta.labels_stride = a[T_LABELS].strides[0];
    ta.tokens = tokens;
    ta.token_len = (const int64_t *)a[T_LLEN].data;
    ta.frame_len = (const int64_t *)a[T_SLEN].data;
    size_t wsize = (size_t)a[T_WORK].shape[0];
    mas_error err = {0, 0, -1};
    mas_status st;
    if (!soft) {
        mas_topo_hard_outputs o;
        memset(&o, 0, sizeof o);
        o.state_ids = (int32_t *)a[T_IDS].data;
        o.state_ids_stride = a[T_IDS].strides[0];
        o.frame_labels = (int32_t *)a[T_FLAB].data;
        o.frame_labels_stride = a[T_FLAB].strides[0];
        o.token_spans = (int32_t *)a[T_SPANS].data;
        o.token_spans_stride = a[T_SPANS].strides[0];
        o.token_scores = a[T_TSC].data;
        o.token_scores_stride = a[T_TSC].strides[0];
        o.score = a[T_SCORE].data;
        Py_BEGIN_ALLOW_THREADS
        if (cuda)
            st = mas_viterbi_cuda(&ta, &o, a[T_WORK].data, wsize, stream,
                                  (uint64_t *)a[T_ERROR].data);
        else
            st = mas_viterbi_cpu(&ta, &o, a[T_WORK].data, wsize, threads, &err);
        Py_END_ALLOW_THREADS
    } else {
        mas_topo_soft_outputs o;
        memset(&o, 0, sizeof o);
        o.log_z = a[T_LOGZ].data;
        if (mas_py_array_present(&a[T_POST])) mas_py_array_tensor3(&a[T_POST], 0, &o.posterior);
        if (mas_py_array_present(&a[T_GRAD])) mas_py_array_tensor3(&a[T_GRAD], 0, &o.grad);
        Py_BEGIN_ALLOW_THREADS
        if (cuda)
            st = mas_topo_forward_sum_cuda(&ta, &o, a[T_WORK].data, wsize, stream,
                                           (uint64_t *)a[T_ERROR].data);
        else
            st = mas_topo_forward_sum_cpu(&ta, &o, a[T_WORK].data, wsize, threads, &err);
        Py_END_ALLOW_THREADS
    }
    mas_py_array_release_all(a, T_COUNT);
    return Py_BuildValue("(iL)", (int)st, (long long)(st == MAS_OK ? -1 : err.item));
}
