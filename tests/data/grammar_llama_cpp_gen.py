#!/usr/bin/env python3
"""Makes grammar_llama_cpp.txt (read by tests/test_grammar_conformance.c): the
grammar and JSON Schema cases of llama.cpp's own tests, as facts.

  python3 tests/data/grammar_llama_cpp_gen.py /tmp/kiln-peer/src > tests/data/grammar_llama_cpp.txt

Sources (llama.cpp, the peer checkout):
  tests/test-grammar-integration.cpp   test_grammar / test_schema: a grammar or a
      schema with strings it accepts and strings it rejects; the grammars that
      must fail to build (missing reference, left recursion).
  tests/test-grammar-parser.cpp        verify_failure: grammars that must not parse.
  tests/test-json-schema-to-grammar.cpp  test({SUCCESS|FAILURE, name, schema,
      grammar}): the grammar llama.cpp converts a schema to, or that it refuses it.

Output: one record per line, fields separated by a tab, text escaped (\\n \\t
\\\\ \\xHH for other control bytes):
  case NAME                 a new case
  grammar TEXT | schema TEXT
  pass TEXT | fail TEXT     strings the grammar accepts / rejects
  build-fails TEXT          a grammar llama.cpp refuses
  expect GRAMMAR-TEXT       (schema-to-grammar cases) llama.cpp's conversion
  refused                   (schema-to-grammar cases) llama.cpp refuses the schema
  root NAME                 the start rule of the case's grammar (default: root)
Strings holding llama.cpp's token markers (token(N), <[N]>) are left out with a
"# skipped" comment: kiln's grammars match text, not token ids.
"""
import re
import sys

ESC = {'n': '\n', 't': '\t', 'r': '\r', '\\': '\\', '"': '"', "'": "'", '0': '\0'}


def lex_strings(src, i):
    """Parse one C++ string expression at src[i:] (adjacent literals concatenated);
    returns (text or None when it is not a plain literal, new index)."""
    parts = []
    plain = True
    while True:
        while i < len(src) and src[i] in ' \t\r\n':
            i += 1
        if src.startswith('//', i):
            i = src.index('\n', i)
            continue
        m = re.match(r'R"([^(]*)\(', src[i:])
        if m:
            delim = m.group(1)
            start = i + m.end()
            end = src.index(')' + delim + '"', start)
            parts.append(src[start:end])
            i = end + len(delim) + 2
            continue
        if i < len(src) and src[i] == '"':
            j = i + 1
            s = []
            while src[j] != '"':
                if src[j] == '\\':
                    c = src[j + 1]
                    if c == 'x':
                        h = re.match(r'[0-9a-fA-F]+', src[j + 2:]).group(0)
                        s.append(chr(int(h, 16)))
                        j += 2 + len(h)
                        continue
                    s.append(ESC[c])
                    j += 2
                    continue
                s.append(src[j])
                j += 1
            parts.append(''.join(s))
            i = j + 1
            continue
        if src.startswith('token(', i) or src.startswith('+', i):
            plain = False
            depth = 0
            while i < len(src):  # skip to the end of the expression
                if src[i] == '(':
                    depth += 1
                elif src[i] == ')':
                    if depth == 0:
                        break
                    depth -= 1
                elif src[i] == ',' and depth == 0:
                    break
                elif src[i] == '}' and depth == 0:
                    break
                elif src[i] == '"':
                    _, i = lex_strings(src, i)
                    continue
                i += 1
            continue
        break
    return (''.join(parts) if plain and parts else None), i


def skip_ws(src, i):
    while True:
        while i < len(src) and src[i] in ' \t\r\n,':
            i += 1
        if src.startswith('//', i):
            i = src.index('\n', i)
            continue
        return i


def lex_list(src, i):
    """{ str, str, ... } -> (list of texts (None for non-plain), index after })"""
    i = skip_ws(src, i)
    assert src[i] == '{', src[i:i + 40]
    i += 1
    out = []
    while True:
        i = skip_ws(src, i)
        if src[i] == '}':
            return out, i + 1
        s, i = lex_strings(src, i)
        out.append(s)


