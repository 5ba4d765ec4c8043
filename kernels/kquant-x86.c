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
