/* One build of fused_forward_sum.c's weighted row sums, for one vector
 * width: included once per instruction set with
 *   FR_NAME  the function's name
 *   FR_VT    a GCC vector type of FR_W doubles (one register of the set)
 *   FR_W     its doubles
 *   FR_ATTR  the function's target attribute (empty for the baseline)
 * out_a[d] = sum_i g[i] A[idx[i] J + d] and out_b likewise from Bm, each
 * sum in list order, so every width gives the same bits (no fma: C11 mode
 * does not contract). Four vectors a side are summed in registers while
 * the rows stream (summed through memory instead, one row of J a cell, the
 * store-to-load chain bound the loop): eight accumulators, which every set
 * holds in registers at its own width. (One 64-byte type for all builds,
 * as before session 14, made GCC spill and shuffle every AVX2 accumulator
 * through the stack: the gradients' sums ran ~4x slower on AVX2-only
 * CPUs.) The eight accumulators are written out: as two arrays of four,
 * GCC's code of every build used the stack about twice as often (objdump).
 * The parameters are undefined at the end. */
FR_ATTR static void FR_NAME(const int64_t *restrict idx, const double *restrict g, int64_t n,
                            const double *restrict A, const double *restrict Bm, int64_t J,
                            double *restrict out_a, double *restrict out_b) {
    enum { W = FR_W };
    int64_t d0 = 0;
    for (; d0 + 4 * W <= J; d0 += 4 * W) {
        FR_VT a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
        for (int64_t i = 0; i < n; i++) {
            const double w = g[i];
            const double *ra = A + idx[i] * J + d0, *rb = Bm + idx[i] * J + d0;
            FR_VT r;
            memcpy(&r, ra, sizeof r); /* rows are not aligned to the vector */
            a0 += w * r;
            memcpy(&r, ra + W, sizeof r);
            a1 += w * r;
            memcpy(&r, ra + 2 * W, sizeof r);
            a2 += w * r;
            memcpy(&r, ra + 3 * W, sizeof r);
            a3 += w * r;
            memcpy(&r, rb, sizeof r);
            b0 += w * r;
            memcpy(&r, rb + W, sizeof r);
            b1 += w * r;
            memcpy(&r, rb + 2 * W, sizeof r);
            b2 += w * r;
            memcpy(&r, rb + 3 * W, sizeof r);
            b3 += w * r;
        }
        memcpy(out_a + d0, &a0, sizeof a0);
        memcpy(out_a + d0 + W, &a1, sizeof a1);
        memcpy(out_a + d0 + 2 * W, &a2, sizeof a2);
        memcpy(out_a + d0 + 3 * W, &a3, sizeof a3);
        memcpy(out_b + d0, &b0, sizeof b0);
        memcpy(out_b + d0 + W, &b1, sizeof b1);
        memcpy(out_b + d0 + 2 * W, &b2, sizeof b2);
        memcpy(out_b + d0 + 3 * W, &b3, sizeof b3);
    }
    for (; d0 + W <= J; d0 += W) {
        FR_VT a0 = {0}, b0 = {0};
        for (int64_t i = 0; i < n; i++) {
            FR_VT r;
            memcpy(&r, A + idx[i] * J + d0, sizeof r);
            a0 += g[i] * r;
            memcpy(&r, Bm + idx[i] * J + d0, sizeof r);
            b0 += g[i] * r;
        }
        memcpy(out_a + d0, &a0, sizeof a0);
        memcpy(out_b + d0, &b0, sizeof b0);
    }
    for (; d0 < J; d0++) {
        double a0 = 0, b0 = 0;
        for (int64_t i = 0; i < n; i++) {
            a0 += g[i] * A[idx[i] * J + d0];
            b0 += g[i] * Bm[idx[i] * J + d0];
        }
        out_a[d0] = a0;
        out_b[d0] = b0;
    }
}

#undef FR_NAME
#undef FR_VT
#undef FR_W
#undef FR_ATTR
