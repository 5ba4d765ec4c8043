/* kernels/quant-avx512.c - the AVX-512 quantized tables: "avx512" (F/BW/VL/DQ) and "avx512vnni"
 * (+AVX512_VNNI and AVX512_VBMI), one body (kernels/quant-avx512.inc) compiled once per variant
 * under Q_FN / Q_TARGET, and "amx" (AMX-INT8, kernels/quant-amx.inc, on the avx512vnni table's
 * activation quantization and fp32 path). The avx512 and avx512vnni tables have their own x8
 * kernels (16 rows per vector; decode and partial groups go to the AVX2 x8 kernels of
 * kernels/quant-avx2.c, the same bits); the amx table runs the AVX2 ones. Off x86 this file is
 * empty. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kquant.h"
#include "kernels/quant-impl.h"
#include "kernels/simd.h"
#include "quant-k.h"

/* decode's software prefetch distance in rows (4..32 measured alike; see quant-avx512.inc) */
#define PF_ROWS 16
/* the Q5_0 x8 decode's prefetch distance in bytes (26 group-blocks), as the AVX2 x8 kernels':
 * bench-quant --quick, 1B shape, 2 threads, CPU-time GB/s, 5 rounds alternated on Zen 4: 1152
 * 59-67, 2304 62-67, 4608 73-81, 9216 72-84 */
#define X8_AHEAD 4608

#define Q_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define Q_FN(name) name##_avx512
#define Q_NAME "avx512"
#define Q_VNNI 0
#define Q_VBMI 0
#include "kernels/quant-avx512.inc"
#undef Q_TARGET
#undef Q_FN
#undef Q_NAME
#undef Q_VNNI
#undef Q_VBMI

/* VNNI CPUs without VBMI (Cascade Lake) run the "avx512" table. */
#define Q_TARGET \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni,avx512vbmi")))
#define Q_FN(name) name##_avx512vnni
#define Q_NAME "avx512vnni"
#define Q_VNNI 1
#define Q_VBMI 1
#include "kernels/quant-avx512.inc"
#undef Q_TARGET
#undef Q_FN
#undef Q_NAME
#undef Q_VNNI
#undef Q_VBMI

#include "kernels/quant-amx.inc"

#endif
