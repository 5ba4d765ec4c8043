/* kernels/cpu.h - what this CPU runs, probed once, and the instruction-set level every table is
 * chosen for. The one place cpuid is asked: the BF16 and quantized kernel tables, the row
 * quantizers, the sampler's passes and the AMX tile permission all read g3_cpu_get(). Knows
 * nothing of Gemma; links alone (libc and util.c's g3_error), so the sampler needs no kernels. */
#ifndef G3_CPU_H
#define G3_CPU_H

/* The levels a caller names (--isa, GEMMA3_ISA); within one a table takes the best variant the
 * CPU has (VNNI, AVX512-BF16, AMX). Their order is their rank. */
typedef enum g3_isa { G3_ISA_SCALAR = 0, G3_ISA_AVX2 = 1, G3_ISA_AVX512 = 2 } g3_isa;
enum { G3_ISA_COUNT = 3 };

/* AMX bits: the tile unit and its BF16 / INT8 multiplies, with Linux's permission for the tile
 * data state (asked once per process, by the probe). */
enum { G3_AMX_TILE = 1, G3_AMX_BF16 = 2, G3_AMX_INT8 = 4 };

typedef struct g3_cpu {
    int avx2;        /* AVX2 + FMA (F16C comes with every such CPU); the OS saves ymm */
    int avx_vnni;    /* + AVX-VNNI (cpuid 7.1 EAX bit 4) */
    int avx512;      /* AVX-512 F, BW, VL, DQ (with avx2); the OS saves zmm */
    int avx512_vnni; /* + AVX512_VNNI and AVX512_VBMI */
    int avx512_bf16; /* + AVX512_BF16 */
    int gfni;
    int amx;         /* G3_AMX_* bits */
} g3_cpu;

/* The probe's answer (all zero off x86), computed on the first call of any thread. */
const g3_cpu *g3_cpu_get(void);
/* g3_cpu_get()->amx. */
int g3_cpu_amx(void);
/* 1 if the CPU runs level isa. */
int g3_isa_supported(g3_isa isa);
/* The best level this CPU runs. */
g3_isa g3_isa_detect(void);
/* "scalar", "avx2", "avx512" -> level; -1 if unknown (or NULL). */
int g3_isa_parse(const char *name);
const char *g3_isa_name(g3_isa isa);

/* The level tables are chosen for: name if given, else the process's (g3_isa_set_default), else
 * the environment's GEMMA3_ISA, else the best the CPU has. A negative gemma3_status, its message
 * set (naming GEMMA3_ISA where the name came from there), for an unknown name or one the CPU
 * lacks. */
int g3_isa_choose(const char *name);
/* Sets the process's level (NULL: back to GEMMA3_ISA or the best); the status of
 * g3_isa_choose(name), nothing changed on error. Call before making sessions and samplers. */
int g3_isa_set_default(const char *name);

#endif
