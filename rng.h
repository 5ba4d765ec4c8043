/* rng.h - counter-based random numbers: splitmix64, the sampler's (seed, position, purpose,
 * index) keying, uniforms in the open interval (0, 1) and Gumbel noise. No state anywhere: a
 * random number is a pure function of its inputs, so runs reproduce from the seed alone and two
 * samplers never share a stream (docs/sampling.md §4). */
#ifndef G3_RNG_H
#define G3_RNG_H

#include <stdint.h>

/* What a random number is for: different purposes never share a stream. */
enum g3_rng_purpose {
    G3_RNG_DRAW = 1,   /* the CDF walk's uniform, index 0 */
    G3_RNG_GUMBEL = 2, /* Gumbel noise of token `index` */
    G3_RNG_XTC = 3,    /* XTC's coin, index 0 */
};

/* splitmix64's output function, g3_mix64 = g3_mix64_rest(g3_mix64_first(z)): a bijection of
 * 64-bit words whose every output bit depends on every input bit. Its first step is linear over
 * xor, first(a ^ b) = first(a) ^ first(b), so a table of first(hash) serves every key: the
 * Gumbel screen applies it to the key once per draw. */
static inline uint64_t g3_mix64_first(uint64_t z) { return z ^ (z >> 30); }
static inline uint64_t g3_mix64_rest(uint64_t z) {
    z *= 0xbf58476d1ce4e5b9ull;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z;
}
static inline uint64_t g3_mix64(uint64_t z) { return g3_mix64_rest(g3_mix64_first(z)); }

/* splitmix64's golden-ratio increment. */
#define G3_SPLITMIX64_GAMMA 0x9e3779b97f4a7c15ull

/* splitmix64 as a pure function: the value the generator returns from state x. */
static inline uint64_t g3_splitmix64(uint64_t x) { return g3_mix64(x + G3_SPLITMIX64_GAMMA); }

/* splitmix64 as a stream: returns the next value and advances *state. */
static inline uint64_t g3_splitmix64_next(uint64_t *state) {
    uint64_t r = g3_splitmix64(*state);
    *state += G3_SPLITMIX64_GAMMA;
    return r;
}

/* 64 random bits, a pure function of (seed, position, purpose, index): splitmix64 finalisers
 * chained over the four inputs. g3_rng_key is the (seed, position) part, hoisted out of
 * per-token loops; g3_rng_index_hash the (purpose, index) part, which the Gumbel draw keeps in a
 * table by token id. */
static inline uint64_t g3_rng_key(uint64_t seed, int64_t position) {
    return g3_mix64(g3_splitmix64(seed) ^ ((uint64_t)position * 0xd1b54a32d192ed03ull));
}
static inline uint64_t g3_rng_index_hash(uint32_t purpose, uint32_t index) {
    return g3_mix64((((uint64_t)purpose << 32) | index) + 0x632be59bd9b4e019ull);
}
static inline uint64_t g3_rng_bits(uint64_t key, uint32_t purpose, uint32_t index) {
    return g3_mix64(key ^ g3_rng_index_hash(purpose, index));
}

/* Uniform in the OPEN interval (0, 1) from 52 bits: (b + 0.5) * 2^-52 is exact in double and
 * lies in [2^-53, 1 - 2^-53]. (53 bits would round the top value up to 1.0.) */
static inline double g3_uniform(uint64_t bits) { return ((double)(bits >> 12) + 0.5) * 0x1p-52; }
/* Uniform in (0, 1) from the top 32 bits, (b + 0.5) * 2^-32 in double: the input of the Gumbel
 * noise, whose largest value then stays finite and known (g3_gumbel_max). */
static inline double g3_uniform32(uint64_t bits) { return ((double)(bits >> 32) + 0.5) * 0x1p-32; }
/* Standard Gumbel noise -ln(-ln U), U from g3_uniform32: finite, in about [-3.1, 22.9]. The
 * truncated tail (max 22.87) only matters for tokens more than ~20 nats below the best one. */
double g3_gumbel(uint64_t bits);
/* The largest value g3_gumbel can return (at b = 2^32 - 1). */
double g3_gumbel_max(void);

/* A seed from /dev/urandom (the clock and pid if that fails); never GEMMA3_SEED_RANDOM. */
uint32_t g3_random_seed(void);

#endif
