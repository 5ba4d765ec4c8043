#!/usr/bin/env python3
"""train-draft-model.py - trains models/wordnet-gemma-draft, the speculative-decoding draft of the
bundled model: the same tokenizer and data (tools/make-draft-stream.py's token streams), a
smaller Gemma 3 (hidden 128, 4 layers: 3 sliding-window + 1 global), the recipe of
tools/train-dict-model.py (AdamW 0.9/0.95, weight decay 0.1 on matrices, clipping 1.0, warm-up
then cosine to a tenth, batches of random windows, BF16 autocast). Needs torch, transformers, a GPU.

usage: tools/train-draft-model.py STREAM_DIR OUT_DIR [--steps 1200] [--hidden 128] ..."""
import argparse, math, os, time

import numpy as np
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, GenerationConfig

BOS, EOS, PAD = 2, 1, 0


def log(*a):
    print(*a, flush=True)


def config(a):
    types = ["sliding_attention"] * (a.layers - 1) + ["full_attention"]
    return Gemma3TextConfig(
        vocab_size=4096, hidden_size=a.hidden, intermediate_size=a.intermediate,
        num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=1,
        head_dim=64, query_pre_attn_scalar=64, sliding_window=64, layer_types=types,
        max_position_embeddings=1024, rope_theta=1e6, rope_local_base_freq=1e4, rms_norm_eps=1e-6,
        hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
        attn_logit_softcapping=None, final_logit_softcapping=None, attention_dropout=0.0,
        bos_token_id=BOS, eos_token_id=[EOS, 5], pad_token_id=PAD)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stream")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    load = lambda n: torch.from_numpy(np.fromfile(os.path.join(a.stream, n), dtype="<u2").astype(np.int64)).to(dev)
    train, held = load("train.u16"), load("heldout.u16")
    log("data: %d train tokens, %d held-out tokens" % (len(train), len(held)))
    cfg = config(a)
    cfg._attn_implementation = "sdpa"
    model = Gemma3ForCausalLM(cfg).to(dev)
    log("model: %d parameters" % sum(p.numel() for p in model.parameters()))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed)
    offs = torch.arange(a.seq + 1, device=dev)
    batch = lambda s, starts: s[starts[:, None] + offs]
    eval_starts = torch.arange(0, len(held) - a.seq - 1, a.seq, device=dev)[:256]

    def held_loss():
        model.eval()
        total = 0.0
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            for i in range(0, len(eval_starts), 64):
                x = batch(held, eval_starts[i:i + 64])
                lg = model(input_ids=x[:, :-1]).logits.float()
                total += torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), x[:, 1:].reshape(-1),
                                                           reduction="sum").item()
        model.train()
        return total / (len(eval_starts) * a.seq)

    def lr_at(step):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        f = (step - a.warmup) / max(1, a.steps - a.warmup)
        return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * f)))

    model.train()
    t0 = time.time()
    for step in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x = batch(train, torch.randint(0, len(train) - a.seq - 1, (a.batch,), device=dev, generator=gen))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            lg = model(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(lg.float().reshape(-1, lg.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == a.steps - 1:
            msg = "step %d/%d loss %.4f lr %.2e %.1f s" % (step, a.steps, loss.item(), lr_at(step), time.time() - t0)
            if step % 300 == 0 or step == a.steps - 1:
                msg += " | held-out loss %.4f" % held_loss()
            log(msg)
    log("trained %d steps of %d x %d tokens in %.1f s" % (a.steps, a.batch, a.seq, time.time() - t0))
    os.makedirs(a.out, exist_ok=True)
    model.to(torch.bfloat16).cpu().save_pretrained(a.out, safe_serialization=True)
    GenerationConfig(bos_token_id=BOS, eos_token_id=[EOS, 5], pad_token_id=PAD, do_sample=True,
                     temperature=0.7, top_k=64, top_p=0.95).save_pretrained(a.out)
    log("saved %s: %s" % (a.out, sorted(os.listdir(a.out))))


if __name__ == "__main__":
    main()
