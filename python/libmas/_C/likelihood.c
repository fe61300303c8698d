/* Wrappers of the likelihood functions (mas.h section 6) for
 * libmas.likelihood: check that the arrays agree with each other where a
 * disagreement would make the library address memory outside them (the
 * library checks the rest and answers a status), then call the CPU or the
 * CUDA entry point. Each returns (status, item); Python words the errors.
 *
 * Every array is rank 3 and is viewed as it is (Python passes transposed
 * views where an axis order differs, e.g. Glow-TTS's [B, D, T] as [B, T, D]).
 * The last two arguments are `how` (threads on the CPU, the stream on CUDA)
 * and the error word (None on the CPU). */
#include "module.h"

#include <string.h>

static int lk_parse_place(PyObject *obj, mas_py_place *place) {
    int cuda = PyObject_IsTrue(obj);
    if (cuda < 0) return -1;
    *place = cuda ? MAS_PY_CUDA : MAS_PY_HOST;
    return 0;
}

static int lk_parse_how(PyObject *obj, mas_py_place place, int32_t *threads, void **stream) {
    *threads = 0;
    *stream = NULL;
    if (place == MAS_PY_CUDA) {
        if (obj != Py_None) *stream = PyLong_AsVoidPtr(obj);
    } else {
        *threads = (int32_t)PyLong_AsLong(obj);
    }
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *lk_status(mas_status st, const mas_error *err) {
    return Py_BuildValue("(iL)", (int)st, (long long)(st == MAS_OK ? -1 : err->item));
}

/* Gets every array, each present one on the place of the first, rank 3
 * unless listed in `vectors` (bit k: array k is a vector). */
static int lk_get_all(PyObject *const *objs, const char *const *names, int count,
                      mas_py_array *a, mas_py_place place, unsigned vectors) {
    memset(a, 0, sizeof *a * (size_t)count);
    for (int k = 0; k < count; k++)
        if (mas_py_array_get(objs[k], names[k], &a[k])) return -1;
    if (!mas_py_array_present(&a[0])) {
        PyErr_Format(PyExc_ValueError, "%s is required", names[0]);
        return -1;
    }
    for (int k = 0; k < count; k++) {
        if (!mas_py_array_present(&a[k])) continue;
        if (mas_py_array_check_device(&a[k], names[k], place, a[0].device_id)) return -1;
        if (!((vectors >> k) & 1u) && mas_py_array_check_kind(&a[k], names[k], 3, -1)) return -1;
    }
    return 0;
}

static void lk_view(const mas_py_array *a, mas_tensor3 *t) {
    if (mas_py_array_present(a)) mas_py_array_tensor3(a, 0, t);
    else memset(t, 0, sizeof *t);
}

static int lk_check_work(mas_py_array *work, mas_py_array *word) {
    if (!mas_py_array_present(work) || mas_py_array_check_kind(work, "workspace", 1, MAS_UINT8) ||
        mas_py_array_check_inner_contiguous(work, "workspace")) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "workspace is required");
        return -1;
    }
    if (mas_py_array_present(word) &&
        (mas_py_array_check_kind(word, "error_word", 1, MAS_INT64) ||
         mas_py_array_check_vector(word, "error_word", 1)))
        return -1;
    return 0;
}

enum { C_MEANS, C_SPREAD, C_LOGW, C_COEF, C_ERROR, C_COUNT };

/* gauss_coef(cuda, means, spread, spread_kind, log_weights, coef, how,
 *            error_word) -> (status, item) */
