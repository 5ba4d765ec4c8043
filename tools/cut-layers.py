#!/usr/bin/env python3
"""tools/cut-layers.py SRC DST N - a checkpoint directory with only the first N layers of SRC's
(embedding, layers 0..N-1, final norm: the same bytes), for small test files of trained weights
(tools/make-gguf-fixtures.sh: the F16 GGUF). config.json gets num_hidden_layers N and the first N
layer_types; the tokenizer files are copied."""
import json, os, re, shutil, struct, sys

src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(dst, exist_ok=True)
with open(os.path.join(src, "model.safetensors"), "rb") as f:
    hlen = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(hlen))
    base = 8 + hlen
    out, blobs, off = {}, [], 0
    for name, t in header.items():
        if name == "__metadata__":
            out[name] = t
            continue
        m = re.match(r"model\.layers\.(\d+)\.", name)
        if m and int(m.group(1)) >= n:
            continue
        s, e = t["data_offsets"]
        f.seek(base + s)
        blobs.append(f.read(e - s))
        out[name] = dict(t, data_offsets=[off, off + e - s])
        off += e - s
h = json.dumps(out).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(dst, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for b in blobs:
        f.write(b)
cfg = json.load(open(os.path.join(src, "config.json")))
cfg["num_hidden_layers"] = n
if "layer_types" in cfg:
    cfg["layer_types"] = cfg["layer_types"][:n]
json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
for fn in os.listdir(src):
    if fn.startswith("tokenizer") or fn == "generation_config.json":
        shutil.copy(os.path.join(src, fn), dst)
