#!/usr/bin/env python3
"""gguf-types.py - the name and ggml type of every tensor of a GGUF file, one per line.

    python3 tools/gguf-types.py FILE.gguf
    python3 tools/gguf-types.py --sha256 FILE.gguf   (also each tensor's data's SHA-256)

Standard library only: reads the header (key/values skipped by their types) and the tensor
infos. Used by tools/make-kquant-mix-fixtures.sh and tests/test-kquant-mix.sh to compare the
per-tensor types of our quantized files with llama-quantize's; with --sha256 by
tools/make-gguf-kquant-fixtures.sh and tests/test-gguf-llamacpp.sh to show that our K-quant files
hold llama-quantize's tensors byte for byte (the files themselves are not committed)."""
import hashlib
import struct
import sys

TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K",
         11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 30: "BF16"}
# bytes per block, values per block (the data's size from its shape)
BLOCK = {0: (4, 1), 1: (2, 1), 30: (2, 1), 2: (18, 32), 3: (20, 32), 6: (22, 32), 7: (24, 32),
         8: (34, 32), 12: (144, 256), 13: (176, 256), 14: (210, 256)}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def main(path, sha=False):
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

    align = 32
    for _ in range(n_kv):
        key = b[o + 8:skip_str(o)]
        o = skip_str(o)
        t, = struct.unpack_from("<I", b, o)
        if key == b"general.alignment" and t == 4:
            align, = struct.unpack_from("<I", b, o + 4)
        o = skip_value(t, o + 4)
    infos = []
    for _ in range(n_tensors):
        n, = struct.unpack_from("<Q", b, o)
        name = b[o + 8:o + 8 + n].decode()
        o += 8 + n
        nd, = struct.unpack_from("<I", b, o)
        ne = struct.unpack_from("<%dQ" % nd, b, o + 4)
        o += 4 + 8 * nd
        t, off = struct.unpack_from("<IQ", b, o)
        o += 12
        infos.append((name, t, ne, off))
    base = (o + align - 1) // align * align
    for name, t, ne, off in infos:
        if not sha:
            print(name, TYPES.get(t, str(t)))
            continue
        if t not in BLOCK:
            sys.exit(f"{path}: tensor {name}: type {t} has no size here")
        count = 1
        for d in ne:
            count *= d
        size = count // BLOCK[t][1] * BLOCK[t][0]
        if base + off + size > len(b):
            sys.exit(f"{path}: tensor {name}: data past the end of the file")
        print(name, TYPES[t], hashlib.sha256(b[base + off:base + off + size]).hexdigest())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sha256":
        main(sys.argv[2], True)
    else:
        main(sys.argv[1])
