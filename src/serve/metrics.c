/*
 * metrics.c - the server's counters and GET /metrics in Prometheus' text format:
 * llama-server's llamacpp:* names where it has one, kiln_* for the rest
 * (responses by route and status, KV cells, prefix reuse, time to first token).
 */
#include "serve_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RESP_KEYS 128 /* distinct (route, status) pairs kept; more fold into "other" */

/* time-to-first-token histogram bounds, seconds (Prometheus buckets are cumulative) */
static const double ttft_le[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
#define N_TTFT (sizeof ttft_le / sizeof ttft_le[0])

struct srv_metrics {
    pthread_mutex_t mu;
    unsigned long long prompt_tokens, prompt_cached, predicted, n_decode, busy_slot_sum;
    double prompt_s, predicted_s;
    long long n_tokens_max;
    unsigned long long hits, misses, evictions, evicted_tokens, timeouts, rejected, shared, shared_tokens;
    unsigned long long window_lost, window_lost_tokens; /* prefixes cut short: a sliding window's cells gone */
    unsigned long long preempted, conn[SRV_CONN_EVENTS];
    unsigned long long ttft_bucket[N_TTFT + 1], ttft_count;
    double ttft_sum;
    struct {
        const char *route; /* a route table string, or "other" */
        unsigned status;
        unsigned long long n;
    } resp[MAX_RESP_KEYS];
    int n_resp;
};

struct srv_metrics *srv_metrics_new(void) {
    struct srv_metrics *m = calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->mu, NULL);
    return m;
}

