#!/usr/bin/env python3
"""ref-forward.py - an independent Gemma 3 text forward pass in plain Python (float64, no
numpy, no torch), for the knobs that no Hugging Face golden can hold.

    python3 tools/ref-forward.py CKPT_DIR TOKENS OUT.f32 [--attn-softcap X]
    python3 tools/ref-forward.py CKPT_DIR --check GOLDEN_NAME    (against tests/data/golden)

Reads a causal-layout BF16 checkpoint (model.* tensor names, config.json as gen-checkpoint
writes it) and writes the logits of every position, row-major float32 [n_tokens][vocab].
--attn-softcap overrides the config's attn_logit_softcapping: transformers' Gemma 3 ignores that
key, so tests/data/golden/tiny-knobs-acap1.logits.f32 comes from here (made with
`python3 tools/ref-forward.py tests/data/golden/tiny-knobs 16 ... --attn-softcap 1.0`, TOKENS
a count = the golden's first N tokens). --check runs the golden's tokens and prints the max
difference from HF's float32 logits, which validates this implementation (expect ~1e-5).
Follows transformers' Gemma3ForCausalLM: embedding * sqrt(H); RMSNorm x / rms * (1 + w);
QK-norm; RoPE with rotate_half (sliding layers theta rope_local_base_freq, full layers
rope_theta, linear scaling ignored: unscaled checkpoints only); scores * qpas^-0.5, then
cap * tanh(s / cap); sliding window p - u < W; GeLU-tanh MLP; sandwich norms; tied LM head;
final softcap."""
import json
import math
import os
import struct
import sys


def load(ckpt):
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(ckpt, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    w = {}
    for name, t in hdr.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "BF16", name
        b, e = t["data_offsets"]
        raw = struct.unpack("<%dH" % ((e - b) // 2), data[b:e])
        bits = struct.pack("<%dI" % len(raw), *[r << 16 for r in raw])
        vals = struct.unpack("<%df" % len(raw), bits)
        shape = t["shape"]
        if len(shape) == 2:
            cols = shape[1]
            w[name] = [vals[i * cols:(i + 1) * cols] for i in range(shape[0])]
        else:
            w[name] = list(vals)
    return cfg, w


def matvec(m, x):
    return [sum(a * b for a, b in zip(row, x)) for row in m]


def rmsnorm(x, g, eps):
    r = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * r * (1.0 + gi) for v, gi in zip(x, g)]


def gelu_tanh(z):
    return 0.5 * z * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z ** 3)))


def rope(x, pos, theta):
    hd = len(x)
    half = hd // 2
    out = [0.0] * hd
    for i in range(half):
        # inv_freq as HF computes it: float32 theta ** (2i/hd); the angle in float64 here
        f = 1.0 / (theta ** ((2 * i) / hd))
        c, s = math.cos(pos * f), math.sin(pos * f)
        out[i] = x[i] * c - x[i + half] * s
        out[i + half] = x[i + half] * c + x[i] * s
    return out


