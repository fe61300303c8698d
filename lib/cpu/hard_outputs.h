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
} hard_item_outputs;

/* Writes every requested output of item b (path in full, zeros outside). */
void hard_write_outputs(const mas_tensor3 *value, const mas_hard_outputs *out, int64_t b,
                        const hard_item_outputs *o);

#endif
