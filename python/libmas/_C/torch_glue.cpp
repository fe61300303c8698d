// libmas._torch: eager PyTorch calls of align, maximum_path, forward_sum
// (and posterior), the monotonic attentions (forward and backward) and
// align_gaussian without the Python between them and the library (issue 9).
//
// A small call's host time was mostly Python: three torch.empty through
// PyTorch's argument parser, a DLPack capsule per array, the module's
// parsing of each. Here the outputs and the workspace come from at::empty
// (PyTorch's caching allocator, as before, so CUDA graph capture and stream
// ordering are unchanged) and the library is called with the tensors'
// pointers and strides. align's three outputs share one allocation, and
// the hard CUDA calls try without a workspace first (the one-block kernel
// reads none): at training shapes a call's host time was mostly its
// allocations (results/calls-gpu-h100.md, session 8).
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

// A call's small outputs come from one allocation: parts of a byte buffer,
// each a tensor of its own on the buffer's storage (a TensorImpl made here,
// without the dispatcher). On a slow host an at::empty cost ~2.5 us and a
// narrow + view more than that, a part ~1 us (results/calls-gpu-h100.md,
// session 8). The parts share their storage as torch.split's pieces do.
int64_t round256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

at::Tensor part(const at::Tensor &buf, int64_t byte_offset, at::ScalarType dtype,
                at::IntArrayRef sizes) {
    auto impl = c10::make_intrusive<c10::TensorImpl>(
        c10::Storage(buf.storage()), buf.key_set(), caffe2::TypeMeta::fromScalarType(dtype));
    impl->set_storage_offset(byte_offset / static_cast<int64_t>(c10::elementSize(dtype)));
    impl->set_sizes_contiguous(sizes);
    return at::Tensor(std::move(impl));
}

at::Tensor bytes_like(int64_t n, const at::Tensor &like) {
    return at::empty({n}, at::TensorOptions().dtype(at::kByte).device(like.device()));
}

at::Tensor workspace(size_t bytes, const at::Tensor &like) {
    return bytes_like(static_cast<int64_t>(bytes > 0 ? bytes : 1), like);
}

at::TensorOptions accumulator(int code, const at::Tensor &like) {
    return at::TensorOptions()
        .dtype(code == MAS_FLOAT64 ? at::kDouble : at::kFloat)
        .device(like.device());
}

// What every function starts from: the value as the library's [B, T, S]
// view, where it runs, with what.
struct Call {
    const at::Tensor *value;
    int code;          // the value's mas_dtype
    mas_tensor3 view;  // dims B, T, S, all >= 1
    bool cuda;
    void *stream;      // CUDA: the caller's current stream
    uint64_t *word;    // CUDA: the error word
    int32_t threads;   // CPU
};

// value, its layout and the (threads, stream, word) arguments (the last two
// integers: addresses). False when the general path must take the call, or
// with a Python error set.
bool call_of(PyObject *value, int bst, PyObject *threads, PyObject *stream, PyObject *word,
             Call *c) {
    c->value = tensor_of(value);
    if (c->value == nullptr || c->value->dim() != 3 || bst < 0) return false;
    c->code = value_code(*c->value);
    c->cuda = c->value->is_cuda();
    if (c->code < 0 || (!c->cuda && !c->value->device().is_cpu())) return false;
    const long n = PyLong_AsLong(threads);
    c->stream = PyLong_AsVoidPtr(stream);
    c->word = static_cast<uint64_t *>(PyLong_AsVoidPtr(word));
    if (PyErr_Occurred()) return false;
    c->threads = static_cast<int32_t>(n);
    c->view = view_of(*c->value, c->code, bst != 0);
    return c->view.dim[0] >= 1 && c->view.dim[1] >= 1 && c->view.dim[2] >= 1;
}

// call_of with rest = (threads, stream, word), then both lengths (none_ok:
// either may be None).
bool call_with_lengths(PyObject *value, int bst, PyObject *x, PyObject *y, bool none_ok,
                       PyObject *const *rest, Call *c, const int64_t **x_len,
                       const int64_t **y_len) {
    return call_of(value, bst, rest[0], rest[1], rest[2], c) &&
           lengths_of(x, *c->value, none_ok, x_len) && lengths_of(y, *c->value, none_ok, y_len);
}

// Runs alloc (at::empty calls); false when it threw (out of memory and the
// like: the general path's torch.empty then raises PyTorch's own error).
template <class Alloc> bool allocated(Alloc &&alloc) {
    try {
        alloc();
        return true;
    } catch (const std::exception &) {
        return false;
    }
}

