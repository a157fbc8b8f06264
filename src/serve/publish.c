/*
 * publish.c - a slot's sampled token, published to its task: the text and the
 * token (with logprobs when asked), how much of the text may be shown yet (not
 * a possible start of a stop string, nor half a UTF-8 character), and the end:
 * end of generation, a stop string, the token limit, the slot's context.
 */
#include "engine_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t max_stop_len(const struct srv_task *t) {
    size_t m = 0;
    for (int i = 0; i < t->n_stop; i++) {
        size_t l = strlen(t->stop[i]);
        if (l > m) m = l;
    }
    return m;
}

/* How much of the text can be shown: not a suffix that may start a stop string,
 * not an incomplete UTF-8 sequence. */
static size_t safe_len(const struct srv_task *t) {
    size_t len = t->len, hold = 0;
    for (int i = 0; i < t->n_stop; i++) {
        size_t sl = strlen(t->stop[i]);
        for (size_t k = sl - 1 < len ? sl - 1 : len; k > hold; k--)
            if (!memcmp(t->text + len - k, t->stop[i], k)) {
                hold = k;
                break;
            }
    }
    size_t h = len - hold;
    /* back off over a lead byte whose sequence is not complete before h */
    for (size_t back = 1; back <= 4 && back <= h; back++) {
        unsigned char c = (unsigned char)t->text[h - back];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (need > back) h -= back;
        break;
    }
    return h > t->safe ? h : t->safe;
}

static void logprobs(const float *logits, int64_t n_vocab, int32_t tok, int n_top, struct srv_tok *rec) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; i++)
        if (logits[i] > -INFINITY) sum += exp((double)logits[i] - mx);
    double lse = (double)mx + log(sum);
    rec->logprob = (float)((double)logits[tok] - lse);
    rec->n_top = 0;
    for (int64_t i = 0; i < n_vocab && n_top > 0; i++) {
        float l = logits[i];
        if (!(l > -INFINITY)) continue;
        int k = rec->n_top;
        if (k == n_top && l <= rec->top[k - 1].logprob) continue;
        if (k < n_top) rec->n_top++;
        else k--;
        while (k > 0 && rec->top[k - 1].logprob < l) {
            rec->top[k] = rec->top[k - 1];
            k--;
        }
        rec->top[k].id = (int32_t)i;
        rec->top[k].logprob = l;
    }
    for (int k = 0; k < rec->n_top; k++) rec->top[k].logprob = (float)((double)rec->top[k].logprob - lse);
}

/* Where a chat's thinking block stands after text grew from old bytes: opened by a leading <think>,
 * closed by </think>; tokens inside count against the budget. */
static void think_track(struct srv_chat_out *co, const char *text, size_t len, size_t old) {
    if (co->think_closed) return;
    if (!co->in_think) {
        size_t i = 0;
        while (i < len && (text[i] == ' ' || text[i] == '\n')) i++;
        if (len - i >= 7 && !memcmp(text + i, "<think>", 7) && old <= i + 7) co->in_think = true;
        return;
    }
    size_t from = old > 8 ? old - 8 : 0;
    if (memmem(text + from, len - from, "</think>", 8)) {
        co->in_think = false;
        co->think_closed = true;
        co->forcing = false;
        return;
    }
    co->think_used++;
}

