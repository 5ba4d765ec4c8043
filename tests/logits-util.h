/* tests/logits-util.h - small helpers over a logits row shared by the forward-pass suites. */
#ifndef G3_TESTS_LOGITS_UTIL_H
#define G3_TESTS_LOGITS_UTIL_H

#include <math.h>

static inline int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* The largest logit minus the second largest: how safe an argmax comparison is. */
static inline float top2_gap(const float *x, int n) {
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (x[i] > a) {
            b = a;
            a = x[i];
        } else if (x[i] > b) {
            b = x[i];
        }
    }
    return a - b;
}

#endif
