/* SPDX-License-Identifier: MIT */
/*
 * client_convert.c — criterion tests of fiberctl's pure conversions, without a daemon or
 * a socket: durations ("1h30m", `--in`, `--backoff`), points in time (`--at`: RFC 3339
 * with a zone, "@EPOCH"; no zone refused), and the "after" references of `batch` lines
 * ("#3" = the job of line 3; a line naming itself or a later one is a cycle). They link
 * client/convert.o and client/batchref.o, fiberctl's own objects. And the JSON text a
 * batch prints for a job record, written from msgpack without a jansson tree: byte for
 * byte what jansson prints, or left to jansson when it cannot be.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <string.h>

#include "client/batchref.h"
#include "client/convert.h"
#include "ipc/protocol.h"

static uint64_t duration(const char *s)
{
        uint64_t ms = UINT64_MAX;

        cr_assert_eq(convert_duration_ms(s, &ms), 0, "'%s' refused", s);
        return ms;
}

Test(convert, durations_sum_their_parts)
{
        cr_assert_eq(duration("1h30m"), 5400000);
        cr_assert_eq(duration("30s"), 30000);
        cr_assert_eq(duration("5m"), 300000);
        cr_assert_eq(duration("5min"), 300000);
        cr_assert_eq(duration("2h"), 7200000);
        cr_assert_eq(duration("1d"), 86400000);
        cr_assert_eq(duration("500ms"), 500);
        cr_assert_eq(duration("1.5h"), 5400000);
        cr_assert_eq(duration("2m30s500ms"), 150500);
        cr_assert_eq(duration("1d2h"), 93600000);
        cr_assert_eq(duration("10"), 10000, "a lone number is seconds");
        cr_assert_eq(duration("0"), 0);
        cr_assert_eq(duration("0.0005s"), 0, "rounded down to the ms");
}

Test(convert, bad_durations_are_refused_and_nothing_written)
{
        static const char *const bad[] = {"", "abc", "1x", "h", "-1s", "1h-30m", "1h 30m", "10 ",
                                          "1h30", "s10", ".", "1e3s", "ms", "1mss",
                                          /* units largest first, each once */
                                          "30m1h", "1m1m", "1s1h", "5min2m", "1ms1s"};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                uint64_t ms = 42;
                cr_assert_eq(convert_duration_ms(bad[i], &ms), -EINVAL, "'%s' taken", bad[i]);
                cr_assert_eq(ms, 42, "'%s': ret written on failure", bad[i]);
        }
}

Test(convert, durations_have_a_ceiling)
{
        uint64_t ms = 0;

        cr_assert_eq(convert_duration_ms("50d", &ms), -ERANGE, "above UINT32_MAX ms");
        cr_assert_eq(convert_duration_ms_max("3650d", IPC_RUN_AT_MAX_AHEAD_MS, &ms), 0);
        cr_assert_eq(ms, 3650ull * 86400000);
        cr_assert_eq(convert_duration_ms_max("3700d", IPC_RUN_AT_MAX_AHEAD_MS, &ms), -ERANGE);
}

static uint64_t at(const char *s)
{
        const char *why = NULL;
        uint64_t ms = 0;
        int r = convert_time_ms(s, &ms, &why);

        cr_assert_eq(r, 0, "'%s' refused: %s", s, why ? why : "?");
        return ms;
}

Test(convert, times_with_a_zone_are_epoch_ms)
{
        cr_assert_eq(at("2026-12-01T03:00:00Z"), 1796094000000ull);
        cr_assert_eq(at("2026-12-01T03:00:00+02:00"), 1796086800000ull);
        cr_assert_eq(at("2026-12-01T03:00:00-05:30"), 1796113800000ull);
        cr_assert_eq(at("2026-12-01T03:00:00-0530"), 1796113800000ull);
        cr_assert_eq(at("2026-12-01T05:00:00+02"), 1796094000000ull);
        cr_assert_eq(at("2026-12-01 03:00Z"), 1796094000000ull, "a space, no seconds");
        cr_assert_eq(at("2026-12-01t03:00:00z"), 1796094000000ull);
        cr_assert_eq(at("2026-12-01T03:00:00.123456Z"), 1796094000123ull);
        cr_assert_eq(at("2028-02-29T00:00:00Z"), 1835395200000ull, "a leap day");
        cr_assert_eq(at("2000-01-01T00:00:00Z"), 946684800000ull);
        cr_assert_eq(at("1970-01-01T00:00:00Z"), 0);
        cr_assert_eq(at("@1764558000"), 1764558000000ull);
        cr_assert_eq(at("@1764558000.25"), 1764558000250ull);
}

