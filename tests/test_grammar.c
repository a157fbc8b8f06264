/*
 * test_grammar.c - kiln's grammars without a model: GBNF syntax errors name
 * their line and column; unsupported schema features are refused by name;
 * strings a grammar must accept or reject (UTF-8 classes, exact repetition
 * counts, CRLF, comments, patterns, number bounds, formats); prefixed schema
 * grammars combine into one; hostile inputs (huge repetitions, deep nesting,
 * enormous texts) fail within a bound of time instead of running away.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/json.h"
#include "kiln.h"
#include "testutil.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool accepts(const struct kiln_grammar *g, const char *s) {
    char err[256];
    struct kiln_grammar_matcher *m = kiln_grammar_matcher_new(g, NULL, err, sizeof err);
    bool ok = m && kiln_grammar_matcher_accept_text(m, s, strlen(s)) && kiln_grammar_matcher_can_end(m);
    kiln_grammar_matcher_free(m);
    return ok;
}

/* ------------------------------------------------------------------ errors */

static void gbnf_errors(void) {
    static const struct {
        const char *gbnf, *want;
    } cases[] = {
        {"root ::= \"a\"\nfoo ::= bar\n", "line 2, column 9: rule 'bar' is used but never defined"},
        {"root ::= \"abc", "line 1, column 14: unterminated string literal"},
        {"root ::= [a-", "unexpected end of the grammar"},
        {"root ::= [z-a]", "line 1, column 14: range end"},
        {"root ::= x\nroot ::= \"b\"\nx ::= \"a\"", "line 2, column 1: rule 'root' is already defined at line 1"},
        {"root := \"a\"", "line 1, column 6: expected '::=' after 'root'"},
        {"root ::= \"a\" )", "line 1, column 14: unexpected ')'"},
        {"root ::= (\"a\"", "line 1, column 14: expected ')'"},
        {"root ::= *", "line 1, column 10: '*' has nothing before it to repeat"},
        {"root ::= \"a\"{3,2}", "line 1, column 17: repetition {3,2}: the maximum is below the minimum"},
        {"root ::= \"a\"{200000}", "repetition bound over 100000"},
        {"root ::= \"\\q\"", "line 1, column 12: unknown escape '\\q'"},
        {"root ::= \"\\xZZ\"", "expected 2 hex digits after \\x"},
        {"root ::= \"\\uD800\"", "U+D800 is a surrogate"},
        {"root ::= <think>", "token references"},
        {"root ::= \"a\"\n  \xff", "line 2, column 3"},
        {"root ::= \"\xc3\x28\"", "invalid UTF-8"},
        {"root ::= \"a\"*****", "more than 4 repetition operators"},
        {"root ::= []", "empty character class"},
        {"root ::= [^\\x00-\\U0010FFFF]", "matches no character"},
        {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
        {"root ::= a\na ::= b \"x\"\nb ::= \"\" | a", "left-recursive"},
        {"root ::= \"a\" root", "can never be complete"},
        {"", "the grammar has no rules"},
        {"  # only a comment\n", "the grammar has no rules"},
        {"rot ::= \"a\"", "no rule 'root'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        struct kiln_grammar *g = kiln_grammar_parse(cases[i].gbnf, strlen(cases[i].gbnf), NULL, err, sizeof err);
        CHECKF(!g && strstr(err, cases[i].want), "grammar %zu: want '%s', got '%s'", i, cases[i].want,
               g ? "(compiled)" : err);
        kiln_grammar_free(g);
    }
    /* a NUL inside the text is an error, not the end of the grammar */
    char err[256] = "";
    struct kiln_grammar *g = kiln_grammar_parse("root ::= \"a\0b\"", 14, NULL, err, sizeof err);
    CHECKF(!g && strstr(err, "NUL"), "NUL byte: %s", err);
    kiln_grammar_free(g);
}

static void schema_errors(void) {
    static const struct {
        const char *schema, *want;
    } cases[] = {
        {"{\"type\":\"array\",\"uniqueItems\":true}", "'uniqueItems' is not supported"},
        {"{\"not\":{\"type\":\"string\"}}", "'not' is not supported"},
        {"{\"if\":{},\"then\":{}}", "'if' is not supported"},
        {"{\"type\":\"object\",\"patternProperties\":{}}", "'patternProperties' is not supported"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"contentSchema\":{}}}}",
         "JSON Schema at #/properties/a: 'contentSchema' is not supported"},
        {"{\"type\":\"number\",\"multipleOf\":3}", "'multipleOf'"},
        {"{\"type\":\"number\",\"minimum\":0.5}", "bounds on a number must be whole numbers"},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer lies within the bounds"},
        {"{\"type\":\"string\",\"format\":\"uri\"}", "format 'uri' is not supported"},
        {"{\"type\":\"string\",\"pattern\":\"^a(?=b)$\"}", "lookaround"},
        {"{\"type\":\"string\",\"pattern\":\"^(a)\\\\1$\"}", "backreferences"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\bword\"}", "word boundaries"},
        {"{\"type\":\"string\",\"pattern\":\"a^b\"}", "anchors are supported only at the start and the end"},
        {"{\"type\":\"string\",\"pattern\":\"(a\"}", "unbalanced parentheses"},
        {"{\"type\":\"string\",\"pattern\":\"[b-a]\"}", "range out of order"},
        {"{\"type\":\"string\",\"pattern\":\"^a$\",\"maxLength\":3}", "'pattern' together with minLength/maxLength"},
        {"{\"type\":\"kaboom\"}", "unknown type 'kaboom'"},
        {"{\"type\":123}", "'type' must be a string or an array of strings"},
        {"{\"$ref\":\"#/$defs/missing\"}", "$ref '#/$defs/missing' does not resolve"},
        {"{\"$ref\":\"https://example.com/s.json\"}", "only references into the same document"},
        {"{\"type\":\"object\",\"required\":[\"a\"]}", "required property 'a' is not in 'properties'"},
        {"{\"enum\":[]}", "'enum' must be a non-empty array"},
        {"{\"type\":\"string\",\"enum\":[1,2]}", "no 'enum' value has the type 'string'"},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "minItems 3 is over maxItems 2"},
        {"{\"type\":\"array\",\"minItems\":-1}", "'minItems' must be a non-negative integer"},
        {"{\"minimum\":3}", "'minimum' without a 'type'"},
        {"{\"anyOf\":[{\"type\":\"string\"}],\"type\":\"integer\"}", "'type' beside 'anyOf'"},
        {"{\"anyOf\":[]}", "'anyOf' must be a non-empty array"},
        {"{\"allOf\":[{\"type\":\"string\",\"minLength\":2}]}", "'allOf' is supported for objects"},
        {"false", "the schema false allows no value"},
        {"{\"type\":\"object\",", "invalid JSON at line 1, column 18"},
        {"{\"a\":1,\"a\":2}", "duplicate key \"a\""},
        {"{\"type\":\"string\"} x", "trailing data"},
        {"{\"type\":\"string\",\"maxLength\":1000000}", "over kiln's limit"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        struct kiln_grammar *g = kiln_grammar_from_json_schema(cases[i].schema, strlen(cases[i].schema), err, sizeof err);
        CHECKF(!g && strstr(err, cases[i].want), "schema %zu %s: want '%s', got '%s'", i, cases[i].schema,
               cases[i].want, g ? "(compiled)" : err);
        kiln_grammar_free(g);
    }
}

/* ------------------------------------------------------------------ languages */

struct lang {
    bool schema;
    const char *text, *pass[8], *fail[8];
};

static const struct lang langs[] = {
    /* GBNF: classes over code points, matched as UTF-8 bytes */
    {false, "root ::= [а-я]+ \" \" [^a-z\\n]{2}", {"мир !?", "я ЖЖ", "ааа 😀😀"}, {"mir !?", "я a1", "я \n!", "я !"}},
    {false, "root ::= \"ab\"{2,3} | \"x\"{0}", {"abab", "ababab", ""}, {"ab", "abababab", "x"}},
    {false, "# comment\r\nroot ::= a (\r\n  \"-\" a\r\n)*  # trailing\r\na ::= [0-9]+\r\n", {"1", "12-3-456"}, {"-1", "1-", "1--2"}},
    {false, "root ::= .{3} \"!\"", {"abc!", "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac!"}, {"ab!", "abcd!"}},
    {false, "root ::= [\\x80-\\U0010FFFF]", {"\xc2\x80", "\xf4\x8f\xbf\xbf", "\xe2\x82\xac"}, {"a", "\xed\xa0\x80", "\xc0\x80"}},
    {false, "root ::= \"a\" b? | b\nb ::= \"b\"+ c\nc ::= | \"c\"", {"a", "ab", "abc", "bbc", "b"}, {"", "ac", "abcc"}},
    {false, "expr ::= term (\"+\" term)*\nterm ::= \"(\" expr \")\" | [0-9]\nroot ::= expr", {"1+(2+(3))", "((1))"}, {"(1", "1+", "()"}},
    /* JSON Schema */
    {true, "{\"type\":\"integer\",\"exclusiveMinimum\":-3,\"maximum\":12}", {"-2", "-0", "0", "12", "9"}, {"-3", "13", "01", "-"}},
    {true, "{\"type\":\"number\",\"exclusiveMinimum\":0}", {"0.5", "1", "123.25", "0.001"}, {"0", "-1", "0.0", "-0.5"}},
    {true, "{\"type\":\"number\",\"minimum\":-2,\"maximum\":3}", {"-2", "-1.5", "0", "3", "3.0", "2.99"}, {"-2.5", "3.01", "4", "-3"}},
    {true, "{\"type\":\"string\",\"format\":\"date\"}", {"\"2024-02-28\"", "\"2000-12-31\"", "\"1999-04-30\""}, {"\"2024-02-30\"", "\"2024-04-31\"", "\"2024-13-01\""}},
    {true, "{\"type\":\"string\",\"format\":\"date-time\"}", {"\"2024-01-02T03:04:05Z\"", "\"2024-01-02T23:59:59.123+05:30\""}, {"\"2024-01-02 03:04:05Z\"", "\"2024-01-02T24:00:00Z\""}},
    {true, "{\"type\":\"string\",\"format\":\"email\"}", {"\"a@b.c\"", "\"first.last+x@mail.example.org\""}, {"\"a@b\"", "\"@b.c\"", "\"a..b@c.d\""}},
    {true, "{\"type\":\"string\",\"format\":\"ipv4\"}", {"\"10.0.0.255\"", "\"0.0.0.0\""}, {"\"256.0.0.1\"", "\"1.2.3\"", "\"01.2.3.4\""}},
    {true, "{\"type\":\"string\",\"pattern\":\"^\\\\d{3}-[A-Z]+$\"}", {"\"123-AB\""}, {"\"12-AB\"", "\"123-ab\"", "\"123-\""}},
    {true, "{\"type\":\"string\",\"pattern\":\"b\\\\.c\"}", {"\"b.c\"", "\"ab.cd\"", "\"\\\"b.c\\n\""}, {"\"bxc\"", "\"b.\""}},
    {true, "{\"type\":\"string\",\"pattern\":\"^[^a]$\"}", {"\"b\"", "\"\\\"\"", "\"\\\\\"", "\"\\n\"", "\"\\u0001\""}, {"\"a\"", "\"\"\"", "\"ab\""}},
    {true, "{\"type\":\"string\",\"pattern\":\"^(?:ab|c)*$\"}", {"\"\"", "\"abcab\"", "\"ccc\""}, {"\"abb\"", "\"a\""}},
    {true, "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", {"\"ab\"", "\"a\\nb\"", "\"€€€\""}, {"\"a\"", "\"abcd\"", "\"a\\ud800\""}},
    {true, "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"}],\"items\":{\"type\":\"boolean\"},\"maxItems\":3}",
     {"[1]", "[1,true]", "[1, true, false]"}, {"[]", "[true]", "[1,true,false,true]", "[1,2]"}},
    {true, "{\"type\":[\"string\",\"null\"],\"maxLength\":1}", {"\"a\"", "null", "\"\""}, {"\"ab\"", "1"}},
    {true, "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"$ref\":\"#/$defs/n\"}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/n\"}",
     {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3}}}"}, {"{}", "{\"next\":{\"v\":1}}", "{\"v\":1,\"next\":{}}"}},
    {true, "{\"oneOf\":[{\"const\":{\"a\":[1,\"x\"]}},{\"enum\":[true,null,2.50]}]}", {"{\"a\":[1,\"x\"]}", "true", "null", "2.50"}, {"2.5", "false", "{\"a\": [1,\"x\"]}"}},
    {true, "true", {"1", "\"x\"", "[{}]", "null"}, {"", "nul", "[1,]"}},
};

