/* libmas._C: the CPython extension module over the C library. Array
 * handling lives in pytensor.c, one wrapper file per operation; this file
 * only holds the small queries and the method table. */
#include "module.h"
#include "api.h"

static PyObject *py_version(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return PyUnicode_FromString(mas_version_string());
}

static PyObject *py_has_cuda(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return PyBool_FromLong(mas_has_cuda());
}

static PyObject *py_status_string(PyObject *self, PyObject *arg) {
    (void)self;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(mas_status_string((mas_status)code));
}

/* decode_device_error(word) -> (status, item); word as a signed int64, the
 * way an int64 tensor holds it. */
static PyObject *py_decode_device_error(PyObject *self, PyObject *arg) {
    (void)self;
    long long word = PyLong_AsLongLong(arg);
    if (word == -1 && PyErr_Occurred()) return NULL;
    mas_error err;
    mas_decode_device_error((uint64_t)word, &err);
    return Py_BuildValue("(iL)", (int)err.status, (long long)err.item);
}

static PyMethodDef methods[] = {
    {"version", py_version, METH_NOARGS, "Version string of the linked C library."},
    {"has_cuda", py_has_cuda, METH_NOARGS, "True when the C library has its CUDA backend."},
    {"status_string", py_status_string, METH_O, "Sentence for a mas_status code."},
    {"decode_device_error", py_decode_device_error, METH_O,
     "Decode a device error word into (status, item)."},
    {"hard_cpu", (PyCFunction)(void (*)(void))mas_py_hard_cpu, METH_FASTCALL,
     "hard_cpu(value, bst, x_len, y_len, path, durations, indices, score, workspace, "
     "threads) -> (status, item)"},
    {"hard_cuda", (PyCFunction)(void (*)(void))mas_py_hard_cuda, METH_FASTCALL,
     "hard_cuda(value, bst, x_len, y_len, path, durations, indices, score, workspace, "
     "stream, error_word) -> (status, item)"},
    {"hard_cuda_mask", (PyCFunction)(void (*)(void))mas_py_hard_cuda_mask, METH_FASTCALL,
     "hard_cuda_mask(value, bst, mask, path, durations, indices, score, workspace, stream, "
     "error_word) -> (status, item): lengths counted from the mask on the device"},
    {"hard_cuda_mask_workspace_size",
     (PyCFunction)(void (*)(void))mas_py_hard_cuda_mask_workspace_size, METH_FASTCALL,
     "hard_cuda_mask_workspace_size(B, T, S, dtype) -> bytes"},
    {"hard_cpu_workspace_size", (PyCFunction)(void (*)(void))mas_py_hard_cpu_workspace_size,
     METH_FASTCALL, "hard_cpu_workspace_size(B, T, S, dtype, threads) -> bytes"},
    {"hard_cpu_min_workspace_size",
     (PyCFunction)(void (*)(void))mas_py_hard_cpu_min_workspace_size, METH_FASTCALL,
     "hard_cpu_min_workspace_size(B, T, S, dtype, threads) -> bytes (long-form minimum)"},
    {"hard_cuda_min_workspace_size",
     (PyCFunction)(void (*)(void))mas_py_hard_cuda_min_workspace_size, METH_FASTCALL,
     "hard_cuda_min_workspace_size(B, T, S, dtype) -> bytes (long-form minimum)"},
    {"hard_cuda_workspace_size", (PyCFunction)(void (*)(void))mas_py_hard_cuda_workspace_size,
     METH_FASTCALL, "hard_cuda_workspace_size(B, T, S, dtype) -> bytes"},
    {"baseline_glow", (PyCFunction)(void (*)(void))mas_py_baseline_glow, METH_FASTCALL,
     "baseline_glow(value, path, x_len, y_len): Glow-TTS's scalar loop, in place"},
    {"forward_sum", (PyCFunction)(void (*)(void))mas_py_forward_sum, METH_FASTCALL,
     "forward_sum(cuda, value, bst, x_len, y_len, log_z, posterior, workspace, how, "
     "error_word) -> (status, item)"},
    {"attention", (PyCFunction)(void (*)(void))mas_py_attention, METH_FASTCALL,
     "attention(cuda, backward, kind, logits, n_len, m_len, log_phi, grad_log_phi, "
     "grad_logits, workspace, how, error_word) -> (status, item)"},
    {"soft_workspace_size", (PyCFunction)(void (*)(void))mas_py_soft_workspace_size,
     METH_FASTCALL, "soft_workspace_size(op, cuda, B, T, S, dtype, threads) -> bytes"},
    {"gauss_coef", (PyCFunction)(void (*)(void))mas_py_gauss_coef, METH_FASTCALL,
     "gauss_coef(cuda, means, spread, spread_kind, log_weights, coef, how, error_word) "
     "-> (status, item)"},
    {"loglik", (PyCFunction)(void (*)(void))mas_py_loglik, METH_FASTCALL,
     "loglik(cuda, x, coef, offsets, n_states, n_len, s_len, out, best, flags, precision, "
     "mixture_size, workspace, how, error_word) -> (status, item)"},
    {"loglik_workspace_size", (PyCFunction)(void (*)(void))mas_py_loglik_workspace_size,
     METH_FASTCALL, "loglik_workspace_size(cuda, x, coef, offsets, n_states, out, best, "
     "flags, precision, threads) -> bytes"},
    {"topo", (PyCFunction)(void (*)(void))mas_py_topo, METH_FASTCALL,
     "Viterbi or forward-sum over a topology (mas.h section 7)."},
    {"topo_workspace_size", (PyCFunction)(void (*)(void))mas_py_topo_workspace_size,
     METH_FASTCALL, "Workspace bytes of topo."},
    {"fused", (PyCFunction)(void (*)(void))mas_py_fused, METH_FASTCALL,
     "fused(soft, cuda, x, means, spread, spread_kind, x_len, y_len, o1, o2, o3, o4, bst, "
     "workspace, how, error_word) -> (status, item)"},
    {"fused_workspace_size", (PyCFunction)(void (*)(void))mas_py_fused_workspace_size,
     METH_FASTCALL, "fused_workspace_size(soft, cuda, x, means, spread, spread_kind, x_len, "
     "y_len, threads[, minimum]) -> bytes"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "libmas._C",
                                        "libmas C library bindings (private).", -1, methods,
                                        NULL, NULL, NULL, NULL};

static const mas_py_api api_table = {
    .size = sizeof(mas_py_api),
    .hard_cpu_workspace_size = mas_hard_cpu_workspace_size,
    .hard_cpu = mas_hard_cpu,
    .hard_cuda_workspace_size = mas_hard_cuda_workspace_size,
    .hard_cuda = mas_hard_cuda,
    .attention_cpu_workspace_size = mas_attention_cpu_workspace_size,
    .attention_forward_cpu = mas_attention_forward_cpu,
    .attention_cuda_workspace_size = mas_attention_cuda_workspace_size,
    .attention_forward_cuda = mas_attention_forward_cuda,
    .hard_cuda_mask_workspace_size = mas_hard_cuda_mask_workspace_size,
    .hard_cuda_mask = mas_hard_cuda_mask,
    .forward_sum_cpu_workspace_size = mas_forward_sum_cpu_workspace_size,
    .forward_sum_cpu = mas_forward_sum_cpu,
    .forward_sum_cuda_workspace_size = mas_forward_sum_cuda_workspace_size,
    .forward_sum_cuda = mas_forward_sum_cuda,
    .attention_backward_cpu = mas_attention_backward_cpu,
    .attention_backward_cuda = mas_attention_backward_cuda,
    .align_gaussian_cpu_workspace_size = mas_align_gaussian_cpu_workspace_size,
    .align_gaussian_cpu = mas_align_gaussian_cpu,
    .align_gaussian_cuda_workspace_size = mas_align_gaussian_cuda_workspace_size,
    .align_gaussian_cuda = mas_align_gaussian_cuda,
};

static int add_int(PyObject *m, const char *name, long value) {
    return PyModule_AddIntConstant(m, name, value);
}

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (add_int(m, "FLOAT32", MAS_FLOAT32) || add_int(m, "FLOAT64", MAS_FLOAT64) ||
        add_int(m, "FLOAT16", MAS_FLOAT16) || add_int(m, "BFLOAT16", MAS_BFLOAT16) ||
        add_int(m, "INT32", MAS_INT32) || add_int(m, "INT64", MAS_INT64) ||
        add_int(m, "UINT8", MAS_UINT8) || add_int(m, "OK", MAS_OK) ||
        add_int(m, "ERR_NO_CUDA", MAS_ERR_NO_CUDA) ||
        add_int(m, "ERR_BAD_DTYPE", MAS_ERR_BAD_DTYPE) ||
        add_int(m, "ERR_BAD_SHAPE", MAS_ERR_BAD_SHAPE) ||
        add_int(m, "ERR_CUDA", MAS_ERR_CUDA) ||
        add_int(m, "DL_CPU", 1) || add_int(m, "DL_CUDA", 2) ||
        add_int(m, "ERR_BAD_MODEL", MAS_ERR_BAD_MODEL) ||
        add_int(m, "ERR_BAD_LENGTH", MAS_ERR_BAD_LENGTH)) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *api = PyCapsule_New((void *)&api_table, MAS_PY_API_CAPSULE, NULL);
    if (!api || PyModule_AddObject(m, "_api", api)) {
        Py_XDECREF(api);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
