/* errf.c - the runtime's one way of writing an error message into a caller's buffer. */
#include "errf.h"

#include <stdarg.h>
#include <stdio.h>

bool kiln_errf(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return false;
}
