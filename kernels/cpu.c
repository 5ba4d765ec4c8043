/* kernels/cpu.c - the CPU feature probe (see cpu.h). */
#include "kernels/cpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gemma3.h"
#include "util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define CPU_X86 1
#else
#define CPU_X86 0
#endif

static g3_cpu cpu;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

#if CPU_X86
/* AMX: cpuid 7.0 EDX bits 24 (tiles), 22 (BF16), 25 (INT8), and Linux's permission for the tile
 * data state (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA). */
static int probe_amx(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 24 & 1)) return 0;
#if defined(__linux__) && defined(__x86_64__)
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0)
        return G3_AMX_TILE | (d >> 22 & 1 ? G3_AMX_BF16 : 0) | (d >> 25 & 1 ? G3_AMX_INT8 : 0);
#endif
    return 0;
}

/* AVX-VNNI (cpuid leaf 7.1 EAX bit 4), asked directly: not every compiler's
 * __builtin_cpu_supports knows it. It uses the ymm state that the AVX2 check already covers. */
static int probe_avx_vnni(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
}
#endif

/* cpuid and the OS's saved-state support (which __builtin_cpu_supports also checks). */
static void probe(void) {
#if CPU_X86
    __builtin_cpu_init();
    cpu.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    cpu.avx_vnni = cpu.avx2 && probe_avx_vnni();
    cpu.avx512 = cpu.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    cpu.avx512_vnni = cpu.avx512 && __builtin_cpu_supports("avx512vnni") &&
                      __builtin_cpu_supports("avx512vbmi");
    cpu.avx512_bf16 = cpu.avx512 && __builtin_cpu_supports("avx512bf16");
    cpu.gfni = __builtin_cpu_supports("gfni");
    cpu.amx = probe_amx();
#endif
}

const g3_cpu *g3_cpu_get(void) {
    pthread_once(&cpu_once, probe);
    return &cpu;
}

int g3_cpu_amx(void) { return g3_cpu_get()->amx; }

int g3_isa_supported(g3_isa isa) {
    const g3_cpu *c = g3_cpu_get();
    switch (isa) {
    case G3_ISA_SCALAR: return 1;
    case G3_ISA_AVX2: return c->avx2;
    case G3_ISA_AVX512: return c->avx512;
    }
    return 0;
}

g3_isa g3_isa_detect(void) {
    return g3_isa_supported(G3_ISA_AVX512) ? G3_ISA_AVX512
           : g3_isa_supported(G3_ISA_AVX2) ? G3_ISA_AVX2 : G3_ISA_SCALAR;
}

static const char *const isa_names[G3_ISA_COUNT] = {"scalar", "avx2", "avx512"};

int g3_isa_parse(const char *name) {
    for (int i = 0; name && i < G3_ISA_COUNT; i++)
        if (strcmp(name, isa_names[i]) == 0) return i;
    return -1;
}

const char *g3_isa_name(g3_isa isa) {
    return (unsigned)isa < G3_ISA_COUNT ? isa_names[isa] : "?";
}

/* The process's level: -1 for none set. */
static atomic_int process_isa = -1;

static int choose(const char *name, const char *from) {
    int isa = g3_isa_parse(name);
    if (isa < 0)
        return g3_error(GEMMA3_ERR_ARG, "isa '%s'%s is not scalar, avx2 or avx512", name, from);
    if (!g3_isa_supported((g3_isa)isa))
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "isa '%s'%s is not supported by this CPU", name, from);
    return isa;
}

int g3_isa_choose(const char *name) {
    if (name) return choose(name, "");
    int isa = atomic_load(&process_isa);
    if (isa >= 0) return isa;
    const char *env = getenv("GEMMA3_ISA");
    if (env && *env) return choose(env, " (GEMMA3_ISA)");
    return (int)g3_isa_detect();
}

int g3_isa_set_default(const char *name) {
    int isa = name ? choose(name, "") : -1;
    if (name && isa < 0) return isa;
    atomic_store(&process_isa, isa);
    return GEMMA3_OK;
}
