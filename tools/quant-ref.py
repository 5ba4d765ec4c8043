#!/usr/bin/env python3
"""quant-ref.py - an independent model of llama.cpp's Q8_0 / Q4_0 reference quantizers.

    python3 tools/quant-ref.py [OUTDIR]        (default tests/data/quant)

Writes a deterministic test tensor and the blocks llama.cpp's quantize_row_q8_0_ref and
quantize_row_q4_0_ref make from it; tests/test-quant.c checks quant.c against them byte for byte.
Standard library only (runs on a bare Debian), no numpy.

  input.f32   ROWS x COLS little-endian float32
  q8_0.bin    ROWS x COLS/32 blocks of 34 bytes (fp16 d, 32 x int8)
  q4_0.bin    ROWS x COLS/32 blocks of 18 bytes (fp16 d, 16 bytes of nibbles)

The rules modelled (from ggml-quants.c), every step in float32:
  Q8_0: amax = max |x|; d = amax / 127; id = d ? 1/d : 0; q = roundf(x * id)
  Q4_0: m = the first x of largest |x|; d = m / -8; id = d ? 1/d : 0;
        q = min(15, (int8_t)(x * id + 8.5f)), element j in the low nibble of byte j, j+16 high
  fp16: round to nearest even (F16C _cvtss_sh(x, 0)); overflow to infinity.
float32 arithmetic is emulated by rounding each double result to float32 (struct round-trip):
a double holds the exact product of two floats, and for + - * / a double rounding through 53
bits is innocuous for a 24-bit target, so this equals one float32 rounding. roundf rounds half
away from zero (Python's round() would round half to even, so it is not used).
"""
import math
import os
import struct
import sys

ROWS, COLS, QK = 200, 128, 32


def f32(x):
    """x rounded to the nearest float32 (round to nearest even), as a Python float."""
    return struct.unpack('<f', struct.pack('<f', x))[0]


def f16_bits(x):
    """IEEE half bits of float32 x, round to nearest even, too large -> infinity."""
    try:
        return struct.unpack('<H', struct.pack('<e', x))[0]
    except OverflowError:
        return 0xFC00 if x < 0 else 0x7C00


def roundf(x):
    """C roundf: halves go away from zero."""
    r = math.floor(abs(x) + 0.5)  # exact: |x| < 2^24 here, so |x| + 0.5 is exact in a double
    return -r if x < 0 else r


def trunc_int8(x):
    """C's (int8_t) conversion of a float in range: truncation toward zero."""
    v = int(x)
    assert -128 <= v <= 127, x
    return v


def q8_0_block(x):
    amax = 0.0
    for v in x:
        amax = max(amax, abs(v))
    d = f32(amax / 127.0)
    idv = f32(1.0 / d) if d != 0.0 else 0.0
    qs = [trunc_int8(roundf(f32(v * idv))) for v in x]
    return struct.pack('<H', f16_bits(d)) + struct.pack('<32b', *qs)


