// libmas._torch: eager PyTorch calls of align, maximum_path, forward_sum
// (and posterior) and the monotonic attentions' forward without the Python
// between them and the library (issue 9).
//
// A small call's host time was mostly Python: three torch.empty through
// PyTorch's argument parser, a DLPack capsule per array, the module's
// parsing of each. Here the outputs and the workspace come from at::empty
// (PyTorch's caching allocator, as before, so CUDA graph capture and stream
// ordering are unchanged) and the library is called with the tensors'
// pointers and strides.
//
// Each function handles the common case only and returns None for anything
// else (a subclass, another dtype or device for the lengths, a shape the
// library refuses); the caller then takes the general path, which words
// the error or converts the argument. A value-dependent CPU error comes back
// as (status, item) for the caller to raise with its own wording.
//
// Built only where PyTorch's headers are found at build time (CMake,
// MAS_TORCH_GLUE); the library's entry points come from libmas._C's capsule
// (api.h), so this module links PyTorch but not the library.
#include <Python.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>

extern "C" {
#include "api.h"
}

namespace {

const mas_py_api *api = nullptr;

// The exact Tensor type (no subclass: those go through the general path,
// where the registered op or the subclass's own dispatch sees them).
const at::Tensor *tensor_of(PyObject *obj) {
    if (obj == nullptr || !THPVariable_CheckExact(obj)) return nullptr;
    const at::Tensor &t = THPVariable_Unpack(obj);
    if (!t.defined() || t.is_neg() || t.is_conj()) return nullptr;
    return &t;
}

int value_code(const at::Tensor &t) {
    switch (t.scalar_type()) {
    case at::kFloat: return MAS_FLOAT32;
    case at::kDouble: return MAS_FLOAT64;
    case at::kHalf: return MAS_FLOAT16;
    case at::kBFloat16: return MAS_BFLOAT16;
    default: return -1;
    }
}

// Any dtype the library reads (a mask's), or -1.
int array_code(const at::Tensor &t) {
    switch (t.scalar_type()) {
    case at::kInt: return MAS_INT32;
    case at::kLong: return MAS_INT64;
    case at::kByte:
    case at::kBool: return MAS_UINT8;
    default: return value_code(t);
    }
}

// A [B] int64 lengths tensor on the value's device, contiguous; NULL data
// when obj is None and none_ok. Returns false when the general path must
// take the call.
bool lengths_of(PyObject *obj, const at::Tensor &value, bool none_ok, const int64_t **data) {
    *data = nullptr;
    if (obj == Py_None) return none_ok;
    const at::Tensor *t = tensor_of(obj);
    if (t == nullptr || t->scalar_type() != at::kLong || t->dim() != 1 ||
        t->size(0) != value.size(0) || t->device() != value.device() || !t->is_contiguous())
        return false;
    *data = t->const_data_ptr<int64_t>();
    return true;
}

// value [B, T, S] (bst false) or [B, S, T] (bst true) as the library's view.
mas_tensor3 view_of(const at::Tensor &t, int code, bool bst) {
    mas_tensor3 v{};
    v.data = const_cast<void *>(t.const_data_ptr());
    v.dtype = code;
    const int a = bst ? 2 : 1, b = bst ? 1 : 2;
    v.dim[0] = t.size(0);
    v.dim[1] = t.size(a);
    v.dim[2] = t.size(b);
    v.stride[0] = t.stride(0);
    v.stride[1] = t.stride(a);
    v.stride[2] = t.stride(b);
    return v;
}

at::Tensor workspace(size_t bytes, const at::Tensor &like) {
    return at::empty({static_cast<int64_t>(bytes > 0 ? bytes : 1)},
                     at::TensorOptions().dtype(at::kByte).device(like.device()));
}

struct Call {
    bool cuda;
    void *stream;
    uint64_t *word;
    int32_t threads;
};

// (threads, stream, word) arguments: the stream and error word as integers
// (addresses), used on CUDA only.
bool call_args(const at::Tensor &value, PyObject *threads, PyObject *stream, PyObject *word,
               Call *c) {
    c->cuda = value.is_cuda();
    if (!c->cuda && !value.device().is_cpu()) return false;
    long n = PyLong_AsLong(threads);
    c->stream = PyLong_AsVoidPtr(stream);
    c->word = static_cast<uint64_t *>(PyLong_AsVoidPtr(word));
    if (PyErr_Occurred()) return false;
    c->threads = static_cast<int32_t>(n);
    return true;
}

PyObject *none() {
    Py_INCREF(Py_None);
    return Py_None;
}

PyObject *none_or_error() {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;
}

// (outputs..., status, item): status and item are those of a CPU call (CUDA
// errors of values land in the error word).
PyObject *status_item(mas_status st, const mas_error &err) {
    return Py_BuildValue("(iL)", static_cast<int>(st),
                         static_cast<long long>(st == MAS_OK ? -1 : err.item));
}

// align(value, x_len, y_len, bst, threads, stream, word)
//   -> ((durations, indices, score), (status, item)) or None
PyObject *align(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "align expects 7 arguments");
        return nullptr;
    }
    const at::Tensor *value = tensor_of(args[0]);
    if (value == nullptr || value->dim() != 3) Py_RETURN_NONE;
    const int code = value_code(*value);
    const int bst = PyObject_IsTrue(args[3]);
    Call c;
    if (code < 0 || bst < 0 || !call_args(*value, args[4], args[5], args[6], &c))
        return none_or_error();
    const int64_t *x_len, *y_len;
    if (!lengths_of(args[1], *value, false, &x_len) || !lengths_of(args[2], *value, false, &y_len))
        Py_RETURN_NONE;
    const mas_tensor3 v = view_of(*value, code, bst != 0);
    const int64_t B = v.dim[0], T = v.dim[1], S = v.dim[2];
    if (B < 1 || T < 1 || S < 1) Py_RETURN_NONE;
    const mas_dtype dt = static_cast<mas_dtype>(code);
    size_t bytes = 0;
    at::Tensor durations, indices, score, work;
    try {
        bytes = c.cuda ? api->hard_cuda_workspace_size(B, T, S, dt)
                       : api->hard_cpu_workspace_size(B, T, S, dt, c.threads);
        const auto i32 = at::TensorOptions().dtype(at::kInt).device(value->device());
        durations = at::empty({B, T}, i32);
        indices = at::empty({B, S}, i32);
        score = at::empty({B}, i32.dtype(code == MAS_FLOAT64 ? at::kDouble : at::kFloat));
        work = workspace(bytes, *value);
    } catch (const std::exception &) {
        Py_RETURN_NONE; // out of memory and the like: raised by the general path's torch.empty
    }
    mas_hard_outputs out{};
    out.durations = durations.mutable_data_ptr<int32_t>();
    out.durations_stride = T;
    out.indices = indices.mutable_data_ptr<int32_t>();
    out.indices_stride = S;
    out.score = score.mutable_data_ptr();
    mas_error err = {0, 0, -1};
    mas_status st;
    void *w = work.mutable_data_ptr();
    Py_BEGIN_ALLOW_THREADS
    st = c.cuda ? api->hard_cuda(&v, x_len, y_len, &out, w, bytes, c.stream, c.word)
                : api->hard_cpu(&v, x_len, y_len, &out, w, bytes, c.threads, &err);
    Py_END_ALLOW_THREADS
    if (c.cuda && st != MAS_OK) Py_RETURN_NONE; // nothing enqueued: the general path words it
    return Py_BuildValue("((NNN)N)", THPVariable_Wrap(durations), THPVariable_Wrap(indices),
                         THPVariable_Wrap(score), status_item(st, err));
}

