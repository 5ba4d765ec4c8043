#!/usr/bin/env python3
"""gguf-types.py - the name and ggml type of every tensor of a GGUF file, one per line.

    python3 tools/gguf-types.py FILE.gguf

Standard library only: reads the header (key/values skipped by their types) and the tensor
infos. Used by tools/make-kquant-mix-fixtures.sh and tests/test-kquant-mix.sh to compare the
per-tensor types of our quantized files with llama-quantize's."""
import struct
import sys

TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K",
         11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 30: "BF16"}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def main(path):
    b = open(path, "rb").read()
    if b[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    _, n_tensors, n_kv = struct.unpack_from("<IQQ", b, 4)
    o = 24

    def skip_str(o):
        n, = struct.unpack_from("<Q", b, o)
        return o + 8 + n

    def skip_value(t, o):
        if t == 8:
            return skip_str(o)
        if t == 9:
            at, n = struct.unpack_from("<IQ", b, o)
            o += 12
            for _ in range(n):
                o = skip_value(at, o)
            return o
        return o + SCALAR[t]

    for _ in range(n_kv):
        o = skip_str(o)
        t, = struct.unpack_from("<I", b, o)
        o = skip_value(t, o + 4)
    for _ in range(n_tensors):
        n, = struct.unpack_from("<Q", b, o)
        name = b[o + 8:o + 8 + n].decode()
        o += 8 + n
        nd, = struct.unpack_from("<I", b, o)
        o += 4 + 8 * nd
        t, = struct.unpack_from("<I", b, o)
        o += 12
        print(name, TYPES.get(t, str(t)))


if __name__ == "__main__":
    main(sys.argv[1])