def q4_0_block(x):
    amax, extreme = 0.0, 0.0
    for v in x:
        if amax < abs(v):
            amax, extreme = abs(v), v
    d = f32(extreme / -8.0)
    idv = f32(1.0 / d) if d != 0.0 else 0.0
    q = [min(15, trunc_int8(f32(f32(v * idv) + 8.5))) for v in x]
    nib = bytes(q[j] | q[j + QK // 2] << 4 for j in range(QK // 2))
    return struct.pack('<H', f16_bits(d)) + nib


class Rng:
    """splitmix64: a fixed, portable stream."""

    def __init__(self, seed):
        self.s = seed & (2**64 - 1)

    def u64(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        return z ^ (z >> 31)

    def uniform(self):  # [0, 1)
        return (self.u64() >> 11) / float(1 << 53)

    def gauss(self):  # Irwin-Hall(12) - 6: no libm, so identical everywhere
        return sum(self.uniform() for _ in range(12)) - 6.0


def bf16_round(x):
    """x as a bf16 number (float32 with the low 16 bits cleared after RNE)."""
    u = struct.unpack('<I', struct.pack('<f', x))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack('<f', struct.pack('<I', u))[0]


def make_block(kind, rng):
    """32 float32 values of one edge-case kind."""
    g = [rng.gauss() for _ in range(QK)]
    if kind == 0:  # plain gaussian at a random scale 1e-3 .. 1e3
        s = 10.0 ** (rng.uniform() * 6 - 3)
        return [f32(v * s) for v in g]
    if kind == 1:  # all zero
        return [0.0] * QK
    if kind == 2:  # Q8 ties: amax 127 -> d = 1 exactly, so x * id is k + 0.5
        v = [float(int(rng.uniform() * 253) - 126) + 0.5 for _ in range(QK)]
        v[int(rng.uniform() * QK)] = 127.0 if rng.uniform() < 0.5 else -127.0
        return v
    if kind == 3:  # Q4 edges: extreme -8 or +8 -> d = +-1, x + 8.5 lands on integers
        v = [float(int(rng.uniform() * 31) - 15) * 0.5 for _ in range(QK)]
        v[int(rng.uniform() * QK)] = -8.0 if rng.uniform() < 0.5 else 8.0
        return v
    if kind == 4:  # largest magnitude negative, with its positive twin after it
        v = [f32(x * 0.25) for x in g]
        i = int(rng.uniform() * (QK - 1))
        v[i], v[i + 1] = -3.0, 3.0
        return v
    if kind == 5:  # float32 subnormals beside a tiny (normal) maximum; 1/d stays finite
        v = [f32(x * 1e-39) for x in g]
        v[int(rng.uniform() * QK)] = f32(-2e-36)
        return v
    if kind == 6:  # d a half subnormal (amax ~ 1e-4 .. 1e-6)
        s = 10.0 ** (-4 - 2 * rng.uniform())
        return [f32(x * s) for x in g]
    if kind == 7:  # d below the smallest half: stored as zero
        return [f32(x * 1e-9) for x in g]
    if kind == 8:  # near the half maximum, and over it (d overflows to infinity for Q8)
        s = 65504.0 if rng.uniform() < 0.5 else 3e7
        return [f32(max(-1.0, min(1.0, x / 3)) * s) for x in g]
    if kind == 9:  # real bf16 numbers, as in a Gemma checkpoint
        return [bf16_round(x * 0.02) for x in g]
    if kind == 10:  # d exactly on a half rounding boundary: amax = 127 * (1 + 2^-11)
        v = [f32(x * 20) for x in g]
        v[int(rng.uniform() * QK)] = f32(127.0 * (1 + 2.0**-11) * (1 if rng.uniform() < .5 else -1))
        return v
    # kind 11: a single nonzero value (every other q is exactly 0 or 8)
    v = [0.0] * QK
    v[int(rng.uniform() * QK)] = f32(g[0])
    return v


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join('tests', 'data', 'quant')
    os.makedirs(out, exist_ok=True)
    rng = Rng(20260723)
    xs = []
    for b in range(ROWS * COLS // QK):
        kind = b % 12 if b < 240 else int(rng.uniform() * 12)
        xs.extend(make_block(kind, rng))
    xs = [f32(v) for v in xs]
    with open(os.path.join(out, 'input.f32'), 'wb') as f:
        f.write(struct.pack('<%df' % len(xs), *xs))
    with open(os.path.join(out, 'q8_0.bin'), 'wb') as f:
        for b in range(0, len(xs), QK):
            f.write(q8_0_block(xs[b:b + QK]))
    with open(os.path.join(out, 'q4_0.bin'), 'wb') as f:
        for b in range(0, len(xs), QK):
            f.write(q4_0_block(xs[b:b + QK]))


if __name__ == '__main__':
    main()
