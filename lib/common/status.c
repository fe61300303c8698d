/* Version, status strings, dtype sizes, device error decoding. */
#include "mas.h"

const char *mas_version_string(void) { return "0.1.0"; }

int32_t mas_version_number(void) { return MAS_VERSION_NUMBER; }

const char *mas_status_string(mas_status status) {
    switch (status) {
    case MAS_OK: return "ok";
    case MAS_ERR_NULL_POINTER: return "a required pointer is NULL";
    case MAS_ERR_BAD_SHAPE:
        return "bad shape: every size must be >= 1 and outputs must match the input's shape";
    case MAS_ERR_BAD_DTYPE: return "unsupported dtype for this argument";
    case MAS_ERR_BAD_LENGTH:
        return "bad length: need 1 <= x_len <= T and 1 <= y_len <= S";
    case MAS_ERR_X_LEN_GT_Y_LEN:
        return "x_len > y_len: no monotonic alignment gives every token a frame";
    case MAS_ERR_NONFINITE_VALUE:
        return "value holds NaN or +inf on a cell a monotonic path can cross";
    case MAS_ERR_NO_FINITE_PATH:
        return "no finite path: every monotonic path crosses a -inf cell";
    case MAS_ERR_WORKSPACE_TOO_SMALL: return "workspace smaller than *_workspace_size()";
    case MAS_ERR_BAD_ARGUMENT: return "an argument is out of range";
    case MAS_ERR_NO_CUDA: return "libmas was built without its CUDA backend";
    case MAS_ERR_CUDA: return "a CUDA runtime call failed";
    case MAS_ERR_BAD_MODEL:
        return "bad model: a mean, spread or log weight is NaN or inf, or a variance is <= 0";
    case MAS_ERR_TARGET_TOO_LONG:
        return "target too long: its states (labels, plus a blank between repeated labels) "
               "outnumber the frames";
    default: return "unknown status";
    }
}

void mas_decode_device_error(uint64_t word, mas_error *err) {
    if (!err) return;
    if (word == MAS_DEVICE_NO_ERROR) {
        err->status = MAS_OK;
        err->item = -1;
    } else {
        err->status = (int32_t)(word & 0xffu);
        /* MAS_DEVICE_NO_ITEM: an error that is not one item's */
        err->item = (word >> 8) == (MAS_DEVICE_NO_ITEM >> 8) ? -1 : (int64_t)(word >> 8);
    }
    err->reserved_ = 0;
}

size_t mas_dtype_size(mas_dtype dtype) {
    switch (dtype) {
    case MAS_FLOAT32: case MAS_INT32: return 4;
    case MAS_FLOAT64: case MAS_INT64: return 8;
    case MAS_FLOAT16: case MAS_BFLOAT16: return 2;
    case MAS_UINT8: return 1;
    default: return 0;
    }
}
