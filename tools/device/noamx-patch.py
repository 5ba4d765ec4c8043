# tools/device/noamx-patch.py FILE: device-only variant of kernels/cpu.c (not built by make): G3_NOAMX=1 reports no AMX, so the avx512 level takes its avx512vnni / avx512bf16 tables
import sys
p=sys.argv[1]; s=open(p).read()
a='    cpu.amx = probe_amx();\n'; assert s.count(a)==1
s=s.replace(a,'    cpu.amx = getenv("G3_NOAMX") ? 0 : probe_amx();\n')
open(p,'w').write(s)
