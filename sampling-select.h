/* sampling-select.h - operations on the sampler's candidate list (sampling-impl.h): each keeps
 * the list's flags `sorted` and `id_order` true to what it did. Two families that must keep the
 * same sets (docs/sampling.md §3): the sort path (heap selection, radix sort) and the Gumbel
 * path's sorting-free selection (g3_cand_select_first). */
#ifndef G3_SAMPLING_SELECT_H
#define G3_SAMPLING_SELECT_H

#include <stdint.h>

#include "sampling-impl.h"
#include "sampling.h"

/* The total order of the candidate list: a before b iff logit greater, or equal and id smaller. */
static inline int g3_cand_before(const float *l, int32_t a, int32_t b) {
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

/* Writes the list out when it is still the implicit 0..n_vocab-1 (cand_lazy): every reader of
 * s->cand but the heap selection calls this first (prepare leaves the list implicit, so that a
 * chain that starts with penalties, DRY, temperature and top-k never writes n_vocab ids). */
void g3_cand_materialise(gemma3_sampler *s);

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

#endif