static void languages(void) {
    for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++) {
        const struct lang *l = &langs[i];
        char err[512];
        struct kiln_grammar *g = l->schema ? kiln_grammar_from_json_schema(l->text, strlen(l->text), err, sizeof err)
                                           : kiln_grammar_parse(l->text, strlen(l->text), NULL, err, sizeof err);
        CHECKF(g != NULL, "%s: %s", l->text, err);
        if (!g) continue;
        for (int k = 0; k < 8 && l->pass[k]; k++)
            CHECKF(accepts(g, l->pass[k]), "%s\n  rejects '%s'\n%s", l->text, l->pass[k], kiln_grammar_text(g));
        for (int k = 0; k < 8 && l->fail[k]; k++)
            CHECKF(!accepts(g, l->fail[k]), "%s\n  accepts '%s'\n%s", l->text, l->fail[k], kiln_grammar_text(g));
        kiln_grammar_free(g);
    }
}

/* Two schemas with prefixes in one grammar (a tool call chooses among tools). */
static void prefixed(void) {
    const char *a = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}";
    const char *b = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"]}";
    char ga[4096], gb[4096], err[256], all[9000];
    int64_t na = kiln_json_schema_to_gbnf(a, strlen(a), "weather-", ga, sizeof ga, err, sizeof err);
    int64_t nb = kiln_json_schema_to_gbnf(b, strlen(b), "count-", gb, sizeof gb, err, sizeof err);
    CHECKF(na > 0 && nb > 0, "%s", err);
    CHECK(strstr(ga, "weather-root ::=") && strstr(ga, "weather-space ::=") && !strstr(ga, "\nroot ::="));
    int64_t need = kiln_json_schema_to_gbnf(a, strlen(a), "weather-", NULL, 0, err, sizeof err);
    CHECKF(need == -(na + 1), "size query: %lld for %lld bytes", (long long)need, (long long)na);
    CHECK(kiln_json_schema_to_gbnf(a, strlen(a), "bad prefix", ga, sizeof ga, err, sizeof err) == KILN_ERR_INVALID);
    snprintf(all, sizeof all, "root ::= \"<call>\" (weather-root | count-root) \"</call>\"\n%s%s", ga, gb);
    struct kiln_grammar *g = kiln_grammar_parse(all, strlen(all), NULL, err, sizeof err);
    CHECKF(g != NULL, "%s\n%s", err, all);
    if (g) {
        CHECK(accepts(g, "<call>{\"city\": \"Oslo\"}</call>"));
        CHECK(accepts(g, "<call>{\"n\":3}</call>"));
        CHECK(!accepts(g, "<call>{\"n\":\"3\"}</call>"));
    }
    kiln_grammar_free(g);
}