// The library call, without the GIL (a CPU call may run for long).
template <class Run> mas_status without_gil(Run &&run) {
    mas_status st;
    Py_BEGIN_ALLOW_THREADS
    st = run();
    Py_END_ALLOW_THREADS
    return st;
}

// A hard CUDA call, run(workspace, bytes), tried without a workspace first
// (none is read when each item runs in one block: mas.h, mas_hard_cuda),
// then with `bytes` of one in *work. False when that allocation threw.
template <class Run>
bool bare_first(size_t bytes, const at::Tensor &like, at::Tensor *work, mas_status *st, Run &&run) {
    *st = without_gil([&] { return run(nullptr, size_t{0}); });
    if (*st != MAS_ERR_WORKSPACE_TOO_SMALL) return true;
    if (!allocated([&] { *work = workspace(bytes, like); })) return false;
    void *w = work->mutable_data_ptr();
    *st = without_gil([&] { return run(w, bytes); });
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

// (status, item) of a CPU call (CUDA errors of values land in the error
// word; a CUDA call with another status enqueued nothing and is answered
// None, for the general path to word it).
PyObject *status_item(mas_status st, const mas_error &err) {
    return Py_BuildValue("(iL)", static_cast<int>(st),
                         static_cast<long long>(st == MAS_OK ? -1 : err.item));
}

bool check_nargs(Py_ssize_t nargs, Py_ssize_t want, const char *name) {
    if (nargs == want) return true;
    PyErr_Format(PyExc_TypeError, "%s expects %zd arguments", name, want);
    return false;
}

// The outputs of align and align_gaussian: durations [B, T], indices [B, S]
// and score [B] (float64 or float32) from one allocation, as the library's
// mas_hard_outputs; with want_work also a workspace of `bytes`. False when
// an allocation threw.
struct HardResult {
    at::Tensor durations, indices, score, work;
    mas_hard_outputs out{};
};

bool hard_result(const at::Tensor &like, int64_t B, int64_t T, int64_t S, bool f64,
                 bool want_work, size_t bytes, HardResult *r) {
    const int64_t at_indices = round256(B * T * 4), at_score = at_indices + round256(B * S * 4);
    at::Tensor outs;
    if (!allocated([&] {
            outs = bytes_like(at_score + B * (f64 ? 8 : 4), like);
            if (want_work) r->work = workspace(bytes, like);
        }))
        return false;
    r->durations = part(outs, 0, at::kInt, {B, T});
    r->indices = part(outs, at_indices, at::kInt, {B, S});
    r->score = part(outs, at_score, f64 ? at::kDouble : at::kFloat, {B});
    r->out.durations = r->durations.mutable_data_ptr<int32_t>();
    r->out.durations_stride = T;
    r->out.indices = r->indices.mutable_data_ptr<int32_t>();
    r->out.indices_stride = S;
    r->out.score = r->score.mutable_data_ptr();
    return true;
}

// ((durations, indices, score), (status, item))
PyObject *hard_result_tuple(const HardResult &r, mas_status st, const mas_error &err) {
    return Py_BuildValue("((NNN)N)", THPVariable_Wrap(r.durations), THPVariable_Wrap(r.indices),
                         THPVariable_Wrap(r.score), status_item(st, err));
}

// align(value, x_len, y_len, bst, threads, stream, word)
//   -> ((durations, indices, score), (status, item)) or None
PyObject *align(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
    if (!check_nargs(nargs, 7, "align")) return nullptr;
    Call c;
    const int64_t *x_len, *y_len;
    if (!call_with_lengths(args[0], PyObject_IsTrue(args[3]), args[1], args[2], false, args + 4,
                           &c, &x_len, &y_len))
        return none_or_error();
    const int64_t B = c.view.dim[0], T = c.view.dim[1], S = c.view.dim[2];
    const mas_dtype dt = static_cast<mas_dtype>(c.code);
    const size_t bytes = c.cuda ? api->hard_cuda_workspace_size(B, T, S, dt)
                                : api->hard_cpu_workspace_size(B, T, S, dt, c.threads);
    // on CUDA no workspace first (none is read when each item runs in one
    // block), then one
    HardResult r;
    if (!hard_result(*c.value, B, T, S, c.code == MAS_FLOAT64, !c.cuda, bytes, &r))
        Py_RETURN_NONE;
    const mas_hard_outputs &out = r.out;
    mas_error err = {0, 0, -1};
    mas_status st;
    if (c.cuda) {
        if (!bare_first(bytes, *c.value, &r.work, &st, [&](void *w, size_t n) {
                return api->hard_cuda(&c.view, x_len, y_len, &out, w, n, c.stream, c.word);
            }) || st != MAS_OK)
            Py_RETURN_NONE;
    } else {
        void *w = r.work.mutable_data_ptr();
        st = without_gil(
            [&] { return api->hard_cpu(&c.view, x_len, y_len, &out, w, bytes, c.threads, &err); });
    }
    return hard_result_tuple(r, st, err);
}

// maximum_path(value, mask, bst, threads, stream, word) -> (path, (status, item)) or None.
// The path has the value's dtype and shape. On CUDA the kernels count the
// lengths in the mask (mas_hard_cuda_mask); on the CPU they are counted here
// by the same rule (non-zero entries of the first frame's column and of the
// first token's row), as the general path does.
PyObject *maximum_path(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
    if (!check_nargs(nargs, 6, "maximum_path")) return nullptr;
    const int bst = PyObject_IsTrue(args[2]);
    Call c;
    if (!call_of(args[0], bst, args[3], args[4], args[5], &c)) return none_or_error();
    const at::Tensor *mask = tensor_of(args[1]);
    const int mask_code = mask ? array_code(*mask) : -1;
    if (mask_code < 0 || mask->sizes() != c.value->sizes() || mask->device() != c.value->device())
        Py_RETURN_NONE;
    const int64_t B = c.view.dim[0], T = c.view.dim[1], S = c.view.dim[2];
    const mas_dtype dt = static_cast<mas_dtype>(c.code);
    const size_t bytes = c.cuda ? api->hard_cuda_mask_workspace_size(B, T, S, dt)
                                : api->hard_cpu_workspace_size(B, T, S, dt, c.threads);
    at::Tensor path, work, x_len, y_len;
    if (!allocated([&] {
            if (!c.cuda) { // the first frame's column [B, T], the first token's row [B, S]
                x_len = at::count_nonzero(mask->select(bst ? 1 : 2, 0), at::IntArrayRef{1});
                y_len = at::count_nonzero(mask->select(bst ? 2 : 1, 0), at::IntArrayRef{1});
            }
            path = at::empty(c.value->sizes(), c.value->options());
            if (!c.cuda) work = workspace(bytes, *c.value);
        }))
        Py_RETURN_NONE;
    mas_hard_outputs out{};
    out.path = view_of(path, c.code, bst != 0);
    const mas_tensor3 m = view_of(*mask, mask_code, bst != 0);
    mas_error err = {0, 0, -1};
    mas_status st;
    if (c.cuda) {
        if (!bare_first(bytes, *c.value, &work, &st, [&](void *w, size_t n) {
                return api->hard_cuda_mask(&c.view, &m, &out, w, n, c.stream, c.word);
            }) || st != MAS_OK)
            Py_RETURN_NONE;
    } else {
        void *w = work.mutable_data_ptr();
        st = without_gil([&] {
            return api->hard_cpu(&c.view, x_len.const_data_ptr<int64_t>(),
                                 y_len.const_data_ptr<int64_t>(), &out, w, bytes, c.threads, &err);
        });
    }
    return Py_BuildValue("(NN)", THPVariable_Wrap(path), status_item(st, err));
}

// forward_sum(value, x_len, y_len, bst, want_log_z, want_post, threads, stream, word)
//   -> ((log_z or None, posterior or None), (status, item)) or None.
// The posterior has the value's shape (its layout), both the accumulator's
// dtype (float64 for float64 value, else float32).
PyObject *forward_sum(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
    if (!check_nargs(nargs, 9, "forward_sum")) return nullptr;
    const int bst = PyObject_IsTrue(args[3]), want_log_z = PyObject_IsTrue(args[4]),
              want_post = PyObject_IsTrue(args[5]);
    Call c;
    const int64_t *x_len, *y_len;
    if (want_log_z < 0 || want_post < 0 || (!want_log_z && !want_post) ||
        !call_with_lengths(args[0], bst, args[1], args[2], false, args + 6, &c, &x_len, &y_len))
        return none_or_error();
    const int64_t B = c.view.dim[0], T = c.view.dim[1], S = c.view.dim[2];
    const mas_dtype dt = static_cast<mas_dtype>(c.code);
    const size_t bytes = c.cuda ? api->forward_sum_cuda_workspace_size(B, T, S, dt)
                                : api->forward_sum_cpu_workspace_size(B, T, S, dt, c.threads);
    at::Tensor log_z, post, work;
    if (!allocated([&] {
            if (want_log_z) log_z = at::empty({B}, accumulator(c.code, *c.value));
            if (want_post) post = at::empty(c.value->sizes(), accumulator(c.code, *c.value));
            work = workspace(bytes, *c.value);
        }))
        Py_RETURN_NONE;
    mas_tensor3 p{}; // data NULL: no posterior
    if (want_post) p = view_of(post, value_code(post), bst != 0);
    void *z = want_log_z ? log_z.mutable_data_ptr() : nullptr;
    void *w = work.mutable_data_ptr();
    mas_error err = {0, 0, -1};
    const mas_status st = without_gil([&] {
        return c.cuda ? api->forward_sum_cuda(&c.view, x_len, y_len, z, &p, w, bytes, c.stream,
                                              c.word)
                      : api->forward_sum_cpu(&c.view, x_len, y_len, z, &p, w, bytes, c.threads,
                                             &err);
    });
    if (c.cuda && st != MAS_OK) Py_RETURN_NONE;
    return Py_BuildValue("((NN)N)", want_log_z ? THPVariable_Wrap(log_z) : none(),
                         want_post ? THPVariable_Wrap(post) : none(), status_item(st, err));
}

// What both attention calls share: the kind, the logits' call and both
// lengths (attention_args; false: the general path, none_or_error()), then
// an output [B, N, M] in the accumulator's dtype and the workspace
// (attention_outputs; false: the general path).
struct AttentionCall {
    Call c;
    const int64_t *n_len, *m_len;
    mas_attention_kind kind;
    size_t bytes;
    at::Tensor out, work;
};

bool attention_args(PyObject *const *args, PyObject *const *rest, AttentionCall *a) {
    const long kind = PyLong_AsLong(args[0]);
    if ((kind != MAS_ATTENTION_ONE_TO_MANY && kind != MAS_ATTENTION_MANY_TO_MANY) ||
        !call_with_lengths(args[1], 0, args[2], args[3], true, rest, &a->c, &a->n_len, &a->m_len))
        return false;
    a->kind = static_cast<mas_attention_kind>(kind);
    return true;
}

bool attention_outputs(AttentionCall *a) {
    const Call &c = a->c;
    const int64_t B = c.view.dim[0], N = c.view.dim[1], M = c.view.dim[2];
    const mas_dtype dt = static_cast<mas_dtype>(c.code);
    a->bytes = c.cuda ? api->attention_cuda_workspace_size(B, N, M, dt)
                      : api->attention_cpu_workspace_size(B, N, M, dt, c.threads);
    return allocated([&] {
        a->out = at::empty({B, N, M}, accumulator(c.code, *c.value));
        a->work = workspace(a->bytes, *c.value);
    });
}

// attention(kind, logits, n_len, m_len, threads, stream, word)
//   -> (log_phi, (status, item)) or None
PyObject *attention(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
    if (!check_nargs(nargs, 7, "attention")) return nullptr;
    AttentionCall a;
    if (!attention_args(args, args + 4, &a) || !attention_outputs(&a))
        return none_or_error();
    const Call &c = a.c;
    const mas_tensor3 out = view_of(a.out, value_code(a.out), false);
    void *w = a.work.mutable_data_ptr();
    mas_error err = {0, 0, -1};
    const mas_status st = without_gil([&] {
        return c.cuda ? api->attention_forward_cuda(a.kind, &c.view, a.n_len, a.m_len, &out, w,
                                                    a.bytes, c.stream, c.word)
                      : api->attention_forward_cpu(a.kind, &c.view, a.n_len, a.m_len, &out, w,
                                                   a.bytes, c.threads, &err);
    });
    if (c.cuda && st != MAS_OK) Py_RETURN_NONE;
    return Py_BuildValue("(NN)", THPVariable_Wrap(a.out), status_item(st, err));
}

// attention_backward(kind, logits, n_len, m_len, log_phi, grad_log_phi, threads, stream,
//   word) -> (grad_logits, (status, item)) or None. log_phi and grad_log_phi:
// any float dtype, the logits' shape and device; grad_logits in the
// accumulator's dtype.
PyObject *attention_backward(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
    if (!check_nargs(nargs, 9, "attention_backward")) return nullptr;
    AttentionCall a;
    if (!attention_args(args, args + 6, &a)) return none_or_error();
    const Call &c = a.c;
    const at::Tensor *log_phi = tensor_of(args[4]), *grad_in = tensor_of(args[5]);
    for (const at::Tensor *t : {log_phi, grad_in})
        if (t == nullptr || value_code(*t) < 0 || t->sizes() != c.value->sizes() ||
            t->device() != c.value->device())
            Py_RETURN_NONE;
    if (!attention_outputs(&a)) Py_RETURN_NONE;
    const mas_tensor3 lp = view_of(*log_phi, value_code(*log_phi), false);
    const mas_tensor3 gi = view_of(*grad_in, value_code(*grad_in), false);
    const mas_tensor3 out = view_of(a.out, value_code(a.out), false);
    void *w = a.work.mutable_data_ptr();
    mas_error err = {0, 0, -1};
    const mas_status st = without_gil([&] {
        return c.cuda ? api->attention_backward_cuda(a.kind, &c.view, a.n_len, a.m_len, &lp, &gi,
                                                     &out, w, a.bytes, c.stream, c.word)
                      : api->attention_backward_cpu(a.kind, &c.view, a.n_len, a.m_len, &lp, &gi,
                                                    &out, w, a.bytes, c.threads, &err);
    });
    if (c.cuda && st != MAS_OK) Py_RETURN_NONE;
    return Py_BuildValue("(NN)", THPVariable_Wrap(a.out), status_item(st, err));
}

// align_gaussian(z, mean, log_std, x_len, y_len, precision, threads, stream, word)
//   -> ((durations, indices, score), (status, item)) or None.
// Glow-TTS's channel-first z [B, D, S] and mean, log_std [B, D, T] (any
// float dtypes, one device; both lengths given), seen by the library with
// the last two axes swapped (x [B, S, D], means [B, T, D]: mas.h section 8).
// Its host time was mostly the general path's Python (0.06-0.17 ms a call
// on the H200 machines, about the TF32 kernels' 0.087 ms at B=32 T=150
// S=800: results/fused-gpu-h100.md, session 19).
PyObject *align_gaussian(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
    if (!check_nargs(nargs, 9, "align_gaussian")) return nullptr;
    const at::Tensor *z = tensor_of(args[0]), *mean = tensor_of(args[1]),
                     *log_std = tensor_of(args[2]);
    if (z == nullptr || mean == nullptr || log_std == nullptr || z->dim() != 3 ||
        mean->dim() != 3 || log_std->sizes() != mean->sizes())
        Py_RETURN_NONE;
    const int zc = value_code(*z), mc = value_code(*mean), lc = value_code(*log_std);
    const bool cuda = z->is_cuda();
    if (zc < 0 || mc < 0 || lc < 0 || (!cuda && !z->device().is_cpu()) ||
        mean->device() != z->device() || log_std->device() != z->device())
        Py_RETURN_NONE;
    const int64_t B = z->size(0), D = z->size(1), S = z->size(2), T = mean->size(2);
    if (B < 1 || D < 1 || S < 1 || T < 1 || mean->size(0) != B || mean->size(1) != D)
        Py_RETURN_NONE;
    const long precision = PyLong_AsLong(args[5]), threads = PyLong_AsLong(args[6]);
    void *stream = PyLong_AsVoidPtr(args[7]);
    uint64_t *word = static_cast<uint64_t *>(PyLong_AsVoidPtr(args[8]));
    if (PyErr_Occurred()) return nullptr;
    mas_gauss_align_args a{};
    if (!lengths_of(args[3], *z, false, &a.x_len) || !lengths_of(args[4], *z, false, &a.y_len))
        Py_RETURN_NONE;
    a.x = view_of(*z, zc, true);
    a.params.means = view_of(*mean, mc, true);
    a.params.spread = view_of(*log_std, lc, true);
    a.params.spread_kind = MAS_SPREAD_LOG_STD;
    a.precision = static_cast<int32_t>(precision);
    const size_t bytes = cuda ? api->align_gaussian_cuda_workspace_size(&a)
                              : api->align_gaussian_cpu_workspace_size(
                                    &a, static_cast<int32_t>(threads));
    if (bytes == 0 || bytes == SIZE_MAX) Py_RETURN_NONE; // the general path words it
    HardResult r;
    if (!hard_result(*z, B, T, S, zc == MAS_FLOAT64, true, bytes, &r)) Py_RETURN_NONE;
    void *w = r.work.mutable_data_ptr();
    mas_error err = {0, 0, -1};
    const mas_status st = without_gil([&] {
        return cuda ? api->align_gaussian_cuda(&a, &r.out, w, bytes, stream, word)
                    : api->align_gaussian_cpu(&a, &r.out, w, bytes,
                                              static_cast<int32_t>(threads), &err);
    });
    if (cuda && st != MAS_OK) Py_RETURN_NONE;
    return hard_result_tuple(r, st, err);
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
    {"attention_backward",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(attention_backward)),
     METH_FASTCALL,
     "attention_backward(kind, logits, n_len, m_len, log_phi, grad_log_phi, threads, stream, "
     "word)"},
    {"align_gaussian",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(align_gaussian)),
     METH_FASTCALL,
     "align_gaussian(z, mean, log_std, x_len, y_len, precision, threads, stream, word)"},
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