PyObject *mas_py_gauss_coef(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char *const names[C_COUNT] = {"means", "spread", "log_weights", "coef",
                                               "error_word"};
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "gauss_coef expects 8 arguments");
        return NULL;
    }
    mas_py_place place;
    int32_t threads;
    void *stream;
    long kind = PyLong_AsLong(args[3]);
    if ((kind == -1 && PyErr_Occurred()) || lk_parse_place(args[0], &place) ||
        lk_parse_how(args[6], place, &threads, &stream))
        return NULL;
    PyObject *objs[C_COUNT] = {args[1], args[2], args[4], args[5], args[7]};
    mas_py_array a[C_COUNT];
    int bad = lk_get_all(objs, names, C_COUNT, a, place, 1u << C_ERROR);
    if (!bad && (!mas_py_array_present(&a[C_SPREAD]) || !mas_py_array_present(&a[C_COEF]))) {
        PyErr_SetString(PyExc_ValueError, "spread and coef are required");
        bad = 1;
    }
    if (!bad && mas_py_array_present(&a[C_ERROR]))
        bad = mas_py_array_check_kind(&a[C_ERROR], "error_word", 1, MAS_INT64) ||
              mas_py_array_check_vector(&a[C_ERROR], "error_word", 1);
    if (bad) {
        mas_py_array_release_all(a, C_COUNT);
        return NULL;
    }
    mas_gauss_params p;
    memset(&p, 0, sizeof p);
    lk_view(&a[C_MEANS], &p.means);
    lk_view(&a[C_SPREAD], &p.spread);
    lk_view(&a[C_LOGW], &p.log_weights);
    p.spread_kind = (int32_t)kind;
    mas_tensor3 coef;
    lk_view(&a[C_COEF], &coef);
    uint64_t *word = (uint64_t *)a[C_ERROR].data;
    mas_error err = {0, 0, -1};
    mas_status st;
    Py_BEGIN_ALLOW_THREADS
    if (place == MAS_PY_CUDA) st = mas_gauss_coef_cuda(&p, &coef, stream, word);
    else st = mas_gauss_coef_cpu(&p, &coef, threads, &err);
    Py_END_ALLOW_THREADS
    mas_py_array_release_all(a, C_COUNT);
    return lk_status(st, &err);
}

enum { L_X, L_COEF, L_OFFSETS, L_NLEN, L_SLEN, L_OUT, L_BEST, L_WORK, L_ERROR, L_COUNT };

static const char *const l_names[L_COUNT] = {"x", "coef", "offsets", "n_lengths", "s_lengths",
                                             "out", "best", "workspace", "error_word"};

/* Arrays and scalars of a loglik call into args; the vectors' sizes are
 * checked here (the library reads offsets[0..n_states] and lengths[0..B)). */
static int lk_args(mas_py_array *a, int64_t n_states, long flags, long precision,
                   long long mixture_size, mas_loglik_args *out) {
    memset(out, 0, sizeof *out);
    int64_t batch = a[L_X].shape[0];
    if (mas_py_array_present(&a[L_OFFSETS]) &&
        (mas_py_array_check_kind(&a[L_OFFSETS], "offsets", 1, MAS_INT64) ||
         mas_py_array_check_vector(&a[L_OFFSETS], "offsets", n_states + 1)))
        return -1;
    for (int k = L_NLEN; k <= L_SLEN; k++)
        if (mas_py_array_present(&a[k]) &&
            (mas_py_array_check_kind(&a[k], l_names[k], 1, MAS_INT64) ||
             mas_py_array_check_vector(&a[k], l_names[k], batch)))
            return -1;
    if (!mas_py_array_present(&a[L_COEF]) || !mas_py_array_present(&a[L_OUT])) {
        PyErr_SetString(PyExc_ValueError, "coef and out are required");
        return -1;
    }
    lk_view(&a[L_X], &out->x);
    lk_view(&a[L_COEF], &out->coef);
    lk_view(&a[L_OUT], &out->out);
    lk_view(&a[L_BEST], &out->best);
    out->offsets = (const int64_t *)a[L_OFFSETS].data;
    out->n_states = n_states;
    out->n_len = (const int64_t *)a[L_NLEN].data;
    out->s_len = (const int64_t *)a[L_SLEN].data;
    out->flags = (uint32_t)flags;
    out->precision = (int32_t)precision;
    out->mixture_size = (int64_t)mixture_size;
    return 0;
}

