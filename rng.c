/* rng.c - the out-of-line parts of rng.h: Gumbel noise and a fresh seed. */
#define _POSIX_C_SOURCE 200809L
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "gemma3.h"

double g3_gumbel(uint64_t bits) { return -log(-log(g3_uniform32(bits))); }

double g3_gumbel_max(void) { return g3_gumbel(0xffffffffull << 32); }

uint32_t g3_random_seed(void) {
    uint32_t seed = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&seed, sizeof seed, 1, f) != 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint32_t)g3_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                                  (uint64_t)getpid());
    }
    if (f) fclose(f);
    return seed == GEMMA3_SEED_RANDOM ? 0 : seed;
}
