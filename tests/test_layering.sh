#!/usr/bin/env bash
# test_layering.sh - the layers' rules that the compiler does not check
# (docs/architecture.md): the runtime (src/kiln) and the server (src/serve) reach
# the backends only through kt-backend.h and kt-alloc.h (the registry and generic
# calls), never a backend's own header or functions; the generic backend layer
# (src/kt/*.c, the public kt headers) names no backend either; CPU test hooks stay
# out of the public headers. Reads the sources only.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" layering
src=${KILN_SRC:-$(dirname "${BASH_SOURCE[0]}")/..}

# a backend's headers: the public kt-cpu.h, and everything private under src/kt/cpu, src/kt/cuda
backend_headers='"(kt-cpu\.h|kt-cuda\.h|cpu\.h|gemm\.h|test_hooks\.h|cuda_impl\.cuh|backend-impl\.h|[a-z_]*_isa\.h|cpu/[^"]*|cuda/[^"]*)"'
# a backend's own functions
backend_calls='\b(kt_cpu_[a-z_]+|kt_backend_cpu_[a-z_]+|kt_backend_is_cpu|kt_cuda_[a-z_]+|kt_threadpool_[a-z_]+|kt_graph_plan|kt_graph_compute(_with_ctx)?)\s*\('

no_match() { # no_match WHAT REGEX FILE...: no line of the files matches; the offenders shown
  local what=$1 re=$2; shift 2
  local hits
  hits=$(grep -nE "$re" "$@" 2>/dev/null)
  [ -z "$hits" ] && return 0
  echo "  $what:" >&2; echo "$hits" | sed 's/^/    /' >&2
  return 1
}

mapfile -t runtime < <(find "$src/src/kiln" "$src/src/serve" -name '*.[ch]' | sort)
check "the sources are there" test "${#runtime[@]}" -gt 10
check "src/kiln, src/serve include no backend header" \
  no_match "a backend's header" "^\s*#\s*include\s*$backend_headers" "${runtime[@]}"
check "src/kiln, src/serve call no backend by name" no_match "a backend's function" "$backend_calls" "${runtime[@]}"

mapfile -t generic < <(find "$src/src/kt" -maxdepth 1 -name '*.c' | sort)
generic+=("$src/include/kt.h" "$src/include/kt-backend.h" "$src/include/kt-alloc.h" "$src/include/gguf.h"
  "$src/include/kiln.h" "$src/include/kiln-offline.h")
check "the generic layer includes no backend header" \
  no_match "a backend's header" '^\s*#\s*include\s*"(kt-cpu\.h|cpu\.h|cuda_impl\.cuh|cpu/[^"]*|cuda/[^"]*)"' "${generic[@]}"
# (backend.c's registry rows name each backend's device function: that is the registry)
check "the generic layer calls no backend's function" \
  no_match "a backend's function" '\b(kt_cpu_(buffer_type|features|supports_op|repack[a-z_]*)|kt_backend_cpu_[a-z_]+|kt_backend_is_cpu)\s*\(' "${generic[@]}"
check "test hooks are not public" no_match "a test hook" 'set_op_filter|kt_sched_plan_graph|kt_sched_gallocr' "$src"/include/*.h
tu_finish test_layering