Test(convert, a_time_without_a_zone_is_refused_clearly)
{
        const char *why = NULL;
        uint64_t ms = 42;

        cr_assert_eq(convert_time_ms("2026-12-01T03:00:00", &ms, &why), -EINVAL);
        cr_assert_eq(ms, 42, "ret written on failure");
        cr_assert_not_null(why);
        cr_assert_not_null(strstr(why, "no time zone"), "%s", why);
        cr_assert_not_null(strstr(why, "+02:00"), "the fix is named: %s", why);
        cr_assert_eq(convert_time_ms("2026-12-01", &ms, &why), -EINVAL);
        cr_assert_not_null(strstr(why, "date alone"), "%s", why);
}

Test(convert, bad_times_are_refused)
{
        static const char *const bad[] = {
                "",
                "tomorrow",
                "2026-13-01T00:00:00Z",
                "2026-02-29T00:00:00Z", /* not a leap year */
                "2026-12-01T24:00:00Z",
                "2026-12-01T03:60:00Z",
                "2026-12-01T03:00:00+25:00",
                "2026-12-01T03:00:00Zjunk",
                "2026-12-01T03:00:00.Z",
                "26-12-01T03:00:00Z",
                "@",
                "@12x",
                "@-5",
                "@1.",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *why = NULL;
                uint64_t ms;
                cr_assert_eq(convert_time_ms(bad[i], &ms, &why), -EINVAL, "'%s' taken", bad[i]);
                cr_assert_not_null(why, "'%s': no reason given", bad[i]);
        }
        const char *why = NULL;
        uint64_t ms;
        cr_assert_eq(convert_time_ms("1969-12-31T23:59:59Z", &ms, &why), -ERANGE);
}

/* ---------------------------------------------------------------- batch references */

/* Resolves @after_json (JSON text) for @line against @lines; the result in *@ret (JSON
 * text, or the reason). */
static int resolve(const char *after_json, unsigned long line, const json_int_t *lines, char *ret,
                   size_t size)
{
        json_error_t jerr;
        json_t *after = json_loads(after_json, JSON_DECODE_ANY, &jerr), *ids = NULL;
        int r;

        cr_assert_not_null(after, "%s: %s", after_json, jerr.text);
        ret[0] = '\0';
        r = batchref_resolve(after, line, lines, &ids, ret, size);
        if (r == 0) {
                char *s = json_dumps(ids, JSON_COMPACT);
                snprintf(ret, size, "%s", s);
                free(s);
                json_decref(ids);
        }
        json_decref(after);
        return r;
}

Test(batchref, references_to_earlier_lines_become_their_ids)
{
        /* lines 1..4: job 17, a blank line, job 30, still in flight */
        const json_int_t lines[] = {17, BATCHREF_NO_JOB, 30, BATCHREF_PENDING};
        char out[256];

        cr_assert_eq(resolve("[\"#1\"]", 5, lines, out, sizeof(out)), 0, "%s", out);
        cr_assert_str_eq(out, "[17]");
        cr_assert_eq(resolve("[\"#3\", 5, \"#1\"]", 5, lines, out, sizeof(out)), 0, "%s", out);
        cr_assert_str_eq(out, "[30,5,17]", "the order given, plain ids kept");
        cr_assert_eq(resolve("[]", 5, lines, out, sizeof(out)), 0);
        cr_assert_str_eq(out, "[]");
        cr_assert_eq(resolve("null", 1, lines, out, sizeof(out)), 0);
        cr_assert_str_eq(out, "[]");
        cr_assert_eq(resolve("[99]", 1, lines, out, sizeof(out)), 0, "an id needs no line");
        cr_assert_str_eq(out, "[99]");
}

Test(batchref, a_reference_in_flight_holds_the_line_back)
{
        const json_int_t lines[] = {17, BATCHREF_PENDING};
        json_int_t later[] = {17, BATCHREF_PENDING};
        char out[256];

        cr_assert_eq(resolve("[\"#2\", \"#1\"]", 3, lines, out, sizeof(out)), 1);
        later[1] = 18; /* line 2's answer came */
        cr_assert_eq(resolve("[\"#2\", \"#1\"]", 3, later, out, sizeof(out)), 0);
        cr_assert_str_eq(out, "[18,17]");
}

