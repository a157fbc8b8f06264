/*
 * conn.c - the open connections, so that idle or slow ones cannot lock anyone
 * out: past --max-connections a newcomer closes the connection idle the longest
 * (waiting for headers) or, with none idle, is answered 503; a request's headers
 * must arrive within --header-timeout of the connection opening or of the last
 * answer and its body within --body-timeout of its headers (a total, not an
 * inactivity limit: a byte every second does not extend it). A thread sweeps
 * the table ten times a second for those deadlines and for suspended
 * connections (waiting for the engine) whose peer reset them: libmicrohttpd does
 * not watch a suspended socket. A peer that only half-closed (sent FIN after its
 * request) is still answered.
 */
#include "serve_impl.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define SWEEP_MS 100

struct srv_conn {
    struct srv_conn *prev, *next;
    int fd;
    enum srv_phase phase;
    double since;          /* when the phase began */
    struct srv_exchange *x; /* the request it serves (NULL between requests) */
    bool overflow;         /* accepted past the limit with nobody idle to close for it */
    bool cut;              /* shut down by the table: libmicrohttpd closes it next */
};

struct srv_conns {
    struct kiln_server *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct srv_conn *head;
    int n, n_cut, max;
    bool stop;
    pthread_t thread;
    bool started;
    struct pollfd *pfd; /* the sweep's scratch */
    struct srv_exchange **px;
    size_t cap;
};

static void cut(struct srv_conns *cs, struct srv_conn *cn, enum srv_conn_event why) {
    shutdown(cn->fd, SHUT_RDWR); /* libmicrohttpd sees the end and closes it */
    cn->cut = true;
    cs->n_cut++;
    srv_metrics_conn(cs->s->metrics, why);
}

/* ------------------------------------------------------------------ the sweep */

static void sweep(struct srv_conns *cs) {
    const struct kiln_server_params *p = &cs->s->p;
    size_t n = 0;
    pthread_mutex_lock(&cs->mu);
    if ((size_t)cs->n > cs->cap) {
        size_t cap = (size_t)cs->n * 2;
        struct pollfd *pf = realloc(cs->pfd, sizeof *pf * cap);
        if (pf) cs->pfd = pf;
        struct srv_exchange **px = realloc(cs->px, sizeof *px * cap);
        if (px) cs->px = px;
        if (pf && px) cs->cap = cap;
    }
    const double now = srv_now();
    for (struct srv_conn *cn = cs->head; cn; cn = cn->next) {
        if (cn->cut) continue;
        if (cn->phase == SRV_PHASE_HEADERS && p->header_timeout_s > 0 && now - cn->since > p->header_timeout_s) {
            cut(cs, cn, SRV_CONN_DEADLINE);
            continue;
        }
        if (cn->phase == SRV_PHASE_BODY && p->body_timeout_s > 0 && now - cn->since > p->body_timeout_s) {
            cut(cs, cn, SRV_CONN_DEADLINE);
            continue;
        }
        struct srv_exchange *x = cn->x;
        if (!x || n == cs->cap || atomic_load(&x->gone)) continue;
        pthread_mutex_lock(&x->mu);
        bool waiting = x->suspended;
        pthread_mutex_unlock(&x->mu);
        if (!waiting) continue;
        /* events 0: only a reset or an error wakes it; a FIN (half-close) does not */
        cs->pfd[n] = (struct pollfd){.fd = cn->fd, .events = 0};
        cs->px[n++] = x;
        srv_exchange_ref(x);
    }
    /* polled under the lock: a listed connection cannot close (and its fd be reused) meanwhile */
    if (n && poll(cs->pfd, n, 0) > 0)
        for (size_t i = 0; i < n; i++)
            if (cs->pfd[i].revents & (POLLHUP | POLLERR | POLLNVAL)) {
                atomic_store(&cs->px[i]->gone, true);
                srv_metrics_conn(cs->s->metrics, SRV_CONN_RESET);
            }
    pthread_mutex_unlock(&cs->mu);
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&cs->px[i]->gone)) srv_exchange_wake(cs->px[i]); /* its handler closes it */
        srv_exchange_unref(cs->px[i]);
    }
}

static void *run(void *arg) {
    struct srv_conns *cs = arg;
    pthread_mutex_lock(&cs->mu);
    while (!cs->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += SWEEP_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&cs->cv, &cs->mu, &ts);
        if (cs->stop) break;
        pthread_mutex_unlock(&cs->mu);
        sweep(cs);
        pthread_mutex_lock(&cs->mu);
    }
    pthread_mutex_unlock(&cs->mu);
    return NULL;
}

