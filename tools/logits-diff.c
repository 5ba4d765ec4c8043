/* logits-diff - compares two raw float32 logits files (as `gemma3 eval --dump-logits` writes).
 *
 *   logits-diff A.f32 B.f32 [ROW_OFFSET_IN_B]
 *
 * A holds n floats; they are compared with the n floats of B starting at float ROW_OFFSET_IN_B
 * (default 0; lets the last-token logits be checked against one row of an all-logits file).
 * Prints "max_abs_diff <x>" and exits 0, or 1 with a message if the sizes do not fit or a value
 * is NaN. Used by tests/test-eval.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: logits-diff A.f32 B.f32 [FLOAT_OFFSET_IN_B]\n");
        return 2;
    }
    char *a, *b;
    size_t na, nb;
    if (g3_read_file(argv[1], &a, &na) != GEMMA3_OK || g3_read_file(argv[2], &b, &nb) != GEMMA3_OK) {
        fprintf(stderr, "logits-diff: %s\n", gemma3_last_error());
        return 1;
    }
    size_t off = argc == 4 ? (size_t)strtoull(argv[3], NULL, 10) * sizeof(float) : 0;
    if (na % sizeof(float) || off > nb || nb - off < na) {
        fprintf(stderr, "logits-diff: sizes do not fit: %zu bytes vs %zu bytes at offset %zu\n", na,
                nb, off);
        return 1;
    }
    double max = 0;
    for (size_t i = 0; i < na / sizeof(float); i++) {
        float x, y;
        memcpy(&x, a + i * sizeof(float), sizeof x);
        memcpy(&y, b + off + i * sizeof(float), sizeof y);
        double d = fabs((double)x - (double)y);
        if (isnan(d)) {
            fprintf(stderr, "logits-diff: NaN at float %zu\n", i);
            return 1;
        }
        if (d > max) max = d;
    }
    printf("max_abs_diff %.6g\n", max);
    free(a);
    free(b);
    return 0;
}