Test(batchref, self_and_forward_references_are_a_cycle)
{
        const json_int_t lines[] = {BATCHREF_PENDING, BATCHREF_PENDING};
        char out[256];

        cr_assert_eq(resolve("[\"#3\"]", 3, lines, out, sizeof(out)), -EINVAL, "itself");
        cr_assert_not_null(strstr(out, "this line itself"), "%s", out);
        cr_assert_not_null(strstr(out, "cycle"), "%s", out);
        cr_assert_eq(resolve("[\"#4\"]", 3, lines, out, sizeof(out)), -EINVAL, "a later line");
        cr_assert_not_null(strstr(out, "a later line"), "%s", out);
        /* refused at once, though another reference is still in flight */
        cr_assert_eq(resolve("[\"#1\", \"#9\"]", 3, lines, out, sizeof(out)), -EINVAL);
}

Test(batchref, malformed_items_and_lines_without_jobs_are_refused)
{
        const json_int_t lines[] = {BATCHREF_NO_JOB, BATCHREF_REFUSED, 7};
        char out[256];

        cr_assert_eq(resolve("[\"#1\"]", 4, lines, out, sizeof(out)), -EINVAL);
        cr_assert_not_null(strstr(out, "line 1 holds no job"), "%s", out);
        cr_assert_eq(resolve("[\"#2\"]", 4, lines, out, sizeof(out)), -EALREADY);
        cr_assert_not_null(strstr(out, "line 2 was refused"), "%s", out);
        static const char *const bad[] = {"{\"a\": 1}", "\"#1\"",    "[0]",     "[-3]",
                                          "[\"3\"]",    "[\"#0\"]",  "[\"#\"]", "[\"#x\"]",
                                          "[1.5]",      "[\"#01\"]", "[null]",  "[[1]]"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                cr_assert_eq(resolve(bad[i], 4, lines, out, sizeof(out)), -EINVAL, "%s taken",
                             bad[i]);
}

Test(batchref, at_most_ipc_after_max_items)
{
        json_int_t lines[1] = {5};
        json_t *after = json_array();
        json_t *ids = NULL;
        char why[256];

        for (int i = 0; i <= IPC_AFTER_MAX; i++)
                json_array_append_new(after, json_integer(i + 1));
        cr_assert_eq(batchref_resolve(after, 2, lines, &ids, why, sizeof(why)), -EINVAL);
        cr_assert_null(ids, "ret written on failure");
        json_array_remove(after, 0);
        cr_assert_eq(batchref_resolve(after, 2, lines, &ids, why, sizeof(why)), 0);
        cr_assert_eq(json_array_size(ids), IPC_AFTER_MAX);
        json_decref(ids);
        json_decref(after);
}

/* --- msgpack to JSON text, the batch's record printer --- */

/* @o as the tree path prints it: convert_msgpack_to_json(), json_dumpb(); NULL when
 * jansson cannot dump it (a string that is not UTF-8). Caller frees. */
static char *tree_text(const msgpack_object *o)
{
        json_t *j = convert_msgpack_to_json(o);
        char *s;

        cr_assert_not_null(j, "convert_msgpack_to_json() failed");
        s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(j);
        return s;
}

/* Unpacks @sb's bytes into @o (zone @z). */
static void unpack(const msgpack_sbuffer *sb, msgpack_zone *z, msgpack_object *o)
{
        size_t off = 0;

        msgpack_zone_init(z, 4096);
        cr_assert_eq(msgpack_unpack(sb->data, sb->size, &off, z, o), MSGPACK_UNPACK_SUCCESS);
}

/* @sb's value rendered both ways: by the text writer (@r its return, @mine what it wrote
 * after a byte already in its buffer, which must stay) and by the tree (@tree, NULL when
 * jansson cannot print it). text_pair_free() frees both strings. */
typedef struct TextPair {
        int r;
        bool kept; /* the byte before stayed */
        char *mine, *tree;
} TextPair;

static TextPair text_pair(const msgpack_sbuffer *sb)
{
        msgpack_sbuffer out = {0};
        TextPair t = {0};
        msgpack_object o;
        msgpack_zone z;

        unpack(sb, &z, &o);
        msgpack_sbuffer_write(&out, "x", 1); /* appends, after what is there */
        t.tree = tree_text(&o);
        t.r = convert_msgpack_to_json_text(&out, &o);
        t.kept = out.size >= 1 && out.data[0] == 'x';
        t.mine = strndup(out.data + 1, out.size - 1);
        msgpack_sbuffer_destroy(&out);
        msgpack_zone_destroy(&z);
        return t;
}

static void text_pair_free(TextPair *t)
{
        free(t->mine);
        free(t->tree);
}

/* Asserts the writer leaves @sb's value to the tree path (-EDOM), @out untouched. */
static void text_refused(const msgpack_sbuffer *sb, const char *what)
{
        msgpack_sbuffer out = {0};
        msgpack_object o;
        msgpack_zone z;

        unpack(sb, &z, &o);
        msgpack_sbuffer_write(&out, "{\"a\":", 5);
        cr_assert_eq(convert_msgpack_to_json_text(&out, &o), -EDOM, "%s: taken", what);
        cr_assert_eq(out.size, 5, "%s: %zu bytes left behind", what, out.size - 5);
        msgpack_sbuffer_destroy(&out);
        msgpack_zone_destroy(&z);
}

static void pack_str(msgpack_packer *pk, const char *s, size_t n)
{
        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, s, n);
}

