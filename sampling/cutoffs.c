/* sampling/cutoffs.c - Hugging Face's epsilon and eta sampling (transformers'
 * EpsilonLogitsWarper and EtaLogitsWarper): drop every token whose probability lies below a
 * cutoff, epsilon itself or, for eta, min(eta, sqrt(eta) e^-H) with H the entropy, keeping at
 * least the first max(1, min_keep) tokens of the total order (min-p's floor; transformers keeps
 * min_tokens_to_keep, 1 by default). p_i = e^(l_i - lmax) / Z and H come from sums in id order,
 * and each token is compared on its own: the same set whatever the list's order, so both draws
 * (CDF and Gumbel) stay exact draws from it. */
#include <math.h>

#include "sampling/candidates.h"
#include "sampling/samplers.h"

/* Keeps the candidates with p_i >= cut (in list order, so the list's order flags still hold),
 * or the floor when fewer reach it. */
static void keep_at_least_probability(gemma3_sampler *s, double cut, float lmax, double z) {
    g3_cand_materialise(s);
    int n = s->n_cand, count = 0;
    for (int j = 0; j < n; j++) {
        s->w[j] = exp((double)s->logits[s->cand[j]] - lmax) / z;
        count += s->w[j] >= cut;
    }
    int floor_keep = s->p.min_keep > 1 ? s->p.min_keep : 1;
    if (count < floor_keep) {
        g3_cand_top_k(s, floor_keep);
        return;
    }
    int m = 0;
    for (int j = 0; j < n; j++)
        if (s->w[j] >= cut) s->cand[m++] = s->cand[j];
    s->n_cand = m;
}

void g3_apply_epsilon(gemma3_sampler *s, const struct g3_chain_step *at) {
    float lmax = g3_cand_max(s);
    if (s->n_cand <= 1 || lmax == -INFINITY) return;
    keep_at_least_probability(s, s->p.epsilon_cutoff, lmax, g3_cand_z(s, lmax));
}

void g3_apply_eta(gemma3_sampler *s, const struct g3_chain_step *at) {
    float lmax = g3_cand_max(s);
    if (s->n_cand <= 1 || lmax == -INFINITY) return;
    double z = g3_cand_z(s, lmax), eta = s->p.eta_cutoff;
    double cut = fmin(eta, sqrt(eta) * exp(-g3_cand_entropy(s, lmax, z)));
    keep_at_least_probability(s, cut, lmax, z);
}
