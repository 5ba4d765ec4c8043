/* check.h - the tiny test harness every tests/test-*.c uses.
 * Each CHECK counts one pass or one failure (printed with file:line); check_report() prints the
 * line tests/run.sh sums up and returns the exit status. */
#ifndef G3_CHECK_H
#define G3_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK_MSG(cond, ...)                                                           \
    do {                                                                               \
        if (cond) {                                                                    \
            check_passed++;                                                            \
        } else {                                                                       \
            check_failed++;                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)

#define CHECK(cond) CHECK_MSG(cond, "%s", "")

#define CHECK_EQ_INT(a, b)                                                             \
    do {                                                                               \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                \
        CHECK_MSG(check_a_ == check_b_, "%lld != %lld", check_a_, check_b_);           \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                          \
    do {                                                                               \
        double check_a_ = (double)(a), check_b_ = (double)(b);                         \
        CHECK_MSG(fabs(check_a_ - check_b_) <= (tol), "%.9g vs %.9g (tol %.3g)",       \
                  check_a_, check_b_, (double)(tol));                                  \
    } while (0)

static inline int check_report(void) {
    printf("RESULT passed=%d failed=%d\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