Test(convert_text, a_job_record_prints_as_jansson_prints_it)
{
        msgpack_sbuffer sb = {0};
        msgpack_packer pk;

        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 9);
        pack_str(&pk, "id", 2);
        msgpack_pack_uint64(&pk, 23408);
        pack_str(&pk, "state", 5);
        pack_str(&pk, "done", 4);
        pack_str(&pk, "progress", 8);
        msgpack_pack_map(&pk, 2);
        pack_str(&pk, "done", 4);
        msgpack_pack_int64(&pk, -5011);
        pack_str(&pk, "total", 5);
        msgpack_pack_uint64(&pk, INT64_MAX);
        pack_str(&pk, "result", 6);
        msgpack_pack_map(&pk, 1);
        pack_str(&pk, "path", 4);
        pack_str(&pk, "/usr/include/EGL/egl.h", 22);
        pack_str(&pk, "error", 5);
        msgpack_pack_nil(&pk);
        pack_str(&pk, "after", 5);
        msgpack_pack_array(&pk, 3);
        msgpack_pack_uint64(&pk, 1);
        msgpack_pack_true(&pk);
        msgpack_pack_false(&pk);
        pack_str(&pk, "errors", 6);
        msgpack_pack_array(&pk, 0);
        pack_str(&pk, "", 0);
        msgpack_pack_map(&pk, 0);
        pack_str(&pk, "min", 3);
        msgpack_pack_int64(&pk, INT64_MIN);
        TextPair t = text_pair(&sb);
        cr_assert_not_null(t.tree, "jansson cannot print the record");
        cr_assert_eq(t.r, 0, "the record was refused");
        cr_assert(t.kept, "what was in the buffer before was overwritten");
        cr_assert_str_eq(t.mine, t.tree, "the record: wrote %s, jansson %s", t.mine, t.tree);
        text_pair_free(&t);
        msgpack_sbuffer_destroy(&sb);
}

Test(convert_text, strings_escape_as_jansson_escapes_them)
{
        /* every control character, the two that must be escaped, '/', DEL, and UTF-8 of
         * each length at the edges jansson's utf.c accepts */
        static const char *const strs[] = {"\"",
                                           "\\",
                                           "/",
                                           "\x7f",
                                           "a\"b\\c/d",
                                           "\xc2\x80",
                                           "\xdf\xbf",
                                           "\xe0\xa0\x80",
                                           "\xed\x9f\xbf",
                                           "\xee\x80\x80",
                                           "\xef\xbf\xbf",
                                           "\xf0\x90\x80\x80",
                                           "\xf4\x8f\xbf\xbf",
                                           "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 end",
                                           ""};
        msgpack_sbuffer sb = {0};
        msgpack_packer pk;
        char ctl[32];

        for (int c = 0; c < 32; c++)
                ctl[c] = (char)c;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        pack_str(&pk, ctl, sizeof(ctl));
        /* the control characters, then each string alone, then each as a map key */
        for (size_t i = 0; i <= 2 * (sizeof(strs) / sizeof(strs[0])); i++) {
                size_t k = (i - 1) / 2;
                TextPair t;

                if (i > 0) {
                        sb.size = 0;
                        if (i % 2 == 0)
                                msgpack_pack_map(&pk, 1);
                        pack_str(&pk, strs[k], strlen(strs[k]));
                        if (i % 2 == 0)
                                pack_str(&pk, ctl + 8, 6);
                }
                t = text_pair(&sb);
                cr_assert_not_null(t.tree, "case %zu: jansson cannot print it", i);
                cr_assert_eq(t.r, 0, "case %zu: refused", i);
                cr_assert(t.kept, "case %zu: the buffer's first byte was overwritten", i);
                cr_assert_str_eq(t.mine, t.tree, "case %zu (%s %zu): wrote %s, jansson %s", i,
                                 i % 2 ? "string" : "key", k, t.mine, t.tree);
                text_pair_free(&t);
        }
        msgpack_sbuffer_destroy(&sb);
}

