/*
 * prefix_cache.c - prefixes kept after their slot moved on: a slot's cached
 * tokens about to be dropped for a new request are parked on a spare sequence
 * of the KV cache instead (the cells gain the spare sequence; nothing is
 * copied), where any later prompt may continue from them. Least recently used
 * entries go first: past the --cache-ram budget, or when a decode needs cells.
 * An entry is continued from only as far as the cache can resume it (a sliding-window
 * cache lets the cells before a cut go). An entry belongs to the tenant whose request
 * decoded it: only that tenant's prompts continue from it (eviction is shared: it says
 * nothing of content).
 */
#include "serve_impl.h"

#include <stdlib.h>
#include <string.h>

#define PARK_MIN 16 /* shorter runs are cheaper to recompute than to keep */

struct pc_entry {
    int32_t seq; /* the spare sequence holding the cells, positions 0 .. n-1 */
    int32_t *tokens;
    int32_t n;
    uint64_t last_used;
    uint32_t tenant;
};

struct srv_prefix_cache {
    struct kiln_context *ctx;
    struct srv_metrics *metrics;
    struct pc_entry *e;
    int n_entries;
    long long budget_cells; /* < 0: no limit */
    uint64_t tick;
};

struct srv_prefix_cache *srv_pcache_new(struct kiln_context *ctx, int32_t first_seq, int n_seqs, long long budget_mib,
                                        struct srv_metrics *metrics) {
    struct srv_prefix_cache *pc = calloc(1, sizeof *pc);
    if (!pc) return NULL;
    pc->ctx = ctx;
    pc->metrics = metrics;
    pc->n_entries = n_seqs > 0 ? n_seqs : 0;
    pc->e = calloc((size_t)(pc->n_entries ? pc->n_entries : 1), sizeof *pc->e);
    if (!pc->e) {
        free(pc);
        return NULL;
    }
    for (int i = 0; i < pc->n_entries; i++) pc->e[i].seq = first_seq + i;
    size_t cell = kiln_kv_size_bytes(ctx) / (kiln_n_ctx(ctx) ? kiln_n_ctx(ctx) : 1);
    pc->budget_cells = budget_mib < 0 ? -1 : cell ? (long long)((unsigned long long)budget_mib * 1048576u / cell) : 0;
    return pc;
}

void srv_pcache_free(struct srv_prefix_cache *pc) {
    if (!pc) return;
    for (int i = 0; i < pc->n_entries; i++) free(pc->e[i].tokens);
    free(pc->e);
    free(pc);
}

static void drop(struct srv_prefix_cache *pc, struct pc_entry *en) {
    kiln_kv_seq_rm(pc->ctx, en->seq, 0, -1); /* cells a running sequence shares stay with it */
    free(en->tokens);
    en->tokens = NULL;
    en->n = 0;
}

static int32_t common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

/* The least recently used entry, skipping those the prompt want[0, n_want) of tenant would
 * continue from (another tenant's are not: whether they match must not change anything). */
static struct pc_entry *lru(struct srv_prefix_cache *pc, const int32_t *want, int32_t n_want, uint32_t tenant) {
    struct pc_entry *best = NULL;
    for (int i = 0; i < pc->n_entries; i++) {
        struct pc_entry *en = &pc->e[i];
        if (en->n == 0 ||
            (want && en->tenant == tenant && common_prefix(en->tokens, en->n, want, n_want) >= PARK_MIN))
            continue;
        if (!best || en->last_used < best->last_used) best = en;
    }
    return best;
}

bool srv_pcache_evict_lru(struct srv_prefix_cache *pc) {
    struct pc_entry *en = pc ? lru(pc, NULL, 0, 0) : NULL;
    if (!en) return false;
    srv_metrics_evicted(pc->metrics, en->n);
    drop(pc, en);
    return true;
}

long long srv_pcache_tokens(const struct srv_prefix_cache *pc) {
    long long n = 0;
    for (int i = 0; pc && i < pc->n_entries; i++) n += pc->e[i].n;
    return n;
}

void srv_pcache_set_metrics(struct srv_prefix_cache *pc, struct srv_metrics *m) {
    if (pc) pc->metrics = m;
}

bool srv_pcache_park(struct srv_prefix_cache *pc, int32_t seq, const int32_t *tokens, int32_t n, int32_t keep,
                     const int32_t *want, int32_t n_want, uint32_t tenant) {
    if (!pc || pc->n_entries == 0 || n - keep < PARK_MIN || (pc->budget_cells >= 0 && n > pc->budget_cells))
        return false;
    /* already held whole by an entry: that one is fresh again; an entry this run extends is replaced */
    struct pc_entry *slot = NULL;
    for (int i = 0; i < pc->n_entries; i++) {
        struct pc_entry *en = &pc->e[i];
        if (en->n == 0 || en->tenant != tenant) continue;
        int32_t lcp = common_prefix(en->tokens, en->n, tokens, n);
        if (lcp == n) {
            en->last_used = ++pc->tick;
            return true;
        }
        if (lcp == en->n) slot = en;
    }
    if (slot) drop(pc, slot);
    /* within the budget the least recently used go (a cell shared by two entries counts
     * twice), but never one the incoming prompt continues from: this run gives way then */
    while (pc->budget_cells >= 0 && srv_pcache_tokens(pc) + n > pc->budget_cells) {
        struct pc_entry *victim = lru(pc, want, n_want, tenant);
        if (!victim) return false;
        srv_metrics_evicted(pc->metrics, victim->n);
        drop(pc, victim);
    }
    for (int i = 0; !slot && i < pc->n_entries; i++)
        if (pc->e[i].n == 0) slot = &pc->e[i];
    if (!slot) { /* every entry in use: the least recently used makes room */
        slot = lru(pc, want, n_want, tenant);
        if (!slot) return false;
        srv_metrics_evicted(pc->metrics, slot->n);
        drop(pc, slot);
    }
    slot->tokens = malloc(sizeof *slot->tokens * (size_t)n);
    if (!slot->tokens) return false;
    memcpy(slot->tokens, tokens, sizeof *tokens * (size_t)n);
    if (!kiln_kv_seq_cp(pc->ctx, seq, slot->seq, 0, n)) {
        free(slot->tokens);
        slot->tokens = NULL;
        return false;
    }
    slot->n = n;
    slot->tenant = tenant;
    slot->last_used = ++pc->tick;
    return true;
}

int32_t srv_pcache_best(struct srv_prefix_cache *pc, const int32_t *prompt, int32_t limit, uint32_t tenant,
                        int32_t *seq, int32_t *lost) {
    struct pc_entry *best = NULL;
    int32_t best_n = 0, best_raw = 0;
    for (int i = 0; pc && i < pc->n_entries; i++) {
        struct pc_entry *en = &pc->e[i];
        int32_t lcp = en->n && en->tenant == tenant ? common_prefix(en->tokens, en->n, prompt, limit) : 0;
        if (lcp > best_raw) best_raw = lcp;
        /* a cut inside the entry resumes only where a sliding window's cells are still held */
        if (lcp > best_n) lcp = kiln_kv_seq_resumable(pc->ctx, en->seq, lcp);
        if (lcp > best_n) {
            best_n = lcp;
            best = en;
        }
    }
    if (lost) *lost = best_raw - best_n;
    if (!best) return 0;
    best->last_used = ++pc->tick;
    *seq = best->seq;
    return best_n;
}
