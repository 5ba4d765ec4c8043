#!/usr/bin/env python3
"""tools/check-gguf-blocks.py - are our quantized blocks byte-identical to llama.cpp's?

Compares every matrix of a checkpoint written by `gemma3 quantize` with the same tensor of a
GGUF that llama.cpp made from the same BF16 weights (convert_hf_to_gguf.py, then
llama-quantize --pure). Needs llama.cpp's gguf-py and numpy:

    PYTHONPATH=/path/to/llama.cpp/gguf-py python3 tools/check-gguf-blocks.py OUTDIR FILE.gguf
"""
import json
import re
import struct
import sys

import numpy as np
from gguf import GGUFReader

GGUF_NAMES = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
              "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}


def gguf_name(name):
    if name.endswith("embed_tokens.weight"):
        return "token_embd.weight"
    m = re.search(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)_proj\.weight$", name)
    return "blk.%s.%s.weight" % (m.group(1), GGUF_NAMES[m.group(2)]) if m else None


def main():
    ours_dir, gguf_path = sys.argv[1], sys.argv[2]
    theirs = {t.name: t for t in GGUFReader(gguf_path).tensors}
    with open(ours_dir + "/model.safetensors", "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        same = total = 0
        for name, entry in header.items():
            if name == "__metadata__" or entry["dtype"] != "U8":
                continue
            begin, end = entry["data_offsets"]
            f.seek(8 + n + begin)
            ours = np.frombuffer(f.read(end - begin), np.uint8)
            other = np.asarray(theirs[gguf_name(name)].data).reshape(-1).view(np.uint8)
            total += 1
            if ours.size == other.size and (ours == other).all():
                same += 1
            else:
                print("differs: %s" % name)
    print("%s: %d of %d quantized tensors byte-identical to %s" %
          (header["__metadata__"]["gemma3.quant"], same, total, gguf_path))
    return 0 if same == total else 1


sys.exit(main())
