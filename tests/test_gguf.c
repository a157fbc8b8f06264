/*
 * test_gguf.c - the GGUF reader and writer on good files: a hand-crafted file
 * (bytes laid out from the format description) read through every accessor;
 * the writer's bytes compared with hand-crafted bytes; a write/read round trip
 * of every value type, arrays and tensors of several types; the read() path;
 * lookup among thousands of tensors.
 */
#include "gguf.h"
#include "test_gguf_build.h"
#include "testutil.h"

#include <unistd.h>

static bool str_is(struct gguf_str s, const char *want) {
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

/* Every value type, strings with odd bytes, a nested array, two tensors. */
static void craft_file(struct tb *b) {
    tb_header(b, 3, 2, 17);
    tb_str(b, "u8"), tb_u32(b, T_U8), tb_u8(b, 200);
    tb_str(b, "i8"), tb_u32(b, T_I8), tb_u8(b, 0x80);
    tb_str(b, "u16"), tb_u32(b, T_U16), tb_u8(b, 0x34), tb_u8(b, 0xf2);
    tb_str(b, "i16"), tb_u32(b, T_I16), tb_u8(b, 0xfe), tb_u8(b, 0xff);
    tb_kv_u32(b, "u32", 4000000000u);
    tb_str(b, "i32"), tb_u32(b, T_I32), tb_u32(b, (uint32_t)-7);
    tb_str(b, "f32"), tb_u32(b, T_F32), tb_u32(b, 0x3fc00000u); /* 1.5 */
    tb_str(b, "bool"), tb_u32(b, T_BOOL), tb_u8(b, 1);
    tb_kv_str(b, "str", "h\xc3\xa9llo");
    tb_str(b, "u64"), tb_u32(b, T_U64), tb_u64(b, UINT64_MAX);
    tb_str(b, "i64"), tb_u32(b, T_I64), tb_u64(b, (uint64_t)INT64_MIN);
    tb_str(b, "f64"), tb_u32(b, T_F64), tb_u64(b, 0xc00921fb54442d18ull); /* -pi */
    tb_str(b, "arr.str"), tb_u32(b, T_ARR), tb_u32(b, T_STR), tb_u64(b, 3);
    tb_str(b, "a"), tb_str(b, ""), tb_u64(b, 3), tb_bytes(b, "x\0y", 3);
    tb_str(b, "arr.i16"), tb_u32(b, T_ARR), tb_u32(b, T_I16), tb_u64(b, 3);
    tb_u8(b, 1), tb_u8(b, 0), tb_u8(b, 0xff), tb_u8(b, 0xff), tb_u8(b, 0), tb_u8(b, 0x80);
    tb_str(b, "arr.f64"), tb_u32(b, T_ARR), tb_u32(b, T_F64), tb_u64(b, 1), tb_u64(b, 0x3ff0000000000000ull);
    tb_str(b, "arr.nested"), tb_u32(b, T_ARR), tb_u32(b, T_ARR), tb_u64(b, 2);
    tb_u32(b, T_U8), tb_u64(b, 2), tb_u8(b, 7), tb_u8(b, 8);
    tb_u32(b, T_STR), tb_u64(b, 1), tb_str(b, "in");
    tb_str(b, "arr.empty"), tb_u32(b, T_ARR), tb_u32(b, T_U32), tb_u64(b, 0);
    int64_t ne_a[2] = {4, 3}, ne_b[1] = {64};
    tb_tensor(b, "a", 2, ne_a, 0 /* f32 */, 0);
    tb_tensor(b, "blk.0.b", 1, ne_b, 8 /* q8_0 */, 64);
    tb_pad(b, 32);
    tb_fill(b, 48, 1), tb_fill(b, 16, 0), tb_fill(b, 68, 100);
}

static void test_read_crafted(void) {
    struct tb b = {0};
    craft_file(&b);
    char err[256];
    struct gguf_file *g = gguf_open_memory(b.p, b.n, err, sizeof err);
    CHECKF(g != NULL, "crafted file rejected: %s", err);
    if (!g) return;
    CHECK(gguf_version(g) == 3);
    CHECK(gguf_alignment(g) == 32);
    CHECK(gguf_n_kv(g) == 17);
    CHECK(gguf_size(g) == b.n);
    CHECK(gguf_base(g) == b.p);

    uint8_t u8;
    int8_t i8;
    uint16_t u16;
    int16_t i16;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool bl;
    struct gguf_str s;
    CHECK(gguf_get_u8(g, "u8", &u8) && u8 == 200);
    CHECK(gguf_get_i8(g, "i8", &i8) && i8 == -128);
    CHECK(gguf_get_u16(g, "u16", &u16) && u16 == 0xf234);
    CHECK(gguf_get_i16(g, "i16", &i16) && i16 == -2);
    CHECK(gguf_get_u32(g, "u32", &u32) && u32 == 4000000000u);
    CHECK(gguf_get_i32(g, "i32", &i32) && i32 == -7);
    CHECK(gguf_get_f32(g, "f32", &f32) && f32 == 1.5f);
    CHECK(gguf_get_bool(g, "bool", &bl) && bl);
    CHECK(gguf_get_str(g, "str", &s) && str_is(s, "h\xc3\xa9llo"));
    CHECK(gguf_get_u64(g, "u64", &u64) && u64 == UINT64_MAX);
    CHECK(gguf_get_i64(g, "i64", &i64) && i64 == INT64_MIN);
    CHECK(gguf_get_f64(g, "f64", &f64) && f64 == -3.141592653589793);

    /* no implicit conversions in typed getters */
    CHECK(!gguf_get_u32(g, "i32", &u32));
    CHECKF(strstr(gguf_error(g), "key 'i32' is i32, not u32") != NULL, "%s", gguf_error(g));
    CHECK(!gguf_get_i32(g, "u32", &i32));
    CHECK(!gguf_get_f64(g, "f32", &f64));
    CHECK(!gguf_get_str(g, "u8", &s));
    CHECK(!gguf_get_u8(g, "missing", &u8));
    CHECKF(strstr(gguf_error(g), "key 'missing' not found") != NULL, "%s", gguf_error(g));
    CHECK(!gguf_get_u32(g, "arr.i16", &u32));

    /* gguf_get_int takes every integer type, and nothing else */
    const char *ints[] = {"u8", "i8", "u16", "i16", "u32", "i32", "i64"};
    const int64_t want[] = {200, -128, 0xf234, -2, 4000000000ll, -7, INT64_MIN};
    for (int i = 0; i < 7; i++)
        CHECKF(gguf_get_int(g, ints[i], &i64) && i64 == want[i], "get_int %s", ints[i]);
    CHECK(!gguf_get_int(g, "u64", &i64)); /* UINT64_MAX does not fit */
    CHECK(!gguf_get_int(g, "f32", &i64));
    CHECK(!gguf_get_int(g, "bool", &i64));
    CHECK(!gguf_get_int(g, "str", &i64));
    CHECK(gguf_get_float(g, "f32", &f64) && f64 == 1.5);
    CHECK(gguf_get_float(g, "f64", &f64) && f64 == -3.141592653589793);
    CHECK(!gguf_get_float(g, "i32", &f64));

    /* arrays */
    int64_t ks = gguf_find_key(g, "arr.str");
    CHECK(ks == 12);
    CHECK(gguf_kv_type(g, ks) == GGUF_TYPE_ARRAY && gguf_arr_type(g, ks) == GGUF_TYPE_STRING);
    CHECK(gguf_arr_n(g, ks) == 3);
    CHECK(gguf_arr_get_str(g, ks, 0, &s) && str_is(s, "a"));
    CHECK(gguf_arr_get_str(g, ks, 1, &s) && s.len == 0);
    CHECK(gguf_arr_get_str(g, ks, 2, &s) && s.len == 3 && memcmp(s.ptr, "x\0y", 3) == 0);
    CHECK(!gguf_arr_get_str(g, ks, 3, &s));
    CHECK(!gguf_arr_get_int(g, ks, 0, &i64));
    int64_t k16 = gguf_find_key(g, "arr.i16");
    CHECK(gguf_arr_get_int(g, k16, 0, &i64) && i64 == 1);
    CHECK(gguf_arr_get_int(g, k16, 1, &i64) && i64 == -1);
    CHECK(gguf_arr_get_int(g, k16, 2, &i64) && i64 == -32768);
    CHECK(!gguf_arr_get_int(g, k16, 3, &i64));
    CHECK(!gguf_arr_get_float(g, k16, 0, &f64));
    CHECK(!gguf_arr_get_str(g, k16, 0, &s));
    int16_t v16[3] = {0};
    CHECK(gguf_arr_copy(g, k16, GGUF_TYPE_INT16, v16, 3) && v16[0] == 1 && v16[1] == -1 && v16[2] == -32768);
    CHECK(!gguf_arr_copy(g, k16, GGUF_TYPE_UINT16, v16, 3));
    CHECK(!gguf_arr_copy(g, k16, GGUF_TYPE_INT16, v16, 2));
    CHECK(!gguf_arr_copy(g, ks, GGUF_TYPE_STRING, v16, 3));
    int64_t kf = gguf_find_key(g, "arr.f64");
    CHECK(gguf_arr_get_float(g, kf, 0, &f64) && f64 == 1.0);
    int64_t kn = gguf_find_key(g, "arr.nested");
    CHECK(gguf_arr_type(g, kn) == GGUF_TYPE_ARRAY && gguf_arr_n(g, kn) == 2);
    size_t sz = 0;
    const uint8_t *raw = gguf_kv_data(g, kn, &sz);
    CHECK(raw && sz == (12 + 2) + (12 + 8 + 2));
    CHECK(raw && raw[0] == T_U8 && raw[12] == 7 && raw[13] == 8);
    CHECK(!gguf_arr_get_int(g, kn, 0, &i64));
    int64_t ke = gguf_find_key(g, "arr.empty");
    CHECK(gguf_arr_n(g, ke) == 0 && gguf_arr_copy(g, ke, GGUF_TYPE_UINT32, &u32, 0));
    CHECK(!gguf_arr_get_int(g, ke, 0, &i64));
    CHECK(!gguf_arr_get_int(g, -1, 0, &i64) && !gguf_arr_get_int(g, 17, 0, &i64));
    CHECK(gguf_kv_data(g, 17, &sz) == NULL && gguf_kv_data(g, -1, &sz) == NULL);
    CHECK(str_is(gguf_key(g, 0), "u8") && str_is(gguf_key(g, 16), "arr.empty"));
    CHECK(gguf_find_key(g, "u") == -1 && gguf_find_key(g, "") == -1 && gguf_find_key(g, NULL) == -1);

    /* tensors: infos and pointers into the bytes */
    CHECK(gguf_n_tensors(g) == 2);
    CHECK(gguf_data_offset(g) % 32 == 0);
    size_t data_at = b.n - (64 + 68);
    CHECK(gguf_data_offset(g) == data_at);
    const struct gguf_tensor_info *t = gguf_tensor(g, gguf_find_tensor(g, "a"));
    CHECK(t && t->n_dims == 2 && t->ne[0] == 4 && t->ne[1] == 3 && t->ne[2] == 1 && t->ne[3] == 1);
    CHECK(t && t->type == KT_TYPE_F32 && t->size == 48 && t->offset == 0 && t->data == b.p + data_at);
    t = gguf_tensor(g, gguf_find_tensor(g, "blk.0.b"));
    CHECK(t && t->type == KT_TYPE_Q8_0 && t->size == 68 && t->offset == 64 && t->data == b.p + data_at + 64);
    CHECK(t && ((const uint8_t *)t->data)[0] == 100);
    CHECK(gguf_find_tensor(g, "blk.0") == -1 && gguf_tensor(g, 2) == NULL && gguf_tensor(g, -1) == NULL);
    gguf_close(g);

    /* version 2 has the same layout (u64 counts and lengths) */
    b.p[4] = 2;
    g = gguf_open_memory(b.p, b.n, err, sizeof err);
    CHECKF(g != NULL, "v2 file rejected: %s", err);
    CHECK(g && gguf_version(g) == 2 && gguf_n_kv(g) == 17 && gguf_n_tensors(g) == 2);
    CHECK(g && gguf_get_u32(g, "u32", &u32) && u32 == 4000000000u);
    gguf_close(g);
    free(b.p);
}

/* The writer's bytes for a small file equal the format's layout, written out by hand. */
static void test_writer_bytes(const char *dir) {
    struct tb b = {0};
    tb_header(&b, 3, 2, 2);
    tb_kv_str(&b, "general.architecture", "llama");
    tb_kv_u32(&b, "llama.block_count", 4);
    int64_t ne_a[2] = {3, 2}, ne_b[1] = {5};
    tb_tensor(&b, "a", 2, ne_a, 0, 0);
    tb_tensor(&b, "b", 1, ne_b, 1 /* f16 */, 32);
    tb_pad(&b, 32);
    tb_fill(&b, 24, 10), tb_pad(&b, 32);
    tb_fill(&b, 10, 50), tb_pad(&b, 32);

    uint8_t da[24], db[10];
    for (int i = 0; i < 24; i++) da[i] = (uint8_t)(10 + i);
    for (int i = 0; i < 10; i++) db[i] = (uint8_t)(50 + i);
    struct gguf_writer *w = gguf_writer_new();
    CHECK(gguf_writer_set_str(w, "general.architecture", "llama"));
    CHECK(gguf_writer_set_u32(w, "llama.block_count", 4));
    CHECK(gguf_writer_add_tensor(w, "a", KT_TYPE_F32, 2, ne_a, da));
    CHECK(gguf_writer_add_tensor(w, "b", KT_TYPE_F16, 1, ne_b, db));
    char path[1200];
    snprintf(path, sizeof path, "%s/bytes.gguf", dir);
    CHECKF(gguf_writer_write(w, path), "%s", gguf_writer_error(w));
    gguf_writer_free(w);
    size_t n = 0;
    char *got = tu_read_file(path, &n);
    CHECKF(got && n == b.n && memcmp(got, b.p, n) == 0, "writer bytes differ (%zu vs %zu bytes)", n, b.n);
    free(got);
    free(b.p);
}

/* Writer -> reader: everything set comes back, of the same type. */
static void test_round_trip(const char *dir) {
    struct gguf_writer *w = gguf_writer_new();
    CHECK(gguf_writer_set_u8(w, "u8", 250) && gguf_writer_set_i8(w, "i8", -100));
    CHECK(gguf_writer_set_u16(w, "u16", 65000) && gguf_writer_set_i16(w, "i16", -30000));
    CHECK(gguf_writer_set_u32(w, "u32", 7) && gguf_writer_set_i32(w, "i32", INT32_MIN));
    CHECK(gguf_writer_set_u64(w, "u64", UINT64_MAX - 1) &&
          gguf_writer_set_i64(w, "i64", -((int64_t)1 << 40)));
    CHECK(gguf_writer_set_f32(w, "f32", -0.25f) && gguf_writer_set_f64(w, "f64", 1e300));
    CHECK(gguf_writer_set_bool(w, "bool", false));
    CHECK(gguf_writer_set_str(w, "str", "first"));
    CHECK(gguf_writer_set_str(w, "str", "second")); /* replaces, keeps its place */
    CHECK(gguf_writer_set_strn(w, "strn", "a\0b", 3));
    CHECK(gguf_writer_set_str(w, "empty", ""));
    const float fa[4] = {1, -2, 3.5f, 1e-30f};
    const uint64_t ua[2] = {1, UINT64_MAX};
    const int8_t ia[3] = {-1, 0, 127};
    CHECK(gguf_writer_set_arr(w, "arr.f32", GGUF_TYPE_FLOAT32, fa, 4));
    CHECK(gguf_writer_set_arr(w, "arr.u64", GGUF_TYPE_UINT64, ua, 2));
    CHECK(gguf_writer_set_arr(w, "arr.i8", GGUF_TYPE_INT8, ia, 3));
    CHECK(gguf_writer_set_arr(w, "arr.none", GGUF_TYPE_BOOL, NULL, 0));
    CHECK(!gguf_writer_set_arr(w, "arr.bad", GGUF_TYPE_STRING, ia, 3));
    struct gguf_str strs[3] = {{"tok", 3}, {"", 0}, {"\xe2\x96\x81x", 4}};
    CHECK(gguf_writer_set_arr_str(w, "arr.str", strs, 3));
    CHECK(gguf_writer_set_alignment(w, 64));
    CHECK(!gguf_writer_set_alignment(w, 24));

    /* tensors of several types with recognisable bytes */
    const enum kt_type types[] = {KT_TYPE_F32,  KT_TYPE_F16,  KT_TYPE_Q4_0, KT_TYPE_Q8_0,  KT_TYPE_Q4_K,
                                  KT_TYPE_Q6_K, KT_TYPE_BF16, KT_TYPE_I32,  KT_TYPE_IQ4_NL};
    enum { NT = sizeof types / sizeof types[0] };
    uint8_t *data[NT];
    int64_t shapes[NT][4];
    uint64_t seed = 42;
    for (int i = 0; i < NT; i++) {
        int64_t ne0 = kt_blck_size(types[i]) * (1 + i % 3);
        int n_dims = 1 + i % 4;
        for (int d = 0; d < 4; d++) shapes[i][d] = d == 0 ? ne0 : d < n_dims ? 1 + (i + d) % 3 : 1;
        size_t size = kt_row_size(types[i], ne0) * (size_t)(shapes[i][1] * shapes[i][2] * shapes[i][3]);
        data[i] = malloc(size);
        for (size_t k = 0; k < size; k++) data[i][k] = (uint8_t)tu_rand_u64(&seed);
        char name[32];
        snprintf(name, sizeof name, "blk.%d.%s", i, kt_type_name(types[i]));
        CHECKF(gguf_writer_add_tensor(w, name, types[i], n_dims, shapes[i], data[i]), "%s",
               gguf_writer_error(w));
    }
    /* refused tensors */
    int64_t bad_ne[2] = {33, 1};
    CHECK(!gguf_writer_add_tensor(w, "bad", KT_TYPE_Q4_0, 2, bad_ne, data[0]));
    CHECK(!gguf_writer_add_tensor(w, "blk.0.f32", KT_TYPE_F32, 1, shapes[0], data[0]));
    CHECK(!gguf_writer_add_tensor(w, "bad", (enum kt_type)4, 1, shapes[0], data[0]));
    CHECK(!gguf_writer_add_tensor(w, "bad", KT_TYPE_F32, 5, shapes[0], data[0]));

    char path[1200];
    snprintf(path, sizeof path, "%s/round.gguf", dir);
    CHECKF(gguf_writer_write(w, path), "%s", gguf_writer_error(w));
    gguf_writer_free(w);

    char err[256];
    struct gguf_file *g = gguf_open(path, err, sizeof err);
    CHECKF(g != NULL, "written file rejected: %s", err);
    if (!g) goto out;
    uint8_t u8;
    int8_t i8;
    uint16_t u16;
    int16_t i16;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool bl;
    struct gguf_str s;
    CHECK(gguf_get_u8(g, "u8", &u8) && u8 == 250);
    CHECK(gguf_get_i8(g, "i8", &i8) && i8 == -100);
    CHECK(gguf_get_u16(g, "u16", &u16) && u16 == 65000);
    CHECK(gguf_get_i16(g, "i16", &i16) && i16 == -30000);
    CHECK(gguf_get_u32(g, "u32", &u32) && u32 == 7);
    CHECK(gguf_get_i32(g, "i32", &i32) && i32 == INT32_MIN);
    CHECK(gguf_get_u64(g, "u64", &u64) && u64 == UINT64_MAX - 1);
    CHECK(gguf_get_i64(g, "i64", &i64) && i64 == -((int64_t)1 << 40));
    CHECK(gguf_get_f32(g, "f32", &f32) && f32 == -0.25f);
    CHECK(gguf_get_f64(g, "f64", &f64) && f64 == 1e300);
    CHECK(gguf_get_bool(g, "bool", &bl) && !bl);
    CHECK(gguf_get_str(g, "str", &s) && str_is(s, "second"));
    CHECK(gguf_find_key(g, "str") == 11); /* replaced in place */
    CHECK(gguf_get_str(g, "strn", &s) && s.len == 3 && memcmp(s.ptr, "a\0b", 3) == 0);
    CHECK(gguf_get_str(g, "empty", &s) && s.len == 0);
    float fb[4];
    CHECK(gguf_arr_copy(g, gguf_find_key(g, "arr.f32"), GGUF_TYPE_FLOAT32, fb, 4) &&
          !memcmp(fa, fb, sizeof fa));
    uint64_t ub[2];
    CHECK(gguf_arr_copy(g, gguf_find_key(g, "arr.u64"), GGUF_TYPE_UINT64, ub, 2) &&
          !memcmp(ua, ub, sizeof ua));
    int64_t ki = gguf_find_key(g, "arr.i8");
    CHECK(gguf_arr_type(g, ki) == GGUF_TYPE_INT8 && gguf_arr_get_int(g, ki, 0, &i64) && i64 == -1);
    CHECK(gguf_arr_get_int(g, ki, 2, &i64) && i64 == 127);
    CHECK(gguf_arr_type(g, gguf_find_key(g, "arr.none")) == GGUF_TYPE_BOOL);
    CHECK(gguf_arr_n(g, gguf_find_key(g, "arr.none")) == 0);
    CHECK(gguf_find_key(g, "arr.bad") == -1);
    int64_t kst = gguf_find_key(g, "arr.str");
    CHECK(gguf_arr_n(g, kst) == 3);
    for (uint64_t i = 0; i < 3; i++)
        CHECK(gguf_arr_get_str(g, kst, i, &s) && s.len == strs[i].len && !memcmp(s.ptr, strs[i].ptr, s.len));
    CHECK(gguf_get_u32(g, "general.alignment", &u32) && u32 == 64 && gguf_alignment(g) == 64);
    CHECK(gguf_data_offset(g) % 64 == 0);
    CHECK(gguf_n_tensors(g) == NT);
    for (int i = 0; i < NT; i++) {
        const struct gguf_tensor_info *t = gguf_tensor(g, i);
        char name[32];
        snprintf(name, sizeof name, "blk.%d.%s", i, kt_type_name(types[i]));
        CHECK(gguf_find_tensor(g, name) == i);
        CHECK(t->type == types[i] && t->n_dims == 1 + i % 4);
        CHECK(!memcmp(t->ne, shapes[i], sizeof t->ne));
        CHECK(t->offset % 64 == 0);
        CHECK(((size_t)((const uint8_t *)t->data - (const uint8_t *)gguf_base(g))) % 64 == 0);
        CHECKF(!memcmp(t->data, data[i], t->size), "tensor %s data differs", name);
    }

    /* copy_kv carries every value (nested arrays included) byte for byte */
    struct tb b = {0};
    craft_file(&b);
    struct gguf_file *src = gguf_open_memory(b.p, b.n, err, sizeof err);
    struct gguf_writer *w2 = gguf_writer_new();
    CHECK(src && gguf_writer_copy_kv(w2, src));
    CHECK(gguf_writer_set_u8(w2, "u8", 1)); /* override after copy */
    snprintf(path, sizeof path, "%s/copy.gguf", dir);
    CHECKF(gguf_writer_write(w2, path), "%s", gguf_writer_error(w2));
    struct gguf_file *cp = gguf_open(path, err, sizeof err);
    CHECKF(cp != NULL, "copy rejected: %s", err);
    if (src && cp) {
        CHECK(gguf_n_kv(cp) == gguf_n_kv(src));
        for (int64_t i = 1; i < gguf_n_kv(src); i++) {
            size_t na, nb;
            const void *va = gguf_kv_data(src, i, &na), *vb = gguf_kv_data(cp, i, &nb);
            CHECKF(gguf_kv_type(src, i) == gguf_kv_type(cp, i) && na == nb && !memcmp(va, vb, na) &&
                       gguf_arr_type(src, i) == gguf_arr_type(cp, i) &&
                       gguf_arr_n(src, i) == gguf_arr_n(cp, i),
                   "copied key %lld differs", (long long)i);
        }
        CHECK(gguf_get_u8(cp, "u8", &u8) && u8 == 1);
    }
    gguf_close(cp);
    gguf_close(src);
    gguf_writer_free(w2);
    free(b.p);
    gguf_close(g);
out:
    for (int i = 0; i < NT; i++) free(data[i]);
}

/* Streaming tensors: rows come from a callback in order; a failing callback leaves no file. */
struct fill_state {
    int64_t next_row, fail_at;
};
static bool fill_rows(void *user, int64_t row0, int64_t nrows, void *buf, char *err, size_t errlen) {
    struct fill_state *st = user;
    if (row0 != st->next_row) return snprintf(err, errlen, "rows out of order"), false;
    if (st->fail_at >= row0 && st->fail_at < row0 + nrows) return snprintf(err, errlen, "source broke"), false;
    for (int64_t r = 0; r < nrows; r++)
        for (int k = 0; k < 16; k++) ((float *)buf)[r * 16 + k] = (float)((row0 + r) * 16 + k);
    st->next_row = row0 + nrows;
    return true;
}

static void test_fill(const char *dir) {
    char path[1200], err[256];
    snprintf(path, sizeof path, "%s/fill.gguf", dir);
    int64_t ne[2] = {16, 1000};
    struct fill_state st = {0, -1};
    struct gguf_writer *w = gguf_writer_new();
    CHECK(gguf_writer_add_tensor_fill(w, "f", KT_TYPE_F32, 2, ne, fill_rows, &st));
    CHECKF(gguf_writer_write(w, path), "%s", gguf_writer_error(w));
    gguf_writer_free(w);
    CHECK(st.next_row == 1000);
    struct gguf_file *g = gguf_open(path, err, sizeof err);
    const struct gguf_tensor_info *t = g ? gguf_tensor(g, 0) : NULL;
    bool ok = t && t->size == 16 * 1000 * 4;
    for (int64_t i = 0; ok && i < 16 * 1000; i++) {
        float v;
        memcpy(&v, (const uint8_t *)t->data + i * 4, 4);
        ok = v == (float)i;
    }
    CHECKF(ok, "filled tensor reads back wrong: %s", g ? "data" : err);
    gguf_close(g);

    snprintf(path, sizeof path, "%s/fail.gguf", dir);
    st = (struct fill_state){0, 999};
    w = gguf_writer_new();
    CHECK(gguf_writer_add_tensor_fill(w, "f", KT_TYPE_F32, 2, ne, fill_rows, &st));
    CHECK(!gguf_writer_write(w, path));
    CHECKF(strstr(gguf_writer_error(w), "source broke") != NULL, "%s", gguf_writer_error(w));
    gguf_writer_free(w);
    CHECK(access(path, F_OK) != 0);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", dir);
    CHECKF(system(cmd) != 0, "a temporary file was left in %s", dir);
}

/* A model must be a regular file: a FIFO, /dev/zero or a directory is refused at once
 * (a FIFO with no writer must not block the open, /dev/zero must not be read forever). */
static void test_not_regular(const char *dir) {
    char fifo[1200], err[256];
    snprintf(fifo, sizeof fifo, "%s/pipe.gguf", dir);
    unlink(fifo);
    if (mkfifo(fifo, 0600) != 0) {
        printf("no fifo: FIFO refusal not tested\n");
    } else {
        CHECK(gguf_open(fifo, err, sizeof err) == NULL);
        CHECKF(strstr(err, "not a regular file") != NULL, "fifo: %s", err);
        unlink(fifo);
    }
    CHECK(gguf_open("/dev/zero", err, sizeof err) == NULL);
    CHECKF(strstr(err, "not a regular file") != NULL, "/dev/zero: %s", err);
    CHECK(gguf_open("/nonexistent/x.gguf", err, sizeof err) == NULL && strstr(err, "cannot open"));
    CHECK(gguf_open(dir, err, sizeof err) == NULL && strstr(err, "directory"));
}

/* Thousands of tensors: every name found at its index (an index, not a scan, makes this fast). */
static void test_many_tensors(void) {
    enum { N = 5000 };
    struct tb b = {0};
    tb_header(&b, 3, N, 0);
    int64_t ne[1] = {8};
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "blk.%d.w", i);
        tb_tensor(&b, name, 1, ne, 0, (uint64_t)i * 32);
    }
    tb_pad(&b, 32), tb_fill(&b, (size_t)N * 32, 0);
    char err[256];
    struct gguf_file *g = gguf_open_memory(b.p, b.n, err, sizeof err);
    CHECKF(g != NULL, "%s", err);
    int found = 0;
    for (int i = 0; g && i < N; i++) {
        snprintf(name, sizeof name, "blk.%d.w", i);
        found += gguf_find_tensor(g, name) == i;
    }
    CHECK(found == N);
    CHECK(g && gguf_find_tensor(g, "blk.5000.w") == -1);
    gguf_close(g);
    free(b.p);
}

int main(void) {
    char dir[] = "/tmp/kiln-test-gguf-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_read_crafted();
    test_writer_bytes(dir);
    test_round_trip(dir);
    test_fill(dir);
    test_not_regular(dir);
    test_many_tensors();
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tu_finish("test_gguf");
}
