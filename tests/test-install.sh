# tests/test-install.sh - `make install` puts the command, the static and shared libraries,
# gemma3.h and gemma3.pc under PREFIX (staged under DESTDIR); a C program outside the repository
# builds with `pkg-config --cflags --libs gemma3` and runs the bundled model as the command does;
# `make uninstall` removes every file. Runs on the default build only (a nested make on a
# sanitizer build would rebuild it without its flags).
. tests/lib.sh
[ "$G3_BUILD" = build ] || { echo "install is tested on the default build"; exit 77; }
command -v pkg-config >/dev/null 2>&1 || { bad "pkg-config is needed (README's first command installs it)"; report; exit 1; }
# the flags the build was made with, so that the nested make rebuilds nothing
cc=$(cut -d' ' -f1 build/cflags)
werror=0
grep -q -- -Werror build/cflags && werror=1
mk() { make -s CC="$cc" WERROR=$werror BUILD=build "$@" >"$TMP/make.log" 2>&1; }

# ---- staged: DESTDIR + PREFIX, every file where it belongs, and uninstall removes them ----------
if mk install DESTDIR="$TMP/stage" PREFIX=/opt/g3; then ok; else bad "make install DESTDIR: $(tail -5 "$TMP/make.log")"; fi
for f in bin/gemma3 lib/libgemma3.a lib/libgemma3.so lib/libgemma3.so.0 include/gemma3.h lib/pkgconfig/gemma3.pc; do
    if [ -e "$TMP/stage/opt/g3/$f" ]; then ok; else bad "make install did not write PREFIX/$f"; fi
done
if grep -qx 'prefix=/opt/g3' "$TMP/stage/opt/g3/lib/pkgconfig/gemma3.pc"; then ok; else bad "gemma3.pc: $(cat "$TMP/stage/opt/g3/lib/pkgconfig/gemma3.pc")"; fi
if "$TMP/stage/opt/g3/bin/gemma3" --version | grep -q '^gemma3 version'; then ok; else bad "installed gemma3 --version"; fi
mk uninstall DESTDIR="$TMP/stage" PREFIX=/opt/g3
left=$(find "$TMP/stage" -type f -o -type l)
if [ -z "$left" ]; then ok; else bad "make uninstall left $left"; fi

# ---- a program outside the repository, built with pkg-config against the installed library -----
P="$TMP/prefix"
if mk install PREFIX="$P"; then ok; else bad "make install PREFIX: $(tail -5 "$TMP/make.log")"; fi
mkdir -p "$TMP/app"
cat >"$TMP/app/app.c" <<'C'
#include <gemma3.h>
#include <stdio.h>
/* Greedy ids of a chat reply, as `gemma3 --temp 0` picks them. */
int main(int argc, char **argv) {
    gemma3_model *model;
    gemma3_session *s;
    if (gemma3_model_load(argv[1], &model) != GEMMA3_OK) return fprintf(stderr, "%s\n", gemma3_last_error()), 1;
    gemma3_session_params sp = gemma3_session_default_params();
    sp.n_ctx = 256;
    if (gemma3_session_init(model, &sp, &s) != GEMMA3_OK) return fprintf(stderr, "%s\n", gemma3_last_error()), 1;
    gemma3_chat_msg msg = {"user", argv[2]};
    int32_t ids[256];
    int n = gemma3_chat_encode(gemma3_model_tokenizer(model), &msg, 1, 1, 1, ids, 256);
    gemma3_model_info info;
    gemma3_model_get_info(model, &info);
    for (int i = 0; i < 8 && n > 0; i++) {
        if (gemma3_session_forward(s, ids, n, NULL) != GEMMA3_OK) return 1;
        const float *logits = gemma3_session_logits(s);
        int best = 0;
        for (int v = 1; v < info.vocab_size; v++) if (logits[v] > logits[best]) best = v;
        printf("%s%d", i ? "," : "", best);
        ids[0] = best;
        n = 1;
    }
    printf("\n");
    gemma3_session_free(s);
    gemma3_model_free(model);
    return 0;
}
C
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
# shellcheck disable=SC2046
if (cd "$TMP/app" && cc -o app app.c $(pkg-config --cflags --libs gemma3)) >"$TMP/cc.log" 2>&1; then ok; else bad "building against the installed library: $(cat "$TMP/cc.log")"; fi
if ldd "$TMP/app/app" 2>/dev/null | grep -q "libgemma3.so.0 => $P/lib"; then ok; else
    # linked to the shared library, found at run time through LD_LIBRARY_PATH
    LD_LIBRARY_PATH="$P/lib" ldd "$TMP/app/app" | grep -q "libgemma3.so.0 => $P/lib" && ok || bad "app not linked to libgemma3.so: $(ldd "$TMP/app/app")"
fi
got=$(cd "$TMP" && LD_LIBRARY_PATH="$P/lib" ./app/app "$OLDPWD/models/wordnet-gemma" 'Define "tree".')
want=$("$G3" -m models/wordnet-gemma -p 'Define "tree".' -n 8 --temp 0 -t 1 --output-format json 2>/dev/null |
    python3 -c 'import json,sys; print(",".join(map(str, json.load(sys.stdin)["generated_ids"])))')
if [ -n "$got" ] && [ "$got" = "$want" ]; then ok; else bad "the installed library's greedy ids '$got' != the command's '$want'"; fi
mk uninstall PREFIX="$P"
report
