/*
 * test_hooks.h - what tests reach inside the CPU backend and nothing else
 * does: an instance that stands in for a discrete device, so that the
 * scheduler's splits and copies can be tested on a machine without a GPU.
 */
#ifndef KT_CPU_TEST_HOOKS_H
#define KT_CPU_TEST_HOOKS_H

#include "kt-cpu.h"

/* Restrict which ops this CPU backend instance claims to support (NULL: all). A filtered
 * instance also stands in for a discrete device: its default buffer type is its own and not
 * host, and it reaches only that memory, so the scheduler really copies across. */
void kt_backend_cpu_set_op_filter(struct kt_backend *b, bool (*filter)(const struct kt_tensor *op, void *data),
                                  void *data);

#endif
