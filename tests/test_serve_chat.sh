#!/usr/bin/env bash
# test_serve_chat.sh - kiln serve with a Jinja chat template (tests/serve_chat.py): tools and tool
# results rendered, chat_template_kwargs, thinking into reasoning_content (whole and streamed), a
# reasoning budget, --no-jinja's limits, malformed chat requests; a template that does not parse
# stops the server at start with its line named.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" serve-chat
. "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
tmpl=$src/tests/data/jinja/chatml-tools.jinja
for mode in think budget nojinja; do
  case $mode in
    think) args=(--chat-template-file "$tmpl") ;;
    budget) args=(--chat-template-file "$tmpl" --reasoning-budget 4) ;;
    nojinja) args=(--no-jinja) ;;
  esac
  if check "server starts ($mode)" srv_start "$tmp/log" -c 2048 "${args[@]}"; then
    check "chats ($mode)" timeout $limit python3 "$src/tests/serve_chat.py" "$port" "$mode"
    check "SIGTERM ($mode): exit 0" srv_stop "$tmp/log"
  fi
done
# a broken template: the server refuses to start, naming the line
printf 'line one\n{%% for x in y %%}\n{{ x }\n' >"$tmp/bad.jinja"
check "a template that does not parse: exit 1" exit_is 1 "$kiln" serve -m "$model" --port 0 --chat-template-file "$tmp/bad.jinja"
check "... naming its line" err_has "template line 3"
check "--chat-template TEXT with --no-jinja: exit 1" exit_is 1 "$kiln" serve -m "$model" --port 0 --no-jinja --chat-template "{{ x }}"
check "--reasoning-format bogus: exit 2" exit_is 2 "$kiln" serve -m "$model" --reasoning-format bogus
check "--reasoning-budget -2: exit 2" exit_is 2 "$kiln" serve -m "$model" --reasoning-budget -2
# kiln chat: the same template, thinking to stderr, tools need a template
check "kiln chat with the template" exit_is 0 sh -c "echo 'And God said' | '$kiln' chat -m '$model' -n 6 --temp 0 --chat-template-file '$tmpl'"
check "... thinking on stderr" err_has "[thinking]"
echo '[{"type": "function", "function": {"name": "f"}}]' >"$tmp/tools.json"
check "kiln chat --tools without a template: exit 1" exit_is 1 sh -c "echo hi | '$kiln' chat -m '$model' --tools '$tmp/tools.json'"
check "... saying why" err_has "needs a Jinja chat template"
check "kiln chat --tools with the template" exit_is 0 sh -c "echo 'And God said' | '$kiln' chat -m '$model' -n 4 --temp 0 --tools '$tmp/tools.json' --chat-template-file '$tmpl'"
tu_finish test_serve_chat
