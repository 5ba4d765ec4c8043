#!/usr/bin/env python3
"""poke-weights.py SRC DST TENSOR FIRST COUNT VALUE: copies the checkpoint directory SRC to DST
(other files copied as they are) with COUNT consecutive BF16 elements of TENSOR, from element
FIRST, set to VALUE (nan, inf, -inf or a number); for a U8 tensor (quantized blocks) FIRST is a
byte offset and VALUE f16nan writes an fp16 NaN there (a block's scale). For
tests/test-hostile.sh: weights no writer would produce, in a file that is otherwise well formed."""
import json
import os
import shutil
import struct
import sys

src, dst, name = sys.argv[1], sys.argv[2], sys.argv[3]
first, count, value = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
os.makedirs(dst, exist_ok=True)
for f in os.listdir(src):
    if f != "model.safetensors":
        shutil.copy(os.path.join(src, f), dst)
data = bytearray(open(os.path.join(src, "model.safetensors"), "rb").read())
n = struct.unpack("<Q", data[:8])[0]
tensor = json.loads(data[8:8 + n])[name]
base = 8 + n + tensor["data_offsets"][0]
if tensor["dtype"] == "U8":
    assert value == "f16nan"
    data[base + first:base + first + 2] = struct.pack("<H", 0x7E00)
    open(os.path.join(dst, "model.safetensors"), "wb").write(data)
    sys.exit(0)
assert tensor["dtype"] == "BF16", tensor["dtype"]
special = {"nan": 0x7FC0, "inf": 0x7F80, "-inf": 0xFF80}
bits = special[value] if value in special else struct.unpack("<I", struct.pack("<f", float(value)))[0] >> 16
at = 8 + n + tensor["data_offsets"][0] + 2 * first
assert at + 2 * count <= 8 + n + tensor["data_offsets"][1]
data[at:at + 2 * count] = struct.pack("<H", bits) * count
open(os.path.join(dst, "model.safetensors"), "wb").write(data)
