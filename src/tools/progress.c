/*
 * progress.c - the progress bar every slow subcommand shows on stderr: only
 * when stderr is a terminal, and only once the work has taken more than a
 * second, so quick runs and pipes stay clean.
 */
#include "tools.h"

#include <time.h>
#include <unistd.h>

double tool_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tool_progress_init(struct tool_progress *p, const char *label) {
    p->label = label;
    p->tty = isatty(STDERR_FILENO) != 0;
    p->shown = false;
    p->t0 = tool_now();
}

void tool_progress_update(struct tool_progress *p, float f) {
    if (!p->tty || (!p->shown && tool_now() - p->t0 <= 1.0)) return;
    if (f < 0.0f) f = 0.0f;
    if (f > 1.0f) f = 1.0f;
    int w = (int)(f * 40.0f + 0.5f);
    fprintf(stderr, "\r%s [%.*s%*s] %3d%%", p->label, w, "========================================", 40 - w, "",
            (int)(f * 100.0f + 0.5f));
    p->shown = true;
}

void tool_progress_done(struct tool_progress *p) {
    if (p->shown) fputc('\n', stderr);
    p->shown = false;
}

bool tool_progress_fn(float f, void *data) {
    tool_progress_update(data, f);
    return true;
}