def esc(s):
    return s.replace('\\', '\\\\').replace('\n', '\\n').replace('\t', '\\t').replace('\r', '\\x0d') \
        .replace('\0', '\\x00')


def integration(path):
    src = open(path, encoding='utf-8').read()
    for m in re.finditer(r'\btest_(grammar|schema)\(\s*', src):
        if src[m.start() - 7:m.start()] == 'static ' or 'const std::string' in src[m.end():m.end() + 40]:
            continue  # the definitions
        i = m.end()
        desc, i = lex_strings(src, i)
        i = skip_ws(src, i)
        text, i = lex_strings(src, i)
        passing, i = lex_list(src, i)
        failing, i = lex_list(src, i)
        print('case\t%s: %s' % ('integration', esc(desc)))
        print('%s\t%s' % (m.group(1), esc(text)))
        for kind, lst in (('pass', passing), ('fail', failing)):
            for s in lst:
                if s is None:
                    print('# skipped: a string with token ids')
                else:
                    print('%s\t%s' % (kind, esc(s)))
    for m in re.finditer(r'test_build_grammar_fails\((\w+)\)', src):
        var = m.group(1)
        d = re.search(r'const std::string ' + var + r'\s*=\s*', src)
        text, _ = lex_strings(src, d.end())
        print('case\tintegration: build fails: %s' % var)
        print('build-fails\t%s' % esc(text))
    for fn in ('missing_reference', 'missing_root'):
        d = re.search(r'test_failure_' + fn + r'\(\) \{.*?const std::string grammar_str\s*=\s*', src, re.S)
        text, _ = lex_strings(src, d.end())
        print('case\tintegration: %s' % fn.replace('_', ' '))
        print('build-fails\t%s' % esc(text))
    # a start rule other than root: refused when it is missing, accepted when named
    d = re.search(r'const std::string custom_root_grammar_str\s*=\s*', src)
    text, _ = lex_strings(src, d.end())
    print('case\tintegration: custom root, missing')
    print('build-fails\t%s' % esc(text))
    print('case\tintegration: custom root foobar')
    print('root\tfoobar')
    print('grammar\t%s' % esc(text))
    print('pass\tfoobar')


def parser_failures(path):
    src = open(path, encoding='utf-8').read()
    for k, m in enumerate(re.finditer(r'verify_failure\(\s*(?=R")', src)):
        text, _ = lex_strings(src, m.end())
        print('case\tparser: failure %d' % k)
        print('build-fails\t%s' % esc(text))


def schema_to_grammar(path):
    src = open(path, encoding='utf-8').read()
    for m in re.finditer(r'test\(\{\s*(SUCCESS|FAILURE),\s*', src):
        i = m.end()
        name, i = lex_strings(src, i)
        i = skip_ws(src, i)
        schema, i = lex_strings(src, i)
        i = skip_ws(src, i)
        grammar, i = lex_strings(src, i)
        print('case\tschema-to-grammar: %s' % esc(name))
        print('schema\t%s' % esc(schema))
        if m.group(1) == 'SUCCESS':
            print('expect\t%s' % esc(grammar))
        else:
            print('refused')


if __name__ == '__main__':
    root = sys.argv[1] if len(sys.argv) > 1 else '/tmp/kiln-peer/src'
    print('# llama.cpp grammar facts, extracted by tests/data/grammar_llama_cpp_gen.py from')
    print('# %s/tests/{test-grammar-integration,test-grammar-parser,test-json-schema-to-grammar}.cpp' % root)
    integration(root + '/tests/test-grammar-integration.cpp')
    parser_failures(root + '/tests/test-grammar-parser.cpp')
    schema_to_grammar(root + '/tests/test-json-schema-to-grammar.cpp')