/* ------------------------------------------------------------------ the table */

struct srv_conns *srv_conns_new(struct kiln_server *s, int max, char *err, size_t errlen) {
    struct srv_conns *cs = calloc(1, sizeof *cs);
    if (!cs) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    cs->s = s;
    cs->max = max;
    pthread_mutex_init(&cs->mu, NULL);
    pthread_cond_init(&cs->cv, NULL);
    if (pthread_create(&cs->thread, NULL, run, cs) != 0) {
        snprintf(err, errlen, "cannot start the connection thread");
        srv_conns_free(cs);
        return NULL;
    }
    cs->started = true;
    return cs;
}

void srv_conns_free(struct srv_conns *cs) {
    if (!cs) return;
    pthread_mutex_lock(&cs->mu);
    cs->stop = true;
    pthread_cond_signal(&cs->cv);
    pthread_mutex_unlock(&cs->mu);
    if (cs->started) pthread_join(cs->thread, NULL);
    while (cs->head) { /* libmicrohttpd stopped: it told us of every close */
        struct srv_conn *cn = cs->head;
        cs->head = cn->next;
        free(cn);
    }
    free(cs->pfd);
    free(cs->px);
    pthread_mutex_destroy(&cs->mu);
    pthread_cond_destroy(&cs->cv);
    free(cs);
}

void srv_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode code) {
    struct srv_conns *cs = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct srv_conn *cn = *socket_context;
        if (!cn) return;
        pthread_mutex_lock(&cs->mu); /* called before the socket closes: the sweep never sees a reused fd */
        if (cn->prev) cn->prev->next = cn->next;
        else cs->head = cn->next;
        if (cn->next) cn->next->prev = cn->prev;
        cs->n--;
        if (cn->cut) cs->n_cut--;
        pthread_mutex_unlock(&cs->mu);
        free(cn);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct srv_conn *cn = calloc(1, sizeof *cn);
    if (!cn || !ci) { /* not tracked: no deadline, but served */
        free(cn);
        *socket_context = NULL;
        return;
    }
    cn->fd = ci->connect_fd;
    cn->phase = SRV_PHASE_HEADERS;
    cn->since = srv_now();
    pthread_mutex_lock(&cs->mu);
    cn->next = cs->head;
    if (cs->head) cs->head->prev = cn;
    cs->head = cn;
    cs->n++;
    if (cs->n - cs->n_cut > cs->max) {
        /* over the limit: the connection waiting for headers the longest makes room */
        struct srv_conn *old = NULL;
        for (struct srv_conn *o = cn->next; o; o = o->next)
            if (!o->cut && o->phase == SRV_PHASE_HEADERS && (!old || o->since < old->since)) old = o;
        if (old) cut(cs, old, SRV_CONN_EVICTED);
        else cn->overflow = true;
    }
    pthread_mutex_unlock(&cs->mu);
    *socket_context = cn;
}

void srv_conn_phase(struct srv_conns *cs, struct srv_conn *cn, enum srv_phase ph, struct srv_exchange *x) {
    if (!cn) return;
    pthread_mutex_lock(&cs->mu);
    cn->phase = ph;
    cn->since = srv_now();
    cn->x = x;
    pthread_mutex_unlock(&cs->mu);
}

bool srv_conn_overflow(const struct srv_conn *cn) { return cn && cn->overflow; }

int srv_conns_wake_all(struct srv_conns *cs) {
    int n = 0;
    pthread_mutex_lock(&cs->mu);
    for (struct srv_conn *cn = cs->head; cn; cn = cn->next) {
        struct srv_exchange *x = cn->x;
        if (!x) continue;
        pthread_mutex_lock(&x->mu);
        bool waiting = x->suspended;
        pthread_mutex_unlock(&x->mu);
        if (!waiting) continue;
        atomic_store(&x->gone, true); /* stopping: it is closed, not answered */
        srv_exchange_wake(x);
        n++;
    }
    pthread_mutex_unlock(&cs->mu);
    return n;
}

int srv_conns_count(struct srv_conns *cs) {
    if (!cs) return 0;
    pthread_mutex_lock(&cs->mu);
    int n = cs->n - cs->n_cut;
    pthread_mutex_unlock(&cs->mu);
    return n;
}
