/* tests/test-rng.h - the suites' deterministic xorshift64 stream (a file's own sequence comes
 * from defining TEST_RNG_SEED before including this). Not the engine's RNG: that is rng.h. */
#ifndef G3_TESTS_TEST_RNG_H
#define G3_TESTS_TEST_RNG_H

#include <stdint.h>

#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t rng_state = TEST_RNG_SEED;

static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

/* Uniform in [-1, 1). */
static float rng_f(void) { return (float)rng_u32() / 2147483648.0f - 1.0f; }

#endif
