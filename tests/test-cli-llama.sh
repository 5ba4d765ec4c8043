# tests/test-cli-llama.sh - the command line as llama.cpp users type it: UTF-8 typed at a terminal,
# escapes in -p, chat -p, stop strings, --in-prefix/--in-suffix, --version, accepted GPU flags,
# "did you mean", and bench as llama-bench. Runs on the bundled models/wordnet-gemma.
. tests/lib.sh
M=models/wordnet-gemma
[ -f "$M/model.safetensors" ] || { echo "no $M"; exit 77; }
command -v python3 >/dev/null 2>&1 || { bad "python3 is needed by this suite"; report; exit 1; }
json_get() { # json_get FILE PYTHON_EXPR(j)
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

# ---- UTF-8 typed at a terminal reaches the tokenizer byte for byte, whatever the locale ---------
for env_locale in "LANG=C.UTF-8" "LANG=" "LC_ALL=C"; do
    rm -f "$TMP/u.json"
    if env $env_locale python3 tests/chat_driver.py utf8 "$TMP/u.json" -- "$G3" chat -m "$M" -n 1 -s 1 -t 1 \
        >"$TMP/u.out" 2>&1; then
        got=$(python3 -c "
import json,sys
sys.argv=['x']; exec(open('tests/chat_driver.py').read().split('def wait_exit')[0])
j=json.load(open('$TMP/u.json'))
users=[t['text'] for t in j['turns'] if t['role']=='user']
print('same' if users==UTF8_MESSAGES else 'typed %r, got %r' % (UTF8_MESSAGES, users))")
        if [ "$got" = same ]; then ok; else bad "chat at a terminal ($env_locale): $got"; fi
    else
        bad "utf8 pty chat ($env_locale): $(tail -c 600 "$TMP/u.out")"
    fi
done

report
