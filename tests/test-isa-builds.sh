#!/bin/sh
# tests/test-isa-builds.sh - every function built for an instruction set (a name with avx2 or
# avx512 in it) really is: no legacy-SSE instruction (a compiler that dropped the target
# attribute builds the function for the command line's SSE2 baseline, as GCC 13 did when
# `optimize` followed `target`) and no call to libm's fma/fmaf (a fused multiply-add the
# compiler did not expand). Reads the library's objects with objdump; skipped (77) without
# objdump or on a non-x86-64 build.
. tests/lib.sh
command -v objdump >/dev/null 2>&1 || { echo "no objdump: skipped"; exit 77; }
set -- "$G3_BUILD"/*.o "$G3_BUILD"/kernels/*.o
[ -e "$1" ] || { echo "no objects in $G3_BUILD: skipped"; exit 77; }
case "$(objdump -f "$1" 2>/dev/null)" in *x86-64*) ;; *) echo "not x86-64: skipped"; exit 77 ;; esac

for o in "$@"; do
    # per ISA function: how many instructions, and the first legacy-SSE one or fma call
    objdump -dr --no-show-raw-insn "$o" | awk -v obj="$(basename "$o")" '
        /^[0-9a-f]+ <[^>]*>:$/ {
            fn = $2; gsub(/[<>:]/, "", fn)
            isa = fn ~ /avx2|avx512/
            if (isa) { n[fn] = 0; order[++k] = fn }
            next
        }
        !isa || NF < 2 { next }
        $2 ~ /^R_X86_64/ { # a relocation: a call into libm names its target here
            if ($3 ~ /^fmaf?([-+@]|$)/ && !(fn in why)) why[fn] = "calls libm " $3
            next
        }
        {
            n[fn]++
            op = $2 == "{vex}" || $2 == "{evex}" ? $3 : $2
            if ($0 ~ /%[xy]mm/ && op !~ /^(v|k)/ && !(fn in why)) why[fn] = "legacy SSE: " $0
        }
        END {
            for (i = 1; i <= k; i++) {
                f = order[i]
                if (f in why) printf "BAD %s %s %s\n", obj, f, why[f]
                else printf "OK %s %s %d\n", obj, f, n[f]
            }
        }' >"$TMP/fns"
    while read -r verdict obj fn rest; do
        case "$verdict" in
            OK) ok ;;
            BAD) bad "$obj: $fn: $rest" ;;
        esac
    done <"$TMP/fns"
done
[ "$pass" -gt 0 ] || bad "no function of an instruction set found in $G3_BUILD/*.o"
report