// maximum_path(value, mask, bst, threads, stream, word) -> (path, (status, item)) or None.
// The path has the value's dtype and shape. On CUDA the kernels count the
// lengths in the mask (mas_hard_cuda_mask); on the CPU they are counted here
// by the same rule (non-zero entries of the first frame's column and of the
// first token's row), as the general path does.
PyObject *maximum_path(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "maximum_path expects 6 arguments");
        return nullptr;
    }
    const at::Tensor *value = tensor_of(args[0]);
    const at::Tensor *mask = tensor_of(args[1]);
    if (value == nullptr || mask == nullptr || value->dim() != 3 ||
        mask->sizes() != value->sizes() || mask->device() != value->device())
        Py_RETURN_NONE;
    const int code = value_code(*value), mask_code = array_code(*mask);
    const int bst = PyObject_IsTrue(args[2]);
    Call c;
    if (code < 0 || mask_code < 0 || bst < 0 ||
        !call_args(*value, args[3], args[4], args[5], &c))
        return none_or_error();
    const mas_tensor3 v = view_of(*value, code, bst != 0);
    const int64_t B = v.dim[0], T = v.dim[1], S = v.dim[2];
    if (B < 1 || T < 1 || S < 1) Py_RETURN_NONE;
    const mas_dtype dt = static_cast<mas_dtype>(code);
    size_t bytes = 0;
    at::Tensor path, work, x_len, y_len;
    try {
        if (c.cuda) {
            bytes = api->hard_cuda_mask_workspace_size(B, T, S, dt);
        } else {
            bytes = api->hard_cpu_workspace_size(B, T, S, dt, c.threads);
            // first frame's column [B, T] and first token's row [B, S]
            x_len = at::count_nonzero(mask->select(bst ? 1 : 2, 0), at::IntArrayRef{1});
            y_len = at::count_nonzero(mask->select(bst ? 2 : 1, 0), at::IntArrayRef{1});
        }
        path = at::empty(value->sizes(), value->options());
        work = workspace(bytes, *value);
    } catch (const std::exception &) {
        Py_RETURN_NONE;
    }
    mas_hard_outputs out{};
    out.path = view_of(path, code, bst != 0);
    const mas_tensor3 m = view_of(*mask, mask_code, bst != 0);
    mas_error err = {0, 0, -1};
    mas_status st;
    void *w = work.mutable_data_ptr();
    Py_BEGIN_ALLOW_THREADS
    st = c.cuda ? api->hard_cuda_mask(&v, &m, &out, w, bytes, c.stream, c.word)
                : api->hard_cpu(&v, x_len.const_data_ptr<int64_t>(),
                                y_len.const_data_ptr<int64_t>(), &out, w, bytes, c.threads, &err);
    Py_END_ALLOW_THREADS
    if (c.cuda && st != MAS_OK) Py_RETURN_NONE;
    return Py_BuildValue("(NN)", THPVariable_Wrap(path), status_item(st, err));
}

