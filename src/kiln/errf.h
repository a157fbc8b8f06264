/* errf.h - filling a caller's error buffer (runtime-private). */
#ifndef KILN_ERRF_H
#define KILN_ERRF_H

#include <stdbool.h>
#include <stddef.h>

/* printf into err (if err and errlen) and return false, so that `return kiln_errf(...)`
 * both reports and fails. */
bool kiln_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
