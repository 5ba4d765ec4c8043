#!/usr/bin/env python3
"""make-golden.py - reference logits for a synthetic checkpoint from Hugging Face transformers.

    python3 tools/make-golden.py CKPT_DIR OUT_DIR [NAME]

Loads CKPT_DIR (written by build/tools/gen-checkpoint) with Gemma3ForCausalLM in float32 with
eager attention, on the GPU when there is one, and writes OUT_DIR/NAME.logits.f32 (row-major
float32 [n_tokens][n_vocab]) and OUT_DIR/NAME.json in the format of tests/data/golden/README.md.

The 40 tokens are drawn from a fixed seed and always include the last ids of the vocabulary (the
embedding rows and logits past the last full SIMD block). Needs torch and transformers; reads
nothing from the network."""
import json
import random
import sys

import torch
import transformers
from transformers import AutoConfig, Gemma3ForCausalLM


def main():
    ckpt, out = sys.argv[1], sys.argv[2]
    name = sys.argv[3] if len(sys.argv) > 3 else ckpt.rstrip("/").split("/")[-1]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cfg = AutoConfig.from_pretrained(ckpt)
    model = Gemma3ForCausalLM.from_pretrained(ckpt, config=cfg, dtype=torch.float32,
                                              attn_implementation="eager").to(dev).eval()
    V = cfg.vocab_size
    rng = random.Random(20)
    tokens = [2] + [rng.randrange(3, V) for _ in range(39)]
    tokens[7], tokens[19], tokens[31] = V - 1, V - 2, V - 3  # ragged-tail rows of the embedding
    ids = torch.tensor([tokens], device=dev)
    with torch.no_grad():
        logits = model(ids, use_cache=False).logits[0].float().cpu()
        prompt = tokens[:12]
        gen = model.generate(torch.tensor([prompt], device=dev), max_new_tokens=24, do_sample=False,
                             min_new_tokens=24, eos_token_id=None, pad_token_id=0, use_cache=True)
        new = gen[0, 12:].tolist()
        m16 = Gemma3ForCausalLM.from_pretrained(ckpt, config=cfg, dtype=torch.bfloat16,
                                                attn_implementation="eager").to(dev).eval()
        l16 = m16(ids, use_cache=False).logits[0].float().cpu()
    logits.numpy().astype("<f4").tofile(f"{out}/{name}.logits.f32")
    top2 = logits.topk(2, dim=-1).values
    gap = (top2[:, 0] - top2[:, 1]).min().item()
    argmax = logits.argmax(-1).tolist()
    meta = {
        "model": name,
        "tokens": tokens,
        "n_tokens": len(tokens),
        "n_vocab": V,
        "logits_file": f"{name}.logits.f32",
        "layout": "row-major float32 [n_tokens][n_vocab]",
        "greedy_prompt": prompt,
        "greedy_new_tokens": new,
        "reference": f"transformers {transformers.__version__} Gemma3ForCausalLM, float32, eager "
                     f"attention; torch {torch.__version__} on {dev}",
        "layer_types": list(cfg.layer_types),
        "sliding_window": cfg.sliding_window,
        "query_pre_attn_scalar": cfg.query_pre_attn_scalar,
        "head_dim": cfg.head_dim,
        "attn_logit_softcapping": cfg.attn_logit_softcapping,
        "final_logit_softcapping": cfg.final_logit_softcapping,
        "max_abs_logit": logits.abs().max().item(),
        "bf16_model_max_abs_diff_vs_fp32": (l16 - logits).abs().max().item(),
        "argmax": argmax,
        "argmax_equals_input_frac": sum(a == b for a, b in zip(argmax[:-1], tokens[1:])) / 39,
        "min_top2_gap": gap,
        "logit_std": logits.std().item(),
    }
    with open(f"{out}/{name}.json", "w") as f:
        json.dump(meta, f, indent=1)
    print(name, "max_abs_logit", meta["max_abs_logit"], "min_top2_gap", gap,
          "bf16 diff", meta["bf16_model_max_abs_diff_vs_fp32"], "new", new)


if __name__ == "__main__":
    main()