/* ------------------------------------------------------------------ hostile inputs */

static void hostile(void) {
    static const char *const gbnf[] = {
        "root ::= (((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}",
        "root ::= [^\"]{0,100000}",
        "root ::= (\"x\"{100000}){100000}",
        "root ::= ([a-z]{1,100000}){1,100000}",
    };
    for (size_t i = 0; i < sizeof gbnf / sizeof gbnf[0]; i++) {
        char err[256] = "";
        double t0 = now();
        struct kiln_grammar *g = kiln_grammar_parse(gbnf[i], strlen(gbnf[i]), NULL, err, sizeof err);
        double dt = now() - t0;
        CHECKF(!g && strstr(err, "too large"), "hostile grammar %zu: %s", i, g ? "compiled" : err);
        CHECKF(dt < 10, "hostile grammar %zu took %.1f s", i, dt);
        kiln_grammar_free(g);
    }
    /* nesting: groups, JSON values, schemas inside schemas */
    size_t n = 3000;
    char *deep = malloc(4 * n + 64), err[256];
    int k = sprintf(deep, "root ::= ");
    for (size_t i = 0; i < n; i++) deep[k++] = '(';
    deep[k++] = '"', deep[k++] = 'a', deep[k++] = '"';
    for (size_t i = 0; i < n; i++) deep[k++] = ')';
    deep[k] = 0;
    struct kiln_grammar *g = kiln_grammar_parse(deep, strlen(deep), NULL, err, sizeof err);
    CHECKF(!g && strstr(err, "nested deeper"), "deep groups: %s", g ? "compiled" : err);
    kiln_grammar_free(g);
    k = 0;
    for (size_t i = 0; i < n; i++) k += sprintf(deep + k, "[");
    for (size_t i = 0; i < n; i++) deep[k++] = ']';
    deep[k] = 0;
    g = kiln_grammar_from_json_schema(deep, strlen(deep), err, sizeof err);
    CHECKF(!g && strstr(err, "nested deeper"), "deep JSON: %s", g ? "compiled" : err);
    kiln_grammar_free(g);
    free(deep);
    char *items = malloc(16 * 400 + 64);
    k = 0;
    for (int i = 0; i < 400; i++) k += sprintf(items + k, "{\"items\":");
    k += sprintf(items + k, "{}");
    for (int i = 0; i < 400; i++) items[k++] = '}';
    items[k] = 0;
    g = kiln_grammar_from_json_schema(items, strlen(items), err, sizeof err);
    CHECKF(!g && strstr(err, "nested deeper"), "deep schema: %s", g ? "compiled" : err);
    kiln_grammar_free(g);
    free(items);
    /* a text past the size limit is refused before it is read */
    g = kiln_grammar_parse("root ::= \"a\"", (size_t)64 << 20, NULL, err, sizeof err);
    CHECKF(!g && strstr(err, "at most"), "huge text: %s", g ? "compiled" : err);
    kiln_grammar_free(g);
    /* an ambiguous grammar: a run of digits can be split between nested expressions at
     * every digit, each split a parse kept alive; past the bound the text is refused */
    const char *amb = "root ::= expr\nexpr ::= term ((root \"-\") term)*\nterm ::= [0-9]+ | \"(\" expr";
    g = kiln_grammar_parse(amb, strlen(amb), NULL, err, sizeof err);
    CHECKF(g != NULL, "%s", err);
    struct kiln_grammar_matcher *am = g ? kiln_grammar_matcher_new(g, NULL, err, sizeof err) : NULL;
    double t0 = now();
    bool refused = false;
    for (int i = 0; am && i < 6000 && !refused; i++) refused = !kiln_grammar_matcher_accept_text(am, "1", 1);
    CHECKF(refused && strstr(kiln_grammar_matcher_error(am), "ambiguous"), "ambiguous grammar: %s",
           am ? kiln_grammar_matcher_error(am) : "no matcher");
    CHECKF(now() - t0 < 10, "ambiguous grammar took %.1f s", now() - t0);
    kiln_grammar_matcher_free(am);
    kiln_grammar_free(g);
    /* a recursive schema meets a cycle of $refs without looping */
    const char *cyc = "{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}";
    g = kiln_grammar_from_json_schema(cyc, strlen(cyc), err, sizeof err);
    CHECKF(!g, "a $ref cycle with nothing in it compiled");
    kiln_grammar_free(g);
}

