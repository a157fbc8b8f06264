/*
 * test_jinja.c - the Jinja interpreter's sandbox and errors: templates that
 * loop forever, recurse, build huge strings, nest without end or contain
 * themselves are stopped inside the limits with an error (and quickly); every
 * error names the template line; nothing reaches files; a bad context is an
 * error; one parsed template renders from several threads at once. (What the
 * interpreter renders is compared with real Jinja engines in
 * test_jinja_conformance.)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln.h"
#include "testutil.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* render src with ctx (may be NULL); returns the output (malloc'd) or NULL with err */
static char *render(const char *src, const char *ctx, const struct kiln_jinja_opts *o, char *err, size_t errlen) {
    struct kiln_jinja *t = kiln_jinja_parse(src, strlen(src), err, errlen);
    if (!t) return NULL;
    size_t n;
    char *out = kiln_jinja_render(t, ctx, ctx ? strlen(ctx) : 0, o, &n, err, errlen);
    if (out) CHECK(strlen(out) == n);
    kiln_jinja_free(t);
    return out;
}

/* src must render to want */
static void ok(const char *src, const char *ctx, const char *want) {
    char err[512];
    char *got = render(src, ctx, NULL, err, sizeof err);
    CHECKF(got && !strcmp(got, want), "%s -> '%s' (want '%s') %s", src, got ? got : "(error)", want, got ? "" : err);
    free(got);
}

/* src must fail with a message holding each of the words (NULL-terminated), within seconds */
static void fails_with(const char *src, const char *ctx, const struct kiln_jinja_opts *o, const char *w1,
                       const char *w2) {
    char err[512] = "";
    double t0 = now_s();
    char *got = render(src, ctx, o, err, sizeof err);
    double dt = now_s() - t0;
    CHECKF(!got, "%.60s renders '%.60s' instead of failing", src, got ? got : "");
    CHECKF(!w1 || strstr(err, w1), "%.60s: error '%s' lacks '%s'", src, err, w1);
    CHECKF(!w2 || strstr(err, w2), "%.60s: error '%s' lacks '%s'", src, err, w2);
    double limit = getenv("KILN_SANITIZED") ? 60 : 10;
    CHECKF(dt < limit, "%.60s took %.1f s to fail", src, dt);
    free(got);
}

static void test_bounds(void) {
    /* loops that do not end in any reasonable time: the step limit (2M here, for a quick test; the
     * default 100M stops them the same way, later) */
    struct kiln_jinja_opts st = kiln_jinja_default_opts();
    st.limits.max_steps = 2000000;
    fails_with("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, &st,
               "template line 1", NULL);
    fails_with("a\n{% set ns = namespace(n=0) %}\n{% for i in range(1000000) %}{% for j in range(100) %}"
               "{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}",
               NULL, &st, "template line 3", "steps");
    /* loops over a list that exists, with nothing in their bodies: each iteration is a step */
    fails_with("{% set l = range(100000) %}\n{% for i in l %}{% for j in l %}{% endfor %}{% endfor %}", NULL, &st,
               "template line 2", "steps");
    fails_with("{% set l = range(100000) %}{% for i in l %}{% for j in l if j > 5 %}{% endfor %}{% endfor %}", NULL,
               &st, "template line 1", NULL);
    fails_with("{% set l = range(100000) %}{% for i in l %}{% if i in l %}{% endif %}{% endfor %}", NULL, &st, "steps",
               NULL);
    fails_with("{% set l = range(100000) %}{% for i in l %}{% set n = l | select('odd') | first %}{% endfor %}",
               NULL, &st, "steps", NULL);
    fails_with("{% set ns = namespace(t='x') %}{% for i in range(22) %}{% set ns.t = ns.t ~ ns.t %}"
               "{% endfor %}{% for i in range(100000) %}{% if 'zz' in ns.t %}{% endif %}{% endfor %}",
               NULL, &st, "steps", NULL);
    /* recursion without end: the depth limit */
    fails_with("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}", NULL, NULL, "template line", "deep");
    fails_with("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}", NULL, NULL,
               "deep", NULL);
    /* strings that double until they fill memory */
    fails_with("{% set ns = namespace(s='xxxxxxxx') %}\n\n{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
               "{% endfor %}{{ ns.s | length }}",
               NULL, NULL, "template line 3", "memory");
    fails_with("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", NULL,
               NULL, "memory", NULL);
    /* a list too large to make */
    fails_with("{{ range(100000000000) | length }}", NULL, NULL, "range", "too large");
    fails_with("{% set l = [1] %}{% for i in range(60) %}{% set l = l + l %}{% endfor %}", NULL, NULL, "template", NULL);
    /* output beyond the limit */
    struct kiln_jinja_opts small = kiln_jinja_default_opts();
    small.limits.max_output = 1000;
    fails_with("{% for i in range(1000) %}0123456789{% endfor %}", NULL, &small, "output", "1000");
    /* a memory limit the caller chose */
    small = kiln_jinja_default_opts();
    small.limits.max_memory = 1 << 20;
    fails_with("{% set ns = namespace(s='0123456789abcdef') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}"
               "{% endfor %}",
               NULL, &small, "memory", NULL);
    small = kiln_jinja_default_opts();
    small.limits.max_steps = 1000;
    fails_with("{% for i in range(100) %}{% for j in range(100) %}x{% endfor %}{% endfor %}", NULL, &small, "steps",
               NULL);
    small.limits.max_steps = 0;
    fails_with("x", NULL, &small, "limits", NULL);
    /* a value that holds itself */
    fails_with("{% set a = [] %}{% set _ = a.append(a) %}{{ a | tojson }}", NULL, NULL, "tojson", "deep");
    fails_with("{% set a = [] %}{% set _ = a.append(a) %}{{ a }}", NULL, NULL, "deep", NULL);
    fails_with("{% set a = [] %}{% set _ = a.append(a) %}{{ a == 'x' }}", NULL, NULL, "deep", NULL);
    fails_with("{% set a = [] %}{% set _ = a.append(a) %}{{ a | string }}", NULL, NULL, "deep", NULL);
    /* nesting without end in the text: the parser's limit, not the stack */
    size_t n = 100000;
    char *deep = malloc(2 * n + 16);
    strcpy(deep, "{{ ");
    memset(deep + 3, '(', n);
    strcpy(deep + 3 + n, "1");
    memset(deep + 4 + n, ')', n);
    strcpy(deep + 4 + 2 * n, " }}");
    fails_with(deep, NULL, NULL, "nests", NULL);
    char *ifs = malloc(n * 12 + 16), *p = ifs;
    for (size_t i = 0; i < n; i++) p += sprintf(p, "{%% if x %%}");
    *p = 0;
    fails_with(ifs, NULL, NULL, "nests", NULL);
    p = deep;
    for (size_t i = 0; i < 20000; i++) p += sprintf(p, "-");
    strcpy(p, "1");
    char *neg = malloc(strlen(deep) + 16);
    sprintf(neg, "{{ %s }}", deep);
    fails_with(neg, NULL, NULL, "nests", NULL);
    free(neg);
    free(ifs);
    free(deep);
    /* JSON in the context nested without end */
    char *ctx = malloc(2 * n + 32);
    strcpy(ctx, "{\"a\": ");
    memset(ctx + 6, '[', n);
    memset(ctx + 6 + n, ']', n);
    strcpy(ctx + 6 + 2 * n, "}");
    fails_with("{{ a }}", ctx, NULL, "context", "nested");
    free(ctx);
}

