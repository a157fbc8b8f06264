#!/usr/bin/env bash
# test_llama_server_suite.sh - a bounded part of llama.cpp's own server tests (pytest, from the peer
# source) run against kiln serve by tests/llama_server_suite.sh --kiln-only: tests that pass on
# llama-server with the same model and must pass on kiln (tokenize, props, models with aliases and
# tags, slots and metrics off, CORS with --cors-origins localhost, the Anthropic Messages API).
# SKIPs (77) when pytest, its packages (scripts/deps.sh suite) or the peer source are absent.
src=${KILN_SRC:-$(dirname "${BASH_SOURCE[0]}")/..}
export KILN_BIN=${KILN_BIN:?KILN_BIN is not set} KILN_SUITE_MODEL=${KILN_SHARED:-../shared}/models/kjv-q4_0.gguf
out=$(mktemp -d /tmp/kiln-test-suite-XXXXXX)
trap 'rm -rf "$out"' EXIT
SUITE_TIMEOUT=${SUITE_TIMEOUT:-300} bash "$src/tests/llama_server_suite.sh" --kiln-only --out "$out" \
  unit/test_tokenize.py \
  unit/test_basic.py::test_server_props unit/test_basic.py::test_server_models \
  unit/test_basic.py::test_server_slots unit/test_basic.py::test_server_model_aliases_and_tags \
  unit/test_metrics.py::test_metrics_disabled \
  unit/test_security.py::test_cors_origins_localhost_reflects unit/test_security.py::test_cors_origins_localhost_rejects \
  unit/test_compat_anthropic.py::test_anthropic_messages_basic unit/test_compat_anthropic.py::test_anthropic_messages_streaming \
  unit/test_compat_anthropic.py::test_anthropic_count_tokens unit/test_compat_anthropic.py::test_anthropic_count_tokens_with_system