/* loglik(cuda, x, coef, offsets, n_states, n_len, s_len, out, best, flags,
 *        precision, mixture_size, workspace, how, error_word) -> (status, item) */
PyObject *mas_py_loglik(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "loglik expects 15 arguments");
        return NULL;
    }
    mas_py_place place;
    int32_t threads;
    void *stream;
    long long n_states = PyLong_AsLongLong(args[4]);
    long flags = PyLong_AsLong(args[9]), precision = PyLong_AsLong(args[10]);
    long long mixture_size = PyLong_AsLongLong(args[11]);
    if (PyErr_Occurred() || lk_parse_place(args[0], &place) ||
        lk_parse_how(args[13], place, &threads, &stream))
        return NULL;
    PyObject *objs[L_COUNT] = {args[1], args[2], args[3], args[5], args[6],
                               args[7], args[8], args[12], args[14]};
    mas_py_array a[L_COUNT];
    unsigned vectors = (1u << L_OFFSETS) | (1u << L_NLEN) | (1u << L_SLEN) | (1u << L_WORK) |
                       (1u << L_ERROR);
    mas_loglik_args la;
    int bad = lk_get_all(objs, l_names, L_COUNT, a, place, vectors);
    if (!bad) bad = lk_check_work(&a[L_WORK], &a[L_ERROR]);
    if (!bad) bad = lk_args(a, (int64_t)n_states, flags, precision, mixture_size, &la);
    if (bad) {
        mas_py_array_release_all(a, L_COUNT);
        return NULL;
    }
    size_t wsize = (size_t)a[L_WORK].shape[0];
    void *work = a[L_WORK].data;
    uint64_t *word = (uint64_t *)a[L_ERROR].data;
    mas_error err = {0, 0, -1};
    mas_status st;
    Py_BEGIN_ALLOW_THREADS
    if (place == MAS_PY_CUDA) st = mas_loglik_cuda(&la, work, wsize, stream, word);
    else st = mas_loglik_cpu(&la, work, wsize, threads, &err);
    Py_END_ALLOW_THREADS
    mas_py_array_release_all(a, L_COUNT);
    return lk_status(st, &err);
}

/* loglik_workspace_size(cuda, x, coef, offsets, n_states, out, best, flags,
 *                       precision, threads) -> bytes (0 for a call the
 * library would reject; the call itself then reports why). */
PyObject *mas_py_loglik_workspace_size(PyObject *self, PyObject *const *args,
                                       Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "loglik_workspace_size expects 10 arguments");
        return NULL;
    }
    mas_py_place place;
    long long n_states = PyLong_AsLongLong(args[4]);
    long flags = PyLong_AsLong(args[7]), precision = PyLong_AsLong(args[8]);
    long threads = PyLong_AsLong(args[9]);
    if (PyErr_Occurred() || lk_parse_place(args[0], &place)) return NULL;
    PyObject *objs[L_COUNT] = {args[1], args[2], args[3], Py_None, Py_None,
                               args[5], args[6], Py_None, Py_None};
    mas_py_array a[L_COUNT];
    unsigned vectors = (1u << L_OFFSETS) | (1u << L_NLEN) | (1u << L_SLEN) | (1u << L_WORK) |
                       (1u << L_ERROR);
    mas_loglik_args la;
    int bad = lk_get_all(objs, l_names, L_COUNT, a, place, vectors);
    if (!bad) bad = lk_args(a, (int64_t)n_states, flags, precision, 0, &la);
    if (bad) {
        mas_py_array_release_all(a, L_COUNT);
        return NULL;
    }
    size_t n = place == MAS_PY_CUDA ? mas_loglik_cuda_workspace_size(&la)
                                    : mas_loglik_cpu_workspace_size(&la, (int32_t)threads);
    mas_py_array_release_all(a, L_COUNT);
    return PyLong_FromSize_t(n);
}
