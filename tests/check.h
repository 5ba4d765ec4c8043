/* check.h - the tiny test harness every tests/test-*.c uses.
 * Each CHECK counts one pass or one failure (printed with file:line); CHECK_SKIP counts a part
 * that could not run here (an ISA this CPU lacks, a missing tool, a failed mkdtemp) and prints
 * "SKIP ..."; check_report() prints the line tests/run.sh sums up and returns the exit status.
 * A skipped ISA is printed as "SKIP isa NAME": run.sh fails the run if this CPU has NAME. */
#ifndef G3_CHECK_H
#define G3_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_passed, check_failed, check_skipped;

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

#define CHECK_SKIP(...)                                                                \
    do {                                                                               \
        check_skipped++;                                                               \
        printf("SKIP ");                                                               \
        printf(__VA_ARGS__);                                                           \
        putchar('\n');                                                                 \
    } while (0)

static inline int check_report(void) {
    printf("RESULT passed=%d failed=%d skipped=%d\n", check_passed, check_failed, check_skipped);
    return check_failed ? 1 : 0;
}

#endif