Test(convert_text, what_it_cannot_render_exactly_is_left_to_the_tree)
{
        /* not UTF-8 by jansson's rules; the tree has U+FFFD (R) for each byte that does
         * not begin a valid sequence */
#define R "\xef\xbf\xbd"
        static const char *const fixed[] = {"\"" R "\"",       "\"a" R "\"",      "\"" R R "\"",
                                            "\"" R R "\"",     "\"" R R R "\"",   "\"" R R R "\"",
                                            "\"" R R R "\"",   "\"" R R R R "\"", "\"" R R R R "\"",
                                            "\"" R R R R "\"", "\"" R R "\"",     "\"" R "\"",
                                            "\"" R "(" R "\""};
#undef R
        static const char *const bad[] = {"\x80",
                                          "a\xbf",
                                          "\xc0\x80",
                                          "\xc1\xbf",
                                          "\xe0\x80\x80",
                                          "\xed\xa0\x80",
                                          "\xed\xbf\xbf",
                                          "\xf0\x80\x80\x80",
                                          "\xf4\x90\x80\x80",
                                          "\xf5\x80\x80\x80",
                                          "\xe2\x82",
                                          "\xc3",
                                          "\xe2\x28\xa1"};
        msgpack_sbuffer sb = {0};
        msgpack_packer pk;
        msgpack_object o;
        msgpack_zone z;

        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char what[64];

                sb.size = 0;
                pack_str(&pk, bad[i], strlen(bad[i]));
                snprintf(what, sizeof(what), "bad UTF-8 %zu", i);
                text_refused(&sb, what);
                unpack(&sb, &z, &o);
                char *t = tree_text(&o);
                cr_assert_not_null(t, "%s: the tree cannot print it", what);
                cr_assert_str_eq(t, fixed[i], "%s", what);
                free(t);
                /* and as a key */
                sb.size = 0;
                msgpack_pack_map(&pk, 1);
                pack_str(&pk, bad[i], strlen(bad[i]));
                msgpack_pack_nil(&pk);
                text_refused(&sb, what);
                msgpack_zone_destroy(&z);
                unpack(&sb, &z, &o);
                t = tree_text(&o);
                cr_assert_not_null(t, "%s as a key: the tree cannot print it", what);
                cr_assert(!strncmp(t + 1, fixed[i], strlen(fixed[i])) &&
                                  t[1 + strlen(fixed[i])] == ':',
                          "%s as a key: %s", what, t);
                free(t);
                msgpack_zone_destroy(&z);
        }
        sb.size = 0;
        msgpack_pack_double(&pk, 1.5);
        text_refused(&sb, "a float");
        sb.size = 0;
        msgpack_pack_uint64(&pk, (uint64_t)INT64_MAX + 1);
        text_refused(&sb, "an integer above INT64_MAX");
        sb.size = 0;
        msgpack_pack_bin(&pk, 2);
        msgpack_pack_bin_body(&pk, "ab", 2);
        text_refused(&sb, "bin");
        sb.size = 0;
        msgpack_pack_ext(&pk, 1, 7);
        msgpack_pack_ext_body(&pk, "a", 1);
        text_refused(&sb, "ext");
        sb.size = 0;
        msgpack_pack_map(&pk, 1);
        msgpack_pack_uint64(&pk, 1);
        msgpack_pack_nil(&pk);
        text_refused(&sb, "an integer key");
        sb.size = 0;
        msgpack_pack_map(&pk, 1);
        pack_str(&pk, "a\0b", 3);
        msgpack_pack_nil(&pk);
        text_refused(&sb, "a key with NUL");
        sb.size = 0;
        msgpack_pack_map(&pk, 3);
        pack_str(&pk, "k", 1);
        msgpack_pack_uint64(&pk, 1);
        pack_str(&pk, "j", 1);
        msgpack_pack_uint64(&pk, 2);
        pack_str(&pk, "k", 1);
        msgpack_pack_uint64(&pk, 3);
        text_refused(&sb, "a repeated key");
        sb.size = 0; /* deep inside: the partial output is taken back too */
        msgpack_pack_array(&pk, 2);
        pack_str(&pk, "first", 5);
        msgpack_pack_map(&pk, 1);
        pack_str(&pk, "x", 1);
        msgpack_pack_float(&pk, 2.0f);
        text_refused(&sb, "a float in a map in an array");
        sb.size = 0;
        msgpack_pack_map(&pk, 65);
        for (int i = 0; i < 65; i++) {
                char k[8];
                int n = snprintf(k, sizeof(k), "k%d", i);
                pack_str(&pk, k, (size_t)n);
                msgpack_pack_nil(&pk);
        }
        text_refused(&sb, "a map of 65 keys");
        msgpack_sbuffer_destroy(&sb);
}