void srv_slot_sample(struct srv_engine *e, struct srv_slot *s, const float *logits) {
    struct srv_task *t = s->task;
    if (t->n_predict == 0) {
        pthread_mutex_lock(&t->mu);
        t->finish = "length";
        t->done = true;
        t->t_first = t->t_end = srv_now();
        srv_task_notify_locked(t);
        pthread_mutex_unlock(&t->mu);
        srv_slot_release(e, s, false);
        return;
    }
    /* a thinking block past its budget (--reasoning-budget): "</think>" is written for the model */
    struct srv_chat_out *co = &t->chat;
    if (co->in_think && co->n_think_end && co->force_at == 0 && co->think_used >= co->think_budget) co->forcing = true;
    int32_t tok = co->forcing && co->force_at < co->n_think_end ? co->think_end[co->force_at++]
                  : logits                                      ? kiln_sampler_sample(t->smpl, logits, e->n_vocab)
                                                                : KILN_TOKEN_NULL;
    if (tok < 0) {
        char msg[320];
        snprintf(msg, sizeof msg, "sampling failed: %s", kiln_sampler_last_error());
        srv_task_fail(t, 500, msg);
        s->failed = true;
        srv_slot_release(e, s, true);
        return;
    }
    kiln_sampler_accept(t->smpl, tok);
    const bool first = s->n_gen == 0; /* a resumed task has generated before */
    s->n_gen++;
    srv_metrics_sampled(e->metrics); /* before the client can see the token */
    struct srv_tok rec = {.id = tok};
    if (t->want_logprobs || t->n_probs > 0) logprobs(logits, e->n_vocab, tok, t->n_probs, &rec);
    bool eog = kiln_vocab_is_eog(e->v, tok);
    char piece[256];
    int64_t pl = eog ? 0 : kiln_token_to_piece(e->v, tok, piece, sizeof piece, t->special);
    if (pl < 0) pl = 0;

    pthread_mutex_lock(&t->mu);
    double now = srv_now();
    if (first) {
        t->t_first = now;
        srv_metrics_ttft(e->metrics, now - t->t_queued);
    }
    t->n_gen = s->n_gen;
    const char *finish = NULL;
    bool oom = false;
    if (eog) {
        finish = "stop";
    } else {
        size_t old = t->len;
        rec.off = (uint32_t)old;
        rec.len = (uint32_t)pl;
        if (t->n_toks == t->cap_toks) {
            int32_t cap = t->cap_toks ? t->cap_toks * 2 : 64;
            struct srv_tok *p = realloc(t->toks, sizeof *p * (size_t)cap);
            if (p) {
                t->toks = p;
                t->cap_toks = cap;
            }
        }
        oom = t->n_toks == t->cap_toks || !srv_bytes_append(&t->text, &t->len, &t->cap, piece, (size_t)pl);
        if (!oom) t->toks[t->n_toks++] = rec;
        if (!oom && co->n_think_end) think_track(co, t->text, t->len, old);
        /* a stop string can only end in the new piece */
        size_t ms = max_stop_len(t), from = old + 1 > ms ? old + 1 - ms : 0, cut = t->len;
        for (int i = 0; i < t->n_stop && !oom; i++) {
            const char *hit = memmem(t->text + from, t->len - from, t->stop[i], strlen(t->stop[i]));
            if (hit && (size_t)(hit - t->text) < cut) {
                cut = (size_t)(hit - t->text);
                t->stop_word = i;
            }
        }
        if (cut < t->len) {
            t->len = cut;
            t->text[cut] = 0;
            while (t->n_toks > 0 && t->toks[t->n_toks - 1].off >= cut) t->n_toks--;
            if (t->n_toks > 0) {
                struct srv_tok *last = &t->toks[t->n_toks - 1];
                if (last->off + last->len > cut) last->len = (uint32_t)(cut - last->off);
            }
            finish = "stop";
        } else if (t->n_predict > 0 && s->n_gen >= t->n_predict) {
            finish = "length";
        } else if (s->n_cache >= e->n_ctx_slot) {
            finish = "length"; /* no cell left in this slot for the token */
        }
    }
    if (oom) {
        srv_task_fail_locked(t, 500, "out of memory");
        pthread_mutex_unlock(&t->mu);
        s->failed = true;
        srv_slot_release(e, s, true);
        return;
    }
    if (finish) {
        t->finish = finish;
        t->safe = t->len;
        t->done = true;
        t->t_end = now;
    } else {
        t->safe = safe_len(t);
    }
    srv_task_notify_locked(t);
    pthread_mutex_unlock(&t->mu);
    if (finish) {
        srv_slot_release(e, s, false);
    } else {
        s->generating = true;
        s->next = tok;
    }
}

