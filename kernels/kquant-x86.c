/* kernels/kquant-x86.c - the K-quant matmuls for x86 (AVX2, AVX-VNNI, AVX-512, AVX512-VNNI), each
 * function with its own target attribute (one portable build); kernels/kquant-x86.inc is the body,
 * compiled once per variant. Tested bit for bit against the scalar ones (tests/test-quant-k.c). */
#include "kernels/kquant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#include "quant-k.h"
#include "util.h"

#define INLINE static inline __attribute__((always_inline))

/* A Q4_K / Q5_K scales[12] as the 8 six-bit scales (sc[j]) and the 8 mins (bytes of *mins, m_j in
 * byte j), from its three little-endian words: sc 0-3 and m 0-3 are the low 6 bits of bytes 0-3
 * and 4-7; sc 4-7 / m 4-7 take the low / high nibbles of bytes 8-11 and, as bits 4-5, the top two
 * bits of bytes 0-3 / 4-7. */
static inline void kq_scales_mins(const uint8_t *scales, uint8_t sc[8], uint64_t *mins) {
    uint32_t w[3], s[2], m[2];
    memcpy(w, scales, sizeof w);
    s[0] = w[0] & 0x3f3f3f3fu;
    m[0] = w[1] & 0x3f3f3f3fu;
    s[1] = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
    m[1] = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
    memcpy(sc, s, 8);
    *mins = (uint64_t)m[0] | (uint64_t)m[1] << 32;
}

/* fp16 to fp32 with F16C (exact, as g3_f16_to_f32); every variant's target has F16C. */
#define KQ_F16(h) _cvtsh_ss(h)

#define KQ_TARGET __attribute__((target("avx2,fma,f16c")))
#define KQ_FN(name) name##_avx2
#define KQ_VNNI 0
#include "kernels/kquant-x86.inc"
#undef KQ_TARGET
#undef KQ_FN
#undef KQ_VNNI

#define KQ_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define KQ_FN(name) name##_avx2vnni
#define KQ_VNNI 1
#include "kernels/kquant-x86.inc"
#undef KQ_TARGET
#undef KQ_FN
#undef KQ_VNNI

#define KQ_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define KQ_FN(name) name##_avx512
#define KQ_VNNI 0
#include "kernels/kquant-x86.inc"
#undef KQ_TARGET
#undef KQ_FN
#undef KQ_VNNI

#define KQ_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni")))
#define KQ_FN(name) name##_avx512vnni
#define KQ_VNNI 2
#include "kernels/kquant-x86.inc"
#undef KQ_TARGET
#undef KQ_FN
#undef KQ_VNNI

#endif
