/* The coefficients of one diagonal Gaussian (mas.h section 6), the same
 * float64 arithmetic on the CPU and on CUDA (det_math.h), so that both
 * backends round the same coefficients and hence score the same bits:
 *   per dimension: inv = 1/var, a = mu*inv, b = -0.5*inv,
 *                  k = log(2 pi) + log var + mu*mu*inv;
 *   K = log w + (-0.5) * (k_0 + k_1 + ... in increasing j).
 * Plain C, includable from CUDA sources. */
#ifndef MAS_COMMON_GAUSS_COEF_H
#define MAS_COMMON_GAUSS_COEF_H

#include "common/det_math.h"
#include "mas.h"

#define MAS_LOG_2PI 1.8378770664093454836

/* 1/var and log var of one dimension from its spread. Returns 0 when the
 * spread is out of range (NaN/inf, variance <= 0, or a log-std whose
 * variance over- or underflows float64). */
/* A log-std spread's values as mas_gauss_coef_spread computes them, for
 * callers that take the exps of many spreads at once: the exp's argument,
 * then the values and the check from e = mas_det_exp(that argument). */
DM_FN double mas_gauss_log_std_arg(double log_std) { return DM_MUL(-2.0, log_std); }
DM_FN int mas_gauss_log_std_values(double log_std, double e, double *inv, double *log_var) {
    if (!(log_std - log_std == 0)) return 0; /* NaN or inf */
    *inv = e;
    *log_var = DM_MUL(2.0, log_std);
    return *inv > 0 && *inv - *inv == 0;
}

DM_FN int mas_gauss_coef_spread(double spread, int32_t kind, double *inv, double *log_var) {
    if (!(spread - spread == 0)) return 0; /* NaN or inf */
    if (kind == MAS_SPREAD_VARIANCE) {
        if (!(spread > 0)) return 0;
        *inv = 1.0 / spread;
        *log_var = mas_det_log(spread);
        return *inv > 0 && *inv - *inv == 0;
    }
    return mas_gauss_log_std_values(spread, mas_det_exp(mas_gauss_log_std_arg(spread)), inv,
                                    log_var);
}

/* a, b and the term of K of one dimension from its mean and
 * mas_gauss_coef_spread's values. Returns 0 when the mean is NaN/inf or a
 * result is not finite (or b is 0: a variance of over 1e308 would make the
 * Gaussian flat). */
DM_FN int mas_gauss_coef_rest(double mu, double inv, double log_var, double *a, double *b,
                              double *k_term) {
    if (!(mu - mu == 0)) return 0;
    *a = DM_MUL(mu, inv);
    *b = DM_MUL(-0.5, inv);
    *k_term = DM_ADD(DM_ADD(MAS_LOG_2PI, log_var), DM_MUL(DM_MUL(mu, mu), inv));
    return *a - *a == 0 && *b - *b == 0 && *b != 0 && *k_term - *k_term == 0;
}

/* One dimension of a Gaussian: a, b and its term of K (the two above).
 * Returns 0 when the parameters are out of range. */
DM_FN int mas_gauss_coef_dim(double mu, double spread, int32_t kind, double *a, double *b,
                             double *k_term) {
    double inv, log_var;
    if (!(mu - mu == 0) || !mas_gauss_coef_spread(spread, kind, &inv, &log_var)) return 0;
    return mas_gauss_coef_rest(mu, inv, log_var, a, b, k_term);
}

/* mas_gauss_coef_dim for a float32 mean and log-std spread: the same
 * values and the same verdict, with the range cases told apart on the
 * float inputs. For a finite mean and |log_std| < 340 the exp's argument
 * -2 log_std lies within (-680, 680), where mas_det_exp takes its ordinary
 * case, 1/var is finite and positive and b = -0.5/var finite and nonzero:
 * only a and the K term can still overflow. Everything else goes to
 * mas_gauss_coef_dim. Why: on CUDA the tests in float64 were most of the
 * coefficient kernel's instructions (likelihood.cu). */
DM_FN int mas_gauss_coef_dim_log_std_f32(float mu, float log_std, double *a, double *b,
                                         double *k_term) {
    if (!(mu - mu == 0.0f) || !(log_std < 340.0f && log_std > -340.0f))
        return mas_gauss_coef_dim((double)mu, (double)log_std, MAS_SPREAD_LOG_STD, a, b, k_term);
    const double m = (double)mu, ls = (double)log_std;
    const double inv = mas_det_exp_ordinary(mas_gauss_log_std_arg(ls));
    *a = DM_MUL(m, inv);
    *b = DM_MUL(-0.5, inv);
    *k_term = DM_ADD(DM_ADD(MAS_LOG_2PI, DM_MUL(2.0, ls)), DM_MUL(DM_MUL(m, m), inv));
    return *a - *a == 0 && *k_term - *k_term == 0;
}

/* mas_gauss_coef_stored_ok on float32 values (the same verdict: a float's
 * widening keeps it finite or not, zero or not). */
DM_FN int mas_gauss_coef_stored_ok_f32(float a, float b) {
    return a - a == 0.0f && b - b == 0.0f && b != 0.0f;
}

/* K from the log weight and the sum of the k terms. */
DM_FN double mas_gauss_coef_k(double log_w, double k_sum) {
    return DM_ADD(log_w, DM_MUL(-0.5, k_sum));
}

/* A log weight is valid unless NaN or +inf (-inf: a Gaussian of weight 0). */
DM_FN int mas_gauss_log_weight_ok(double log_w) { return log_w == log_w && log_w < HUGE_VAL; }

/* The coefficients as stored (rounded to float32, or not): a and b finite,
 * b nonzero. Checked on the stored values, so that float32 overflow and
 * underflow count as a bad model too. */
DM_FN int mas_gauss_coef_stored_ok(double a, double b) { return a - a == 0 && b - b == 0 && b != 0; }

/* K (as stored) is valid when finite, or -inf from a log weight of -inf. */
DM_FN int mas_gauss_coef_k_ok(double k, double log_w) {
    return k - k == 0 || (k == -HUGE_VAL && log_w == -HUGE_VAL);
}

#endif
