/* Scalar element conversion shared by the CPU backends. Half and bfloat16
 * are widened exactly to float; the accumulator type is float for every input
 * but float64 (see the semantics in mas.h). */
#ifndef MAS_COMMON_CONVERT_H
#define MAS_COMMON_CONVERT_H

#include <stdint.h>
#include <string.h>

static inline float mas_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float mas_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);           /* inf, NaN */
    } else if (exp != 0) {
        u = sign | ((exp + 112u) << 23) | (man << 13);  /* normal */
    } else if (man == 0) {
        u = sign;                                        /* zero */
    } else {                                             /* subnormal */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400u));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
