/* The benchmark's baseline: the plain scalar column loop that Glow-TTS's
 * Cython monotonic_align runs, written from its semantics. Like the
 * original it works in place on a float32 copy of the input (the caller
 * makes the copy and zeroes the int32 path outside the timed region), uses
 * -1e9 for "no predecessor", and runs one item after another on one thread.
 * It exists to be timed against, not to be used. */
#include "module.h"

static void glow_item(float *v, int32_t *path, int64_t S, int64_t t_x, int64_t t_y) {
    const float neg = -1e9f;
    for (int64_t y = 0; y < t_y; y++) {
        int64_t lo = t_x + y - t_y > 0 ? t_x + y - t_y : 0;
        int64_t hi = t_x < y + 1 ? t_x : y + 1;
        for (int64_t x = lo; x < hi; x++) {
            float v_cur = x == y ? neg : v[x * S + y - 1];
            float v_prev = x == 0 ? (y == 0 ? 0.0f : neg) : v[(x - 1) * S + y - 1];
            v[x * S + y] += v_prev > v_cur ? v_prev : v_cur;
        }
    }
    int64_t index = t_x - 1;
    for (int64_t y = t_y - 1; y >= 0; y--) {
        path[index * S + y] = 1;
        if (index != 0 && (index == y || v[index * S + y - 1] < v[(index - 1) * S + y - 1]))
            index -= 1;
    }
}

/* baseline_glow(value, path, x_len, y_len): value float32 and path int32,
 * both C-contiguous [B, T, S] host arrays, value overwritten; lengths int64
 * [B]. Releases the GIL while it runs. */
PyObject *mas_py_baseline_glow(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char *const names[4] = {"value", "path", "x_lengths", "y_lengths"};
    static const int32_t ranks[4] = {3, 3, 1, 1};
    static const int32_t dtypes[4] = {MAS_FLOAT32, MAS_INT32, MAS_INT64, MAS_INT64};
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "baseline_glow expects 4 arguments");
        return NULL;
    }
    mas_py_array a[4];
    int n = 0, ok = 1;
    for (; n < 4 && ok; n++)
        ok = mas_py_array_get(args[n], names[n], &a[n]) == 0 &&
             mas_py_array_present(&a[n]) &&
             mas_py_array_check_device(&a[n], names[n], MAS_PY_HOST, 0) == 0 &&
             mas_py_array_check_kind(&a[n], names[n], ranks[n], dtypes[n]) == 0;
    const int64_t B = ok ? a[0].shape[0] : 0, T = ok ? a[0].shape[1] : 0,
                  S = ok ? a[0].shape[2] : 0;
    for (int k = 0; ok && k < 2; k++)
        ok = a[k].shape[0] == B && a[k].shape[1] == T && a[k].shape[2] == S &&
             (B * T * S == 0 || (a[k].strides[2] == 1 && a[k].strides[1] == S &&
                                 a[k].strides[0] == T * S));
    for (int k = 2; ok && k < 4; k++) ok = mas_py_array_check_vector(&a[k], names[k], B) == 0;
    const int64_t *x_len = ok ? (const int64_t *)a[2].data : NULL;
    const int64_t *y_len = ok ? (const int64_t *)a[3].data : NULL;
    for (int64_t b = 0; ok && b < B; b++)
        ok = x_len[b] >= 1 && x_len[b] <= T && y_len[b] >= x_len[b] && y_len[b] <= S;
    if (!ok) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError,
                            "baseline_glow: need contiguous [B,T,S] arrays and valid lengths");
        mas_py_array_release_all(a, n);
        return NULL;
    }
    float *v = (float *)a[0].data;
    int32_t *path = (int32_t *)a[1].data;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t b = 0; b < B; b++)
        glow_item(v + b * T * S, path + b * T * S, S, x_len[b], y_len[b]);
    Py_END_ALLOW_THREADS
    mas_py_array_release_all(a, n);
    Py_RETURN_NONE;
}