static void test_errors(void) {
    /* syntax errors name the line they are on */
    fails_with("line one\nline two {{ x + }}\n", NULL, NULL, "template line 2", NULL);
    fails_with("a\nb\n{% if x %}\nunclosed\n", NULL, NULL, "template line 3", "not closed");
    fails_with("{% for x in y %}\n{% endif %}", NULL, NULL, "template line 2", "expected {% endfor %}");
    fails_with("{% frobnicate %}", NULL, NULL, "unknown statement", NULL);
    fails_with("{{ 'unterminated }}", NULL, NULL, "not closed", NULL);
    fails_with("{# never closed", NULL, NULL, "comment", NULL);
    fails_with("{{ x @ y }}", NULL, NULL, "unexpected character '@'", NULL);
    fails_with("{{ '\\q' }}", NULL, NULL, "escape", NULL);
    fails_with("{% macro m(a=1, b) %}{% endmacro %}", NULL, NULL, "default", NULL);
    /* no files: include, import, extends are refused when parsed */
    fails_with("{% include 'secret.txt' %}", NULL, NULL, "cannot load other files", NULL);
    fails_with("{% import 'x.j2' as x %}", NULL, NULL, "cannot load other files", NULL);
    fails_with("{% extends '/etc/passwd' %}", NULL, NULL, "cannot load other files", NULL);
    /* errors while rendering name the line too */
    fails_with("ok\n{{ raise_exception('Only user and assistant roles are supported!') }}", NULL, NULL,
               "template line 2", "Only user and assistant roles are supported!");
    fails_with("{{ x | no_such_filter }}", NULL, NULL, "unknown filter 'no_such_filter'", NULL);
    fails_with("{{ x is no_such_test }}", NULL, NULL, "unknown test 'no_such_test'", NULL);
    fails_with("\n\n{{ 'a'() }}", NULL, NULL, "template line 3", "cannot call");
    fails_with("{{ 1 / 0 }}", NULL, NULL, "division by zero", NULL);
    fails_with("{{ 9223372036854775807 + 1 }}", NULL, NULL, "overflow", NULL);
    fails_with("{{ none ~ 'x' }}", NULL, NULL, "none", NULL);
    fails_with("{{ [1][0:1:0] }}", NULL, NULL, "step", NULL);
    fails_with("{% set x.y = 1 %}", NULL, NULL, "namespace", NULL);
    fails_with("{% break %}", NULL, NULL, "outside a loop", NULL);
    fails_with("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL, NULL, "at most 1", NULL);
    fails_with("{% macro m(a) %}{% endmacro %}{{ m(b=2) }}", NULL, NULL, "keyword argument 'b'", NULL);
    fails_with("{{ 'abc'.split('') }}", NULL, NULL, "empty separator", NULL);
    fails_with("{{ '{\"a\": ' | from_json }}", NULL, NULL, "JSON", NULL);
    /* a bad context */
    fails_with("{{ a }}", "{\"a\": ", NULL, "the context is not valid JSON", NULL);
    fails_with("{{ a }}", "[1, 2]", NULL, "JSON object", NULL);
    fails_with("{{ a }}", "{\"a\": \"\\ud800\\q\"}", NULL, "escape", NULL);
    /* API misuse */
    char err[128];
    CHECK(kiln_jinja_render(NULL, NULL, 0, NULL, NULL, err, sizeof err) == NULL && strstr(err, "no template"));
    CHECK(kiln_jinja_parse(NULL, 5, err, sizeof err) == NULL);
}

/* Python's reading where the reference engine has none, and what kiln adds: checked by hand */
static void test_semantics(void) {
    ok("{{ '--x--'.strip('-') }}|{{ 'xxaxx'.lstrip('x') }}|{{ '\\n\\nbody\\n'.strip('\\n') }}", NULL, "x|axx|body");
    ok("{{ '  a  '.strip() }}|{{ 'a b'.split() | length }}", NULL, "a|2");
    ok("{{ {1: 'one', 2: 'two'}[1] }}{% for k, v in {2: 'b', 1: 'a'} | dictsort %}{{ k + 1 }}{{ v }}{% endfor %}", NULL,
       "one2a3b");
    ok("{{ missing | length }}|{% for x in missing %}x{% endfor %}|{{ missing | trim }}|{{ none | selectattr('a') | list }}",
       NULL, "0|||[]");
    ok("{% set q = namespace(l=[]) %}{% set _ = q.l.append(1) %}{% set _ = q.l.append(2) %}{{ q.l.pop(0) }}{{ q.l }}",
       NULL, "1[2]");
    ok("{{ 'a{}b{}'.format(1, 'x') }}|{{ '{0}{0}'.format('y') }}|{{ '{{}}'.format() }}", NULL, "a1bx|yy|{}");
    ok("{{ '{\"k\": [1, 2.5, null]}' | from_json | tojson }}", NULL, "{\"k\": [1, 2.5, null]}");
    ok("{{ ''.__class__ }}{{ self }}{{ config }}{{ cycler }}|{{ ''.__class__.__mro__ is defined }}", NULL, "|false");
    ok("{{ x.y.z is defined }}|{{ none.attr is defined }}", "{\"x\": {}}", "false|false");
}

static void test_clock(void) {
    setenv("TZ", "UTC", 1);
    tzset();
    struct kiln_jinja_opts o = kiln_jinja_default_opts();
    o.now = 1741944413; /* 2025-03-14 09:26:53 UTC */
    char err[256];
    char *got = render("{{ strftime_now('%Y-%m-%d %H:%M %b %B %d') }}", NULL, &o, err, sizeof err);
    CHECKF(got && !strcmp(got, "2025-03-14 09:26 Mar March 14"), "strftime_now: %s", got ? got : err);
    free(got);
}

struct thread_arg {
    const struct kiln_jinja *t;
    const char *ctx;
    char *out;
};

static void *render_thread(void *p) {
    struct thread_arg *a = p;
    char err[256];
    for (int i = 0; i < 50; i++) {
        free(a->out);
        a->out = kiln_jinja_render(a->t, a->ctx, strlen(a->ctx), NULL, NULL, err, sizeof err);
    }
    return NULL;
}

static void test_threads(void) {
    const char *src = "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}{% if not loop.last %}\n{% endif %}"
                      "{% endfor %}{% set ns = namespace(n=0) %}{% for i in range(100) %}{% set ns.n = ns.n + i %}"
                      "{% endfor %}|{{ ns.n }}|{{ messages | tojson }}";
    const char *ctx = "{\"messages\": [{\"role\": \"user\", \"content\": \" hi \"}, {\"role\": \"assistant\", "
                      "\"content\": \"yo\"}]}";
    char err[256];
    struct kiln_jinja *t = kiln_jinja_parse(src, strlen(src), err, sizeof err);
    CHECK(t);
    if (!t) return;
    pthread_t th[4];
    struct thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct thread_arg){t, ctx, NULL};
        pthread_create(&th[i], NULL, render_thread, &args[i]);
    }
    const char *want = "<user>hi<assistant>yo|4950|[{\"role\": \"user\", \"content\": \" hi \"}, "
                       "{\"role\": \"assistant\", \"content\": \"yo\"}]";
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECKF(args[i].out && !strcmp(args[i].out, want), "thread %d: %s", i, args[i].out ? args[i].out : "(null)");
        free(args[i].out);
    }
    kiln_jinja_free(t);
}

int main(void) {
    test_bounds();
    test_errors();
    test_semantics();
    test_clock();
    test_threads();
    return tu_finish("test_jinja");
}
