# tools/device/pin-patch.py FILE: device-only variant of threads.c (not built by make): G3_PIN=1 pins pool thread i to CPU i (the caller to CPU 0)
import sys
p=sys.argv[1]; s=open(p).read()
a='#define _POSIX_C_SOURCE 200809L\n'; assert s.count(a)==1; s=s.replace(a,'#ifndef _GNU_SOURCE\n#define _GNU_SOURCE\n#endif\n')
a='static void *worker_main(void *p) {'; assert s.count(a)==1
s=s.replace(a,'''#include <stdio.h>
static void pin_self(int cpu) {
    if (!getenv("G3_PIN")) return;
    cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu % g3_n_cpus(), &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
'''+a)
a='    g3_pool *pool = arg.pool;\n'; assert s.count(a)==1; s=s.replace(a,a+'    pin_self(arg.ith);\n')
a="    *out = pool;\n    return GEMMA3_OK;\n}\n\nvoid g3_pool_free"; assert s.count(a)==2, "create"
s=s.replace(a,"    pin_self(0);\n"+a,1)
open(p,'w').write(s)