// forward_sum(value, x_len, y_len, bst, want_log_z, want_post, threads, stream, word)
//   -> ((log_z or None, posterior or None), (status, item)) or None.
// The posterior has the value's shape (its layout), both the accumulator's
// dtype (float64 for float64 value, else float32).
PyObject *forward_sum(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "forward_sum expects 9 arguments");
        return nullptr;
    }
    const at::Tensor *value = tensor_of(args[0]);
    if (value == nullptr || value->dim() != 3) Py_RETURN_NONE;
    const int code = value_code(*value);
    const int bst = PyObject_IsTrue(args[3]), want_log_z = PyObject_IsTrue(args[4]),
              want_post = PyObject_IsTrue(args[5]);
    Call c;
    if (code < 0 || bst < 0 || want_log_z < 0 || want_post < 0 || (!want_log_z && !want_post) ||
        !call_args(*value, args[6], args[7], args[8], &c))
        return none_or_error();
    const int64_t *x_len, *y_len;
    if (!lengths_of(args[1], *value, false, &x_len) || !lengths_of(args[2], *value, false, &y_len))
        Py_RETURN_NONE;
    const mas_tensor3 v = view_of(*value, code, bst != 0);
    const int64_t B = v.dim[0], T = v.dim[1], S = v.dim[2];
    if (B < 1 || T < 1 || S < 1) Py_RETURN_NONE;
    const mas_dtype dt = static_cast<mas_dtype>(code);
    const int acc = code == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
    size_t bytes = 0;
    at::Tensor log_z, post, work;
    try {
        bytes = c.cuda ? api->forward_sum_cuda_workspace_size(B, T, S, dt)
                       : api->forward_sum_cpu_workspace_size(B, T, S, dt, c.threads);
        const auto o = at::TensorOptions()
                           .dtype(acc == MAS_FLOAT64 ? at::kDouble : at::kFloat)
                           .device(value->device());
        if (want_log_z) log_z = at::empty({B}, o);
        if (want_post) post = at::empty(value->sizes(), o);
        work = workspace(bytes, *value);
    } catch (const std::exception &) {
        Py_RETURN_NONE;
    }
    mas_tensor3 p{};
    if (want_post) p = view_of(post, acc, bst != 0);
    void *z = want_log_z ? log_z.mutable_data_ptr() : nullptr;
    mas_error err = {0, 0, -1};
    mas_status st;
    void *w = work.mutable_data_ptr();
    Py_BEGIN_ALLOW_THREADS
    st = c.cuda ? api->forward_sum_cuda(&v, x_len, y_len, z, &p, w, bytes, c.stream, c.word)
                : api->forward_sum_cpu(&v, x_len, y_len, z, &p, w, bytes, c.threads, &err);
    Py_END_ALLOW_THREADS
    if (c.cuda && st != MAS_OK) Py_RETURN_NONE;
    return Py_BuildValue("((NN)N)", want_log_z ? THPVariable_Wrap(log_z) : none(),
                         want_post ? THPVariable_Wrap(post) : none(), status_item(st, err));
}