def forward(cfg, w, tokens, attn_cap):
    H, hd = cfg["hidden_size"], cfg["head_dim"]
    nH, nKV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    L, eps, W = cfg["num_hidden_layers"], cfg.get("rms_norm_eps", 1e-6), cfg["sliding_window"]
    types = cfg["layer_types"]
    scale = cfg["query_pre_attn_scalar"] ** -0.5
    fcap = cfg.get("final_logit_softcapping")
    th_full, th_slide = cfg.get("rope_theta", 1e6), cfg.get("rope_local_base_freq", 1e4)
    assert not cfg.get("rope_scaling"), "linear rope scaling is not modelled"
    emb = w["model.embed_tokens.weight"]
    group = nH // nKV
    xs = [[v * math.sqrt(H) for v in emb[t]] for t in tokens]
    for l in range(L):
        p = f"model.layers.{l}."
        sliding = types[l] == "sliding_attention"
        theta = th_slide if sliding else th_full
        qs, ks, vs = [], [], []
        for pos, x in enumerate(xs):
            h = rmsnorm(x, w[p + "input_layernorm.weight"], eps)
            q, k, v = (matvec(w[p + f"self_attn.{n}_proj.weight"], h) for n in "qkv")
            qn, kn = w[p + "self_attn.q_norm.weight"], w[p + "self_attn.k_norm.weight"]
            qs.append([rope(rmsnorm(q[i * hd:(i + 1) * hd], qn, eps), pos, theta)
                       for i in range(nH)])
            ks.append([rope(rmsnorm(k[i * hd:(i + 1) * hd], kn, eps), pos, theta)
                       for i in range(nKV)])
            vs.append([v[i * hd:(i + 1) * hd] for i in range(nKV)])
        new = []
        for pos, x in enumerate(xs):
            att = []
            for h_ in range(nH):
                j = h_ // group
                us = [u for u in range(pos + 1) if not sliding or pos - u < W]
                sc = []
                for u in us:
                    s = sum(a * b for a, b in zip(qs[pos][h_], ks[u][j])) * scale
                    if attn_cap:
                        s = attn_cap * math.tanh(s / attn_cap)
                    sc.append(s)
                m = max(sc)
                e = [math.exp(s - m) for s in sc]
                z = sum(e)
                o = [0.0] * hd
                for wt, u in zip(e, us):
                    for d in range(hd):
                        o[d] += wt / z * vs[u][j][d]
                att.extend(o)
            a = rmsnorm(matvec(w[p + "self_attn.o_proj.weight"], att),
                        w[p + "post_attention_layernorm.weight"], eps)
            x = [xi + ai for xi, ai in zip(x, a)]
            h = rmsnorm(x, w[p + "pre_feedforward_layernorm.weight"], eps)
            g = matvec(w[p + "mlp.gate_proj.weight"], h)
            u_ = matvec(w[p + "mlp.up_proj.weight"], h)
            m_ = matvec(w[p + "mlp.down_proj.weight"], [gelu_tanh(a) * b for a, b in zip(g, u_)])
            m_ = rmsnorm(m_, w[p + "post_feedforward_layernorm.weight"], eps)
            new.append([xi + mi for xi, mi in zip(x, m_)])
        xs = new
    out = []
    for x in xs:
        h = rmsnorm(x, w["model.norm.weight"], eps)
        lg = matvec(emb, h)
        if fcap:
            lg = [fcap * math.tanh(v / fcap) for v in lg]
        out.append(lg)
    return out


def main():
    a = sys.argv[1:]
    cfg, w = load(a[0])
    if a[1] == "--check":
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        root = os.path.join(repo, "tests", "data", "golden")
        with open(os.path.join(root, a[2] + ".json")) as f:
            g = json.load(f)
        with open(os.path.join(root, a[2] + ".logits.f32"), "rb") as f:
            ref = struct.unpack("<%df" % (g["n_tokens"] * g["n_vocab"]), f.read())
        got = forward(cfg, w, g["tokens"], cfg.get("attn_logit_softcapping"))
        V = g["n_vocab"]
        d = max(abs(got[t][i] - ref[t * V + i]) for t in range(len(got)) for i in range(V))
        print(f"{a[2]}: max |python float64 - HF float32| = {d:.3e}")
        return 0 if d < 1e-4 else 1
    cap = cfg.get("attn_logit_softcapping")
    if "--attn-softcap" in a:
        cap = float(a[a.index("--attn-softcap") + 1])
    toks = a[1]
    if toks.isdigit():
        with open(a[0].rstrip("/") + ".json") as f:  # the golden's json beside its directory
            toks = json.load(f)["tokens"][:int(toks)]
    else:
        toks = [int(t) for t in toks.split(",")]
    out = forward(cfg, w, toks, cap)
    with open(a[2], "wb") as f:
        for row in out:
            f.write(struct.pack("<%df" % len(row), *row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