/* ------------------------------------------------------------------ lazy matcher, text API */

static void lazy_and_text(void) {
    char err[256];
    const char *gbnf = "root ::= \"<tool>\" [a-z]+ \"</tool>\"";
    struct kiln_grammar *g = kiln_grammar_parse(gbnf, strlen(gbnf), NULL, err, sizeof err);
    CHECKF(g != NULL, "%s", err);
    if (!g) return;
    const char *trig[] = {"<tool>"};
    struct kiln_grammar_matcher *m = kiln_grammar_matcher_new_lazy(g, NULL, trig, 1, err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    CHECK(!kiln_grammar_matcher_new_lazy(g, NULL, NULL, 0, err, sizeof err));
    kiln_grammar_free(g); /* the matcher keeps it */
    if (!m) return;
    CHECK(!kiln_grammar_matcher_is_active(m));
    CHECK(kiln_grammar_matcher_accept_text(m, "Let me look <to", 15)); /* anything goes before the trigger */
    CHECK(!kiln_grammar_matcher_is_active(m));
    CHECK(kiln_grammar_matcher_accept_text(m, "ol>abc", 6)); /* the trigger, split across two pieces */
    CHECK(kiln_grammar_matcher_is_active(m));
    CHECK(!kiln_grammar_matcher_accept_text(m, "1", 1)); /* now the grammar holds */
    CHECK(kiln_grammar_matcher_accept_text(m, "</tool>", 7));
    CHECK(kiln_grammar_matcher_is_done(m));
    kiln_grammar_matcher_reset(m);
    CHECK(!kiln_grammar_matcher_is_active(m));
    CHECK(!kiln_grammar_matcher_accept_text(m, "x <tool>9", 9)); /* the text after the trigger must fit */
    kiln_grammar_matcher_free(m);
}

int main(void) {
    gbnf_errors();
    schema_errors();
    languages();
    prefixed();
    hostile();
    lazy_and_text();
    return tu_finish("test_grammar");
}
