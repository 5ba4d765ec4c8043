/* sampling/typical.h - what the draws need of typical sampling (sampling/typical.c). */
#ifndef G3_SAMPLING_TYPICAL_H
#define G3_SAMPLING_TYPICAL_H

#include "sampling/state.h"

/* The CDF draw's way back when typical's implicit set cannot be walked from the view: the
 * exact typical, from the whole vocabulary it was taken from. */
void g3_typical_settle(gemma3_sampler *s);
/* A found set of typical's for the Gumbel draw: its first token, which the draw starts from, or
 * the set written out where the view cannot tell it. */
void g3_typical_gumbel_top(gemma3_sampler *s);

#endif