// attention(kind, logits, n_len, m_len, threads, stream, word)
//   -> (log_phi, (status, item)) or None
PyObject *attention(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "attention expects 7 arguments");
        return nullptr;
    }
    const long kind = PyLong_AsLong(args[0]);
    const at::Tensor *logits = tensor_of(args[1]);
    if (logits == nullptr || logits->dim() != 3) return none_or_error();
    const int code = value_code(*logits);
    Call c;
    if (code < 0 || (kind != MAS_ATTENTION_ONE_TO_MANY && kind != MAS_ATTENTION_MANY_TO_MANY) ||
        !call_args(*logits, args[4], args[5], args[6], &c))
        return none_or_error();
    const int64_t *n_len, *m_len;
    if (!lengths_of(args[2], *logits, true, &n_len) || !lengths_of(args[3], *logits, true, &m_len))
        Py_RETURN_NONE;
    const mas_tensor3 x = view_of(*logits, code, false);
    const int64_t B = x.dim[0], N = x.dim[1], M = x.dim[2];
    if (B < 1 || N < 1 || M < 1) Py_RETURN_NONE;
    const mas_dtype dt = static_cast<mas_dtype>(code);
    const auto k = static_cast<mas_attention_kind>(kind);
    size_t bytes = 0;
    at::Tensor log_phi, work;
    try {
        bytes = c.cuda ? api->attention_cuda_workspace_size(B, N, M, dt)
                       : api->attention_cpu_workspace_size(B, N, M, dt, c.threads);
        log_phi = at::empty({B, N, M}, at::TensorOptions()
                                           .dtype(code == MAS_FLOAT64 ? at::kDouble : at::kFloat)
                                           .device(logits->device()));
        work = workspace(bytes, *logits);
    } catch (const std::exception &) {
        Py_RETURN_NONE; // out of memory and the like: raised by the general path's torch.empty
    }
    const mas_tensor3 out = view_of(log_phi, code == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32,
                                    false);
    mas_error err = {0, 0, -1};
    mas_status st;
    void *w = work.mutable_data_ptr();
    Py_BEGIN_ALLOW_THREADS
    st = c.cuda ? api->attention_forward_cuda(k, &x, n_len, m_len, &out, w, bytes, c.stream,
                                              c.word)
                : api->attention_forward_cpu(k, &x, n_len, m_len, &out, w, bytes, c.threads,
                                             &err);
    Py_END_ALLOW_THREADS
    if (c.cuda && st != MAS_OK) Py_RETURN_NONE;
    return Py_BuildValue("(NN)", THPVariable_Wrap(log_phi), status_item(st, err));
}

PyMethodDef methods[] = {
    {"align", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(align)),
     METH_FASTCALL, "align(value, x_len, y_len, bst, threads, stream, word)"},
    {"maximum_path",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(maximum_path)), METH_FASTCALL,
     "maximum_path(value, mask, bst, threads, stream, word)"},
    {"forward_sum",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(forward_sum)), METH_FASTCALL,
     "forward_sum(value, x_len, y_len, bst, want_log_z, want_post, threads, stream, word)"},
    {"attention", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(attention)),
     METH_FASTCALL, "attention(kind, logits, n_len, m_len, threads, stream, word)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "libmas._torch",
                          "PyTorch glue of libmas (private).", -1, methods,
                          nullptr, nullptr, nullptr, nullptr};

} // namespace

PyMODINIT_FUNC PyInit__torch(void) {
    api = static_cast<const mas_py_api *>(PyCapsule_Import(MAS_PY_API_CAPSULE, 0));
    if (api == nullptr) return nullptr;
    if (api->size < sizeof(mas_py_api)) {
        PyErr_SetString(PyExc_ImportError, "libmas._C is older than libmas._torch");
        return nullptr;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == nullptr) return nullptr;
    if (PyModule_AddStringConstant(m, "torch_version", MAS_TORCH_VERSION) != 0) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
