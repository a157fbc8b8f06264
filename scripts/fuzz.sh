#!/usr/bin/env bash
# Fuzz kiln with libFuzzer under ASan+UBSan (clang).
#   scripts/fuzz.sh [SECONDS] [TARGET]   (default 1800 s, target gguf; KILN_SHARED overrides ../shared)
# TARGET gguf: kiln's GGUF reader (and legacy GGML/GGMF/GGJT reader). Builds
# build-gguf-fuzz/fuzz_gguf, makes a seed corpus from ../shared (the first
# 64 KiB of every model and vocabulary file, plus a miniature of each file: all
# of its metadata with arrays cut to 8 elements and every tensor cut to one row
# of one block, so that seeds reach tensor validation), then runs one fuzzing
# process at nice 19. Crashing inputs land in fuzz-corpus/gguf-artifacts/; copy
# them to tests/data/gguf-crashes/, where test_gguf_bad opens each one.
# TARGET grammar: the GBNF parser, the JSON Schema converter and the mask engine
# (tests/fuzz/fuzz_grammar.c), from the seeds in tests/data/grammar-fuzz/ with
# tests/fuzz/grammar.dict. Crashes land in fuzz-corpus/grammar-artifacts/; copy
# them to tests/data/grammar-fuzz/, where test_grammar_fuzz runs each one. A
# short run (CI): scripts/fuzz.sh 60 grammar
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-1800}
target=${2:-gguf}
shared=${KILN_SHARED:-../shared}
build=build-gguf-fuzz
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

if [ "$target" = grammar ]; then
  cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKILN_FUZZ=ON -DKILN_SANITIZE=ON >/dev/null
  cmake --build "$build" -j2 --target fuzz_grammar
  corpus=fuzz-corpus/grammar arts=fuzz-corpus/grammar-artifacts
  mkdir -p "$corpus" "$arts"
  # -timeout: a grammar near the size limits takes a second to be refused; a loaded
  # machine starves a nice 19 process for more
  exec nice -n 19 "$build"/fuzz_grammar -max_total_time="$secs" -max_len=4096 -rss_limit_mb=2048 -timeout=60 \
    -dict=tests/fuzz/grammar.dict -print_final_stats=1 -artifact_prefix="$arts/" "$corpus" tests/data/grammar-fuzz
fi
[ "$target" = gguf ] || { echo "fuzz.sh: unknown target '$target' (gguf, grammar)" >&2; exit 2; }

cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKILN_FUZZ=ON -DKILN_SANITIZE=ON >/dev/null
cmake --build "$build" -j2 --target fuzz_gguf

seeds=fuzz-corpus/gguf-seeds corpus=fuzz-corpus/gguf arts=fuzz-corpus/gguf-artifacts
mkdir -p "$seeds" "$corpus" "$arts"
for f in "$shared"/models/*.gguf "$shared"/vocab/*.gguf; do
  [ -f "$f" ] && head -c 65536 "$f" > "$seeds/head-$(basename "$f")"
done
python3 - "$seeds" "$shared"/models/*.gguf "$shared"/vocab/*.gguf <<'PY'
# Miniature of a GGUF: same metadata (arrays cut to 8 elements), tensors cut to one block row.
import os, struct, sys
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
out_dir = sys.argv[1]
for path in sys.argv[2:]:
    if not os.path.isfile(path):
        continue
    with open(path, 'rb') as f:
        d = f.read(16 << 20)
    pos = 0
    def take(n):
        global pos
        b = d[pos:pos + n]; pos += n
        return b
    def u32(): return struct.unpack('<I', take(4))[0]
    def u64(): return struct.unpack('<Q', take(8))[0]
    def s(): return take(u64())
    def skip_value(t):
        if t == 8: s()
        elif t == 9:
            et, n = u32(), u64()
            for _ in range(n): skip_value(et)
        else: take(SCALAR[t])
    try:
        assert take(4) == b'GGUF'
        ver = u32(); nt = u64(); nkv = u64()
        out = bytearray(b'GGUF' + struct.pack('<IQQ', ver, nt, nkv))
        align = 32
        for _ in range(nkv):
            k = s(); t = u32()
            out += struct.pack('<Q', len(k)) + k + struct.pack('<I', t)
            if t == 9:
                et, n = u32(), u64()
                m = min(n, 8)
                out += struct.pack('<IQ', et, m)
                start = pos
                for i in range(n):
                    if i == m: break
                    skip_value(et)
                out += d[start:pos]
                for i in range(m, n): skip_value(et)
            else:
                start = pos; skip_value(t); out += d[start:pos]
                if k == b'general.alignment': align = struct.unpack('<I', d[start:pos])[0]
        off = 0
        for _ in range(nt):
            name = s(); nd = u32(); ne = [u64() for _ in range(nd)]; t = u32(); u64()
            blk, size = BLOCK.get(t, (256, 256))
            out += struct.pack('<Q', len(name)) + name + struct.pack('<I', nd)
            out += struct.pack('<Q', blk) + b''.join(struct.pack('<Q', 1) for _ in ne[1:])
            out += struct.pack('<IQ', t, off)
            off += (size + align - 1) // align * align
        out += bytes(-len(out) % align) + bytes(off)
        with open(os.path.join(out_dir, 'mini-' + os.path.basename(path)), 'wb') as f:
            f.write(out)
    except Exception as e:
        print('mini', path, 'skipped:', e, file=sys.stderr)
PY
# legacy files (src/gguf/legacy.c, reached through gguf_open_memory): a miniature GGJT v3
# llama (1 layer, F32), and the same as GGMF v1 and GGML (no scores, no padding)
python3 - "$seeds" <<'PY'
import os, struct, sys
E, FF, V = 32, 96, 4
names = [('tok_embeddings', (E, V)), ('norm', (E,)), ('output', (E, V))] + [
    ('layers.0.' + n, s) for n, s in [('attention.wq', (E, E)), ('attention.wk', (E, E)), ('attention.wv', (E, E)),
                                      ('attention.wo', (E, E)), ('attention_norm', (E,)), ('feed_forward.w1', (E, FF)),
                                      ('feed_forward.w2', (FF, E)), ('feed_forward.w3', (E, FF)), ('ffn_norm', (E,))]]
for magic, ver in ((b'tjgg', 3), (b'fmgg', 1), (b'lmgg', None)):
    out = bytearray(magic + (struct.pack('<I', ver) if ver else b''))
    out += struct.pack('<7I', V, E, 32, 2, 1, 16, 0)
    for tok in (b'<unk>', b'<s>', b'</s>', b' a'):
        out += struct.pack('<I', len(tok)) + tok + (struct.pack('<f', -1.0) if ver else b'')
    for name, shape in names:
        nm = (name + '.weight').encode()
        out += struct.pack('<3I', len(shape), len(nm), 0) + struct.pack('<%dI' % len(shape), *shape) + nm
        if magic == b'tjgg': out += bytes(-len(out) % 32)
        n = 1
        for d in shape: n *= d
        out += bytes(4 * n)
    with open(os.path.join(sys.argv[1], 'legacy-' + magic.decode()), 'wb') as f:
        f.write(out)
PY
echo "seeds: $(ls "$seeds" | wc -l) files in $seeds"

# -timeout is generous: on a loaded machine a nice 19 process can be starved for
# seconds (a first run reported 10 s "timeouts" on inputs that parse in 1 us).
nice -n 19 "$build"/fuzz_gguf -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=120 \
  -print_final_stats=1 -artifact_prefix="$arts/" "$corpus" "$seeds"
