/* sampling/candidates.h - operations on the sampler's candidate list (sampling/state.h): each keeps
 * the list's flags `sorted` and `id_order` true to what it did. Two families that must keep the
 * same sets (docs/sampling.md §3): the sort path (heap selection, radix sort) and the Gumbel
 * path's sorting-free selection (g3_cand_select_first). */
#ifndef G3_SAMPLING_CANDIDATES_H
#define G3_SAMPLING_CANDIDATES_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "sampling/state.h"
#include "sampling/test-hooks.h"

/* The total order of the candidate list: a before b iff logit greater, or equal and id smaller. */
static inline int g3_cand_before(const float *l, int32_t a, int32_t b) {
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

/* Whether the list is the whole vocabulary, implicit: what the Gumbel draw can check on its
 * way (draw_gumbel_checking) while the logits are the caller's, unchecked. */
static inline int g3_whole_list(const gemma3_sampler *s) {
    return s->form == G3_LIST_VOCAB && s->id_order && s->n_cand == s->n_vocab;
}

/* The first i with l[i] == lmax, the largest of the NaN-free l[0..n) (it must occur). */
int g3_first_max(const gemma3_sampler *s, const float *l, int n, float lmax);

/* Top-k: the first k of the total order, exactly k (ties at the k-th value go to lower ids). */
void g3_cand_top_k(gemma3_sampler *s, int k);

/* ---- the state's transitions (sampling/state.h says the states) ---- */

/* The list becomes the whole vocabulary, implicit (0..n_vocab-1, in id order). */
void g3_cand_whole_vocabulary(gemma3_sampler *s);
/* The logits' stages (enum g3_logits_stage): a call's start on the caller's vector; checked;
 * checked with the maximum found (mx, first at id `first`); temperature's division owed to the
 * Gumbel draw's pass, and made now (a no-op unless owed); the rank view built. */
void g3_logits_start(gemma3_sampler *s, const float *logits);
void g3_logits_checked(gemma3_sampler *s);
void g3_logits_max_found(gemma3_sampler *s, float mx, int first);
void g3_logits_owe_division(gemma3_sampler *s, float t);
void g3_logits_pay_division(gemma3_sampler *s);
void g3_logits_view_built(gemma3_sampler *s);
/* What was derived from the working logits (the known maximum, the rank view) is stale once
 * a sampler rewrites them: every writer of the logits calls this first. */
void g3_logits_rewritten(gemma3_sampler *s);
/* The working logits, writable: the caller's are copied (checked on the way) the first time. */
float *g3_writable_logits(gemma3_sampler *s);
/* Applies the NaN/+inf rules if nobody has yet (one read-only pass, finding the maximum). */
void g3_check_finite(gemma3_sampler *s);
/* l /= t over the candidates (vectorised when the list is the whole vocabulary); a finite logit
 * that overflows becomes FLT_MAX. */
void g3_divide_logits(gemma3_sampler *s, float t);
/* The NaN and +inf rules on the own copy of the whole vocabulary. */
void g3_fix_non_finite(gemma3_sampler *s);

/* A finite logit that overflows under temperature or penalties becomes FLT_MAX, not +inf. */
static inline float g3_clamp_overflow(float v) { return v > FLT_MAX ? FLT_MAX : v; }

/* Writes the list out when it is still the implicit 0..n_vocab-1 (G3_LIST_VOCAB) or a window
 * (below, written in the total order): every reader of s->cand but the heap selection calls this
 * first (prepare leaves the list implicit, so that a chain that starts with penalties, DRY,
 * temperature and top-k never writes n_vocab ids). */
void g3_cand_materialise(gemma3_sampler *s);

/* Windows: the list as a stretch of the whole vocabulary's total order, kept implicit (s->win)
 * so that top-p's nucleus or what XTC leaves of a vocabulary is never written out or sorted
 * unless a sampler reads it; the draws read a window straight (sampling/rank.h). The list is
 * then sorted in the total order. */
static inline int g3_win_contains(const gemma3_sampler *s, float l, int32_t id) {
    int after_hi = !s->win.has_hi || l < s->win.hi_l || (l == s->win.hi_l && id > s->win.hi_id);
    int upto_lo = !s->win.has_lo || l > s->win.lo_l || (l == s->win.lo_l && id <= s->win.lo_id);
    return after_hi && upto_lo;
}
/* Typical's set, kept implicit (s->typ): the tokens nearer than dist to the centre, and those
 * at the boundary's logit up to its id. Written out (g3_cand_materialise) it is in id order,
 * not typical's: the Gumbel draw and the kept set read no order, and the CDF walk, which does,
 * walks it itself or recomputes typical exactly (sampling.c). */
static inline int g3_typ_contains(const gemma3_sampler *s, float l, int32_t id) {
    return l == s->typ.l_b ? id <= s->typ.id_b : fabs((double)l - s->typ.center) < s->typ.dist;
}
/* Whether token id (logit l) belongs to the implicit list: the window, else typical's set
 * (not pending). */
static inline int g3_implicit_contains(const gemma3_sampler *s, float l, int32_t id) {
    return s->form == G3_LIST_WINDOW ? g3_win_contains(s, l, id) : g3_typ_contains(s, l, id);
}
/* The same, and for a pending set of typical's: 1 in it, 0 not, -1 when the bracket of its
 * crossing cannot tell. */
static inline int g3_implicit_side(const gemma3_sampler *s, float l, int32_t id) {
    if (s->form == G3_LIST_WINDOW || !s->typ.pending) return g3_implicit_contains(s, l, id);
    double d = fabs((double)l - s->typ.center);
    return d < s->typ.dist ? 1 : d > s->typ.far ? 0 : -1;
}
/* The list (the whole vocabulary) becomes its first `count` tokens, the last being `last` and
 * the first `first`. */
void g3_cand_window_prefix(gemma3_sampler *s, int32_t first, int32_t last, int count);
/* The list (the whole vocabulary, largest logit lmax) loses its first tokens, up to and including
 * `dropped` (none when -1); `first` is the one after it and `count` how many are left. */
void g3_cand_window_after(gemma3_sampler *s, float lmax, int32_t dropped, int32_t first,
                          int count);

/* Sorts ids, ascending on entry, into the total order of the logits l: insertion sort for a
 * few, else a stable radix sort on the float keys (ids_tmp, keys, keys_tmp [n] scratch). */
void g3_sort_ids_total(const float *l, int32_t *ids, int n, int32_t *ids_tmp, uint32_t *keys,
                       uint32_t *keys_tmp);

/* The largest logit among the candidates. */
float g3_cand_max(const gemma3_sampler *s);

/* LSD radix sort of n non-negative ids (tmp [n] is scratch). */
void g3_radix_sort_ids(int32_t *ids, int32_t *tmp, int n);

/* The candidate ids in ascending order, for order-independent sums: the list itself when it is
 * in id order, 0..n_vocab-1 when it holds every id, else a sorted copy in ids_tmp2 (uses
 * ids_tmp as scratch). */
const int32_t *g3_cand_ids_ascending(gemma3_sampler *s);

/* Softmax normaliser over the candidates: Z = sum exp(l - lmax) in double, id order. */
double g3_cand_z(gemma3_sampler *s, float lmax);
/* The entropy of the candidates' softmax, -sum p ln p with p = e^(l - lmax) / z, in id order. */
double g3_cand_entropy(gemma3_sampler *s, float lmax, double z);

/* Heap selection: writes the top m candidates (m <= n_cand) in the total order to ids_tmp,
 * sorted, leaving the list untouched; g3_cand_keep_selected(s, m) then makes them the list.
 * Returns 1 when the list is the whole vocabulary (0..n_vocab-1) and some logit is NaN or
 * +-inf (the scan checks every value on the way, so that the caller's first pass over
 * unchecked logits is this one), else 0. */
int g3_cand_select_top(gemma3_sampler *s, int m);
void g3_cand_keep_selected(gemma3_sampler *s, int m);
/* g3_cand_select_top on checked logits (no NaN or +-inf): the same answer, found faster over a
 * whole vocabulary (a block-maxima prefilter first). */
void g3_cand_select_top_checked(gemma3_sampler *s, int m);

/* Sorts the whole list into the total order (one O(n) radix sort). */
void g3_cand_sort(gemma3_sampler *s);
/* Makes the list sorted, by the cheaper of heap selection and the radix sort. */
void g3_cand_ensure_sorted(gemma3_sampler *s);

/* Keeps the first `count` candidates of the total order (by_mass = 0), or the shortest prefix of
 * the total order whose fixed-point mass (s->mass, parallel to the list) reaches `target`, but
 * at least min_count (by_mass = 1), without sorting: one pass computes the keys and a histogram
 * of their top digit; a second pass lists the positions above the boundary bucket and in it;
 * radix selection on the (few) boundary-bucket keys finds the boundary key t; ties at t are
 * resolved by id with one more selection on ~id. The list keeps its order. O(n), deterministic. */
void g3_cand_select_first(gemma3_sampler *s, int by_mass, int count, uint64_t target,
                          int min_count);
/* Top-p's boundary over the whole vocabulary (a list in id order, or not written out; s->mass
 * its fixed masses by id, lmax its maximum, 0 < target <= their total): the length of the
 * shortest prefix of the total order whose mass reaches target, its last token into *last.
 * One pass buckets every token of positive mass by its distance below lmax (RADIX_BUCKETS
 * buckets over 29.5 nats: a monotone map, equal logits in one bucket; the tokens of zero mass,
 * below lmax - 28, come after all others in the total order and never hold the boundary) and
 * sums the masses per bucket; the walk down the buckets finds the one where the mass reaches
 * target; the band scan lists that bucket's tokens, which alone are sorted into the total order,
 * and counts those of the buckets before it. The prefix is the one g3_cand_select_first keeps;
 * the caller makes it a window. */
int g3_cand_mass_prefix(gemma3_sampler *s, float lmax, uint64_t target, int32_t *last);

#endif
