#!/usr/bin/env bash
# test_grammar_cli.sh - structured output from the command line: kiln run and chat with
# --json-schema / --grammar (text and files) give output that parses and fits; bad
# grammars, schemas and flag combinations are usage errors naming the problem; kiln
# bench --json-schema runs and reports mask times. Model: ../shared/models/kjv-q4_0.gguf,
# else models/kjv-q4_0.gguf.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" grammar-cli
src=${KILN_SRC:-$(dirname "${BASH_SOURCE[0]}")/..}
model=$shared/models/kjv-q4_0.gguf
[ -f "$model" ] || model=$src/models/kjv-q4_0.gguf
[ -f "$model" ] || { echo "SKIP: no kjv-q4_0.gguf in ../shared/models or models/"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }

schema='{"type":"object","properties":{"king":{"type":"string","maxLength":12},"years":{"type":"integer","minimum":1,"maximum":60},"good":{"type":"boolean"}},"required":["king","years","good"]}'
fits() { # the JSON in FILE fits the schema above
  python3 - "$1" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
ok = (set(v) == {"king", "years", "good"} and isinstance(v["king"], str) and len(v["king"]) <= 12
      and isinstance(v["years"], int) and 1 <= v["years"] <= 60 and isinstance(v["good"], bool))
sys.exit(0 if ok else 1)
PY
}
for seed in 1 2 3; do
  check "run -j, seed $seed" exit_is 0 "$kiln" run -m "$model" -p "The kings of Israel" -n 300 -s $seed --temp 1 -j "$schema"
  check "run -j, seed $seed: the output fits the schema" fits "$tmp/out"
done
printf '%s' "$schema" > "$tmp/schema.json"
check "run -jf FILE" exit_is 0 "$kiln" run -m "$model" -p "The kings" -n 300 -s 4 --json-schema-file "$tmp/schema.json"
check "run -jf FILE: fits" fits "$tmp/out"
printf 'root ::= answer "."\nanswer ::= "yea" | "nay"  # a comment\n' > "$tmp/yn.gbnf"
check "run --grammar-file" exit_is 0 "$kiln" run -m "$model" -p "And the LORD said" -n 20 -s 2 --grammar-file "$tmp/yn.gbnf"
check "run --grammar-file: yea. or nay." grep -qxE "(yea|nay)\." "$tmp/out"
check "run --grammar --json" exit_is 0 "$kiln" run -m "$model" -p "And" -n 20 -s 2 --json --grammar 'root ::= [0-9]{3}'
check "run --grammar --json: three digits" python3 -c 'import json,re,sys; sys.exit(not re.fullmatch("[0-9]{3}", json.load(open(sys.argv[1]))["text"]))' "$tmp/out"
printf 'Who was king?\nAnd after him?\n' > "$tmp/chat.in"
check "chat -j: every reply held to the schema" exit_is 0 sh -c '"$0" chat -m "$1" -n 80 -s 5 -j "{\"enum\":[\"Saul\",\"David\",\"Solomon\"]}" < "$2"' "$kiln" "$model" "$tmp/chat.in"
check "chat -j: two replies, each an enum value" python3 -c '
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l]
sys.exit(not (len(lines) == 2 and all(json.loads(l) in ("Saul", "David", "Solomon") for l in lines)))' "$tmp/out"

# errors: usage (2) naming the problem, or the file that cannot be read (1)
check "bad grammar: line and column" exit_is 2 "$kiln" run -m "$model" -p x --grammar $'root ::= "a" |\n  bogus'
check "bad grammar named" err_has "grammar line 2, column 3: rule 'bogus' is used but never defined"
check "unsupported schema keyword" exit_is 2 "$kiln" run -m "$model" -p x -j '{"type":"array","uniqueItems":true}'
check "unsupported schema keyword named" err_has "'uniqueItems' is not supported"
check "malformed schema" exit_is 2 "$kiln" run -m "$model" -p x -j '{"type":'
check "malformed schema named" err_has "invalid JSON at line 1, column 9"
check "two grammars" exit_is 2 "$kiln" run -m "$model" -p x --grammar 'root ::= "a"' -j '{}'
check "two grammars named" err_has "give one of --grammar"
check "missing grammar file" exit_is 1 "$kiln" run -m "$model" -p x --grammar-file "$tmp/none.gbnf"
check "huge repetition: refused" exit_is 2 "$kiln" run -m "$model" -p x --grammar 'root ::= ("a"{0,9999}){0,9999}'
check "huge repetition named" err_has "too large"
check "chat with a bad schema" exit_is 2 "$kiln" chat -m "$model" -j '{"type":"str"}'
check "chat with a bad schema named" err_has "unknown type 'str'"

# bench: constrained and unconstrained tg, mask times
check "bench --json-schema" exit_is 0 "$kiln" bench -m "$model" --json-schema "$tmp/schema.json" -n 16 -r 1 -t 1 -o json
check "bench --json-schema: its fields" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(not all(k in j for k in ("compile_ms", "mask_us_median", "mask_us_p99", "tg_ts", "tg_grammar_ts", "ratio")))' "$tmp/out"
check "bench with two grammar flags" exit_is 2 "$kiln" bench -m "$model" --json-schema "$tmp/schema.json" --grammar-file "$tmp/yn.gbnf"
check "bench with a grammar and -n lists" exit_is 2 "$kiln" bench -m "$model" --json-schema "$tmp/schema.json" -n 8,16
tu_finish test_grammar_cli
