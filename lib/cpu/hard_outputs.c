#include "cpu/hard_outputs.h"

#include <string.h>

/* Bit of cell (token i, frame j): 1 when the best way into it advanced, i.e.
 * the backtrack moves from token i to i-1 before frame j-1. */
static inline int decision(const uint8_t *decisions, int64_t lanes, int64_t dec_t0,
                           int64_t dec_steps, int64_t i, int64_t j) {
    const uint8_t *word = decisions + ((i / lanes) * dec_steps + j - dec_t0) * (lanes / 8);
    int64_t lane = i % lanes;
    return (word[lane / 8] >> (lane % 8)) & 1;
}

void hard_backtrack(const uint8_t *decisions, int64_t lanes, int64_t dec_t0, int64_t dec_steps,
                    int64_t j_lo, int64_t j_hi, int64_t *i_io, int32_t *dur, int32_t *idx) {
    int64_t i = *i_io;
    for (int64_t j = j_hi - 1; j >= j_lo; j--) {
        dur[i]++;
        if (idx) idx[j] = (int32_t)i;
        if (j > 0 && i > 0 && decision(decisions, lanes, dec_t0, dec_steps, i, j)) i--;
    }
    *i_io = i;
}

/* The one-element bit pattern of 1 in each output dtype, little-endian. */
static uint64_t one_bits(mas_dtype dtype) {
    switch (dtype) {
    case MAS_FLOAT32: return 0x3f800000u;
    case MAS_FLOAT64: return 0x3ff0000000000000u;
    case MAS_FLOAT16: return 0x3c00u;
    case MAS_BFLOAT16: return 0x3f80u;
    default: return 1u; /* integers and bool */
    }
}

static void put(uint8_t *p, size_t size, uint64_t bits) {
    switch (size) {
    case 1: *p = (uint8_t)bits; break;
    case 2: { uint16_t v = (uint16_t)bits; memcpy(p, &v, 2); } break;
    case 4: { uint32_t v = (uint32_t)bits; memcpy(p, &v, 4); } break;
    default: memcpy(p, &bits, 8); break;
    }
}

/* Fills n elements with stride `stride` (elements) with `bits`. */
static void fill(uint8_t *p, int64_t n, int64_t stride, size_t size, uint64_t bits) {
    if (stride == 1 && bits == 0) {
        memset(p, 0, (size_t)n * size);
        return;
    }
    for (int64_t k = 0; k < n; k++) put(p + k * stride * (int64_t)size, size, bits);
}

/* Dense path: the run of ones of token i is [start_i, start_i + dur_i). Walk
 * along whichever axis is contiguous so the writes stream. */
static void write_path(const mas_tensor3 *path, int64_t b, const int32_t *dur,
                       int64_t n_tokens) {
    int64_t T = path->dim[1], S = path->dim[2];
    size_t size = mas_dtype_size((mas_dtype)path->dtype);
    uint64_t one = one_bits((mas_dtype)path->dtype);
    uint8_t *base = (uint8_t *)path->data + b * path->stride[0] * (int64_t)size;
    int64_t st = path->stride[1], ss = path->stride[2];
    int64_t abs_st = st < 0 ? -st : st, abs_ss = ss < 0 ? -ss : ss;
    if (abs_ss <= abs_st) { /* rows over frames are the contiguous ones */
        int64_t start = 0;
        for (int64_t i = 0; i < T; i++) {
            uint8_t *row = base + i * st * (int64_t)size;
            int64_t d = i < n_tokens ? dur[i] : 0;
            fill(row, start, ss, size, 0);
            fill(row + start * ss * (int64_t)size, d, ss, size, one);
            fill(row + (start + d) * ss * (int64_t)size, S - start - d, ss, size, 0);
            start += d;
        }
    } else { /* columns over tokens: one 1 per frame */
        int64_t i = 0, left = n_tokens > 0 ? dur[0] : 0;
        for (int64_t j = 0; j < S; j++) {
            uint8_t *col = base + j * ss * (int64_t)size;
            fill(col, T, st, size, 0);
            if (i < n_tokens) {
                while (left == 0 && i + 1 < n_tokens) left = dur[++i];
                if (left > 0) {
                    put(col + i * st * (int64_t)size, size, one);
                    left--;
                }
            }
        }
    }
}

void hard_write_outputs(const mas_tensor3 *value, const mas_hard_outputs *out, int64_t b,
                        const hard_item_outputs *o) {
    int64_t T = value->dim[1], S = value->dim[2];
    int32_t *dur = o->durations;
    int32_t *idx = out->indices ? out->indices + b * out->indices_stride : NULL;
    if (!o->backtracked) {
        memset(dur, 0, (size_t)T * sizeof *dur);
        int64_t i = o->n_tokens - 1;
        hard_backtrack(o->decisions, o->lanes, 0, o->n_frames, 0, o->n_frames, &i, dur, idx);
    }
    if (idx)
        for (int64_t j = o->n_frames; j < S; j++) idx[j] = -1;
    if (out->durations)
        memcpy(out->durations + b * out->durations_stride, dur, (size_t)T * sizeof *dur);
    if (out->score) {
        if (value->dtype == MAS_FLOAT64) ((double *)out->score)[b] = o->score;
        else ((float *)out->score)[b] = (float)o->score;
    }
    if (out->path.data) write_path(&out->path, b, dur, o->n_tokens);
}

int64_t hard_walk_segment(void *ctx, int64_t t0, int64_t t1) {
    hard_segment_walk *w = (hard_segment_walk *)ctx;
    hard_backtrack(w->decisions, w->lanes, t0, w->seg_steps, t0, t1, &w->i, w->durations,
                   w->indices);
    return w->i;
}
