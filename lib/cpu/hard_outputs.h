/* Hard MAS outputs of one item from its decision bits: backtrack, durations,
 * indices, score and the dense path. Shared by every CPU work split. */
#ifndef MAS_CPU_HARD_OUTPUTS_H
#define MAS_CPU_HARD_OUTPUTS_H

#include <stdint.h>

#include "mas.h"

typedef struct hard_item_outputs {
    int64_t n_tokens;           /* x_len; 0 for an item that failed */
    int64_t n_frames;           /* y_len; 0 for an item that failed */
    const uint8_t *decisions;   /* dp_core's bitmap of this item */
    int64_t lanes;              /* lanes per tile of that bitmap */
    double score;
    int32_t *durations;         /* scratch of T int32 */
    /* 1 when the caller has backtracked already (hard_backtrack, segment by
     * segment): durations hold the item's and the indices < n_frames are
     * written; decisions are not read. */
    int backtracked;
} hard_item_outputs;

/* The backtrack through frames [j_lo, j_hi), from frame j_hi-1 down, starting
 * on token *i (updated: the token of frame j_lo, moved on by its bit): adds
 * each frame to durations[token] and writes indices[j] (indices may be
 * NULL). The bits cover frames [dec_t0, dec_t0 + dec_steps) (dp_core's
 * tile-major bitmap of that window), which must hold [j_lo, j_hi). */
void hard_backtrack(const uint8_t *decisions, int64_t lanes, int64_t dec_t0, int64_t dec_steps,
                    int64_t j_lo, int64_t j_hi, int64_t *i, int32_t *durations,
                    int32_t *indices);

/* The long-form backtrack's walk of one item (lf_backtrack's visit, see
 * longform.h): hard_backtrack over each segment's bits in turn. */
typedef struct hard_segment_walk {
    const uint8_t *decisions;
    int64_t lanes, seg_steps, i; /* i: the token the walk is on */
    int32_t *durations, *indices;
} hard_segment_walk;

/* lf_backtrack's visit with a hard_segment_walk context: walks frames
 * [t0, t1) and returns the token at frame t0 - 1. */
int64_t hard_walk_segment(void *ctx, int64_t t0, int64_t t1);

/* Writes every requested output of item b (path in full, zeros outside). */
void hard_write_outputs(const mas_tensor3 *value, const mas_hard_outputs *out, int64_t b,
                        const hard_item_outputs *o);

#endif