void srv_metrics_free(struct srv_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void srv_metrics_response(struct srv_metrics *m, const char *route, unsigned status) {
    if (!m) return;
    if (!route) route = "other";
    pthread_mutex_lock(&m->mu);
    int i = 0;
    while (i < m->n_resp && (m->resp[i].status != status || strcmp(m->resp[i].route, route))) i++;
    if (i == m->n_resp && i == MAX_RESP_KEYS) {
        /* full: fold into the last pair rather than lose the count */
        i = MAX_RESP_KEYS - 1;
        m->resp[i].route = "other";
    } else if (i == m->n_resp) {
        m->resp[i].route = route;
        m->resp[i].status = status;
        m->resp[i].n = 0;
        m->n_resp++;
    }
    m->resp[i].n++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_sampled(struct srv_metrics *m) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->predicted++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_step(struct srv_metrics *m, int32_t n_prompt, int32_t n_gen, int n_busy, int n_decode,
                      double seconds) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += (unsigned long long)n_prompt;
    m->n_decode += (unsigned long long)n_decode;
    m->busy_slot_sum += (unsigned long long)n_busy * (unsigned long long)n_decode;
    /* the step's time shared between its prompt and its generated tokens */
    int32_t n = n_prompt + n_gen;
    if (n > 0) {
        m->prompt_s += seconds * n_prompt / n;
        m->predicted_s += seconds * n_gen / n;
    }
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_request(struct srv_metrics *m, int32_t n_cached, int32_t n_evicted, int32_t n_tokens) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->prompt_cached += (unsigned long long)n_cached;
    if (n_cached > 0) m->hits++;
    else m->misses++;
    if (n_evicted > 0) {
        m->evictions++;
        m->evicted_tokens += (unsigned long long)n_evicted;
    }
    if (n_tokens > m->n_tokens_max) m->n_tokens_max = n_tokens;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_shared(struct srv_metrics *m, int32_t n_tokens, bool was_miss) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    if (was_miss && m->misses > 0) { /* its own slot had nothing, another's had: a hit after all */
        m->misses--;
        m->hits++;
    }
    m->shared++;
    m->shared_tokens += (unsigned long long)n_tokens;
    m->prompt_cached += (unsigned long long)n_tokens;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_window_lost(struct srv_metrics *m, int32_t n_tokens) {
    if (!m || n_tokens <= 0) return;
    pthread_mutex_lock(&m->mu);
    m->window_lost++;
    m->window_lost_tokens += (unsigned long long)n_tokens;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_evicted(struct srv_metrics *m, int32_t n_tokens) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->evictions++;
    m->evicted_tokens += (unsigned long long)n_tokens;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_ttft(struct srv_metrics *m, double seconds) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    size_t b = 0;
    while (b < N_TTFT && seconds > ttft_le[b]) b++;
    m->ttft_bucket[b]++;
    m->ttft_count++;
    m->ttft_sum += seconds;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_timeout(struct srv_metrics *m) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->timeouts++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_rejected(struct srv_metrics *m) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->rejected++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_preempted(struct srv_metrics *m) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->preempted++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_conn(struct srv_metrics *m, enum srv_conn_event ev) {
    if (!m || ev >= SRV_CONN_EVENTS) return;
    pthread_mutex_lock(&m->mu);
    m->conn[ev]++;
    pthread_mutex_unlock(&m->mu);
}

/* ------------------------------------------------------------------ text format */

struct out {
    char *buf;
    size_t len, cap;
    bool oom;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...) {
    for (int pass = 0; pass < 2 && !o->oom; pass++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->buf ? o->cap - o->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->oom = true;
            return;
        }
        if (o->buf && o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap ? o->cap : 4096;
        while (cap <= o->len + (size_t)n) cap *= 2;
        char *b = realloc(o->buf, cap);
        if (!b) {
            o->oom = true;
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
}

static void metric(struct out *o, const char *name, const char *type, const char *help, double v) {
    put(o, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

char *srv_metrics_render(struct srv_metrics *m, const struct srv_engine_stats *es) {
    struct out o = {0};
    pthread_mutex_lock(&m->mu);
    /* llama-server's names */
    metric(&o, "llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed, excluding cached tokens",
           (double)m->prompt_tokens);
    metric(&o, "llamacpp:prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache",
           (double)m->prompt_cached);
    metric(&o, "llamacpp:prompt_seconds_total", "counter", "Total time spent processing prompts", m->prompt_s);
    metric(&o, "llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed",
           (double)m->predicted);
    metric(&o, "llamacpp:tokens_predicted_seconds_total", "counter", "Total time spent generating tokens",
           m->predicted_s);
    metric(&o, "llamacpp:n_decode_total", "counter", "Total number of kiln_decode() calls", (double)m->n_decode);
    metric(&o, "llamacpp:n_tokens_max", "counter", "Largest observed sequence length (prompt + generation)",
           (double)m->n_tokens_max);
    metric(&o, "llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s",
           m->prompt_s > 0 ? (double)m->prompt_tokens / m->prompt_s : 0);
    metric(&o, "llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s",
           m->predicted_s > 0 ? (double)m->predicted / m->predicted_s : 0);
    metric(&o, "llamacpp:requests_processing", "gauge", "Number of requests processing", es->processing);
    metric(&o, "llamacpp:requests_deferred", "gauge", "Number of requests deferred", es->deferred);
    metric(&o, "llamacpp:n_busy_slots_per_decode", "gauge", "Average number of busy slots per kiln_decode() call",
           m->n_decode ? (double)m->busy_slot_sum / (double)m->n_decode : 0);
    /* kiln's own */
    metric(&o, "kiln_slots_total", "gauge", "Slots (sequences decoded together)", es->n_slots);
    metric(&o, "kiln_queue_capacity", "gauge", "Requests that may wait for a slot before 503", es->queue_max);
    metric(&o, "kiln_kv_cells_used", "gauge", "Tokens the slots hold in the KV cache (a shared cell once per slot)",
           es->kv_used);
    metric(&o, "kiln_kv_cells_total", "gauge", "KV cache cells", es->kv_total);
    metric(&o, "kiln_prefix_cache_hits_total", "counter", "Requests that reused cached prompt tokens (any slot's)",
           (double)m->hits);
    metric(&o, "kiln_prefix_cache_misses_total", "counter", "Requests that reused no cached prompt token",
           (double)m->misses);
    metric(&o, "kiln_prefix_cache_evictions_total", "counter",
           "Cached runs of tokens dropped (a slot's for a new request, or a parked one)", (double)m->evictions);
    metric(&o, "kiln_prefix_cache_evicted_tokens_total", "counter", "Cached tokens dropped",
           (double)m->evicted_tokens);
    metric(&o, "kiln_prefix_cache_parked_tokens", "gauge", "Tokens kept on spare sequences after their slot moved on",
           (double)es->parked);
    metric(&o, "kiln_prefix_cache_shared_total", "counter", "Times a prompt continued from cells another slot decoded",
           (double)m->shared);
    metric(&o, "kiln_prefix_cache_shared_tokens_total", "counter", "Prompt tokens taken from cells another slot decoded",
           (double)m->shared_tokens);
    metric(&o, "kiln_prefix_cache_window_recomputed_total", "counter",
           "Times a cached prefix was cut short because a sliding-window cache no longer held the cells to resume "
           "from", (double)m->window_lost);
    metric(&o, "kiln_prefix_cache_window_recomputed_tokens_total", "counter",
           "Prompt tokens recomputed for that reason instead of reused", (double)m->window_lost_tokens);
    metric(&o, "kiln_requests_timed_out_total", "counter", "Requests stopped by --request-timeout",
           (double)m->timeouts);
    metric(&o, "kiln_requests_rejected_total", "counter", "Requests answered 503 because the queue was full",
           (double)m->rejected);
    metric(&o, "kiln_requests_preempted_total", "counter",
           "Running prompts that gave their slot to a request with none (they continue later)",
           (double)m->preempted);
    metric(&o, "kiln_http_connections", "gauge", "Open connections", es->connections);
    static const char *const conn_what[SRV_CONN_EVENTS] = {
        [SRV_CONN_EVICTED] = "evicted", [SRV_CONN_OVERFLOW] = "overflow", [SRV_CONN_DEADLINE] = "deadline",
        [SRV_CONN_RESET] = "reset"};
    put(&o, "# HELP kiln_http_connections_closed_total Connections closed by the server: idle ones for a newcomer "
            "past --max-connections (evicted), answered 503 past it (overflow), cut at the header or body "
            "deadline (deadline), reset by the peer while waiting (reset)\n"
            "# TYPE kiln_http_connections_closed_total counter\n");
    for (int i = 0; i < SRV_CONN_EVENTS; i++)
        put(&o, "kiln_http_connections_closed_total{reason=\"%s\"} %llu\n", conn_what[i], m->conn[i]);
    put(&o, "# HELP kiln_http_responses_total HTTP responses by route and status\n"
            "# TYPE kiln_http_responses_total counter\n");
    for (int i = 0; i < m->n_resp; i++)
        put(&o, "kiln_http_responses_total{route=\"%s\",status=\"%u\"} %llu\n", m->resp[i].route, m->resp[i].status,
            m->resp[i].n);
    put(&o, "# HELP kiln_time_to_first_token_seconds From a request's arrival to its first token\n"
            "# TYPE kiln_time_to_first_token_seconds histogram\n");
    unsigned long long cum = 0;
    for (size_t b = 0; b < N_TTFT; b++) {
        cum += m->ttft_bucket[b];
        put(&o, "kiln_time_to_first_token_seconds_bucket{le=\"%g\"} %llu\n", ttft_le[b], cum);
    }
    put(&o, "kiln_time_to_first_token_seconds_bucket{le=\"+Inf\"} %llu\n", m->ttft_count);
    put(&o, "kiln_time_to_first_token_seconds_sum %.17g\n", m->ttft_sum);
    put(&o, "kiln_time_to_first_token_seconds_count %llu\n", m->ttft_count);
    pthread_mutex_unlock(&m->mu);
    if (o.oom) {
        free(o.buf);
        return NULL;
    }
    return o.buf;
}
