/*
 * The one JSON writer of the runtime (pw.h, "JSON files"): every JSON file the runtime
 * writes (profile headers, traces' rank-R.json, samples, the node timeline, the
 * example module's files) says only keys and values; the commas, quotes, escapes and
 * closing brackets are placed here, compact (no space: the profile header, padded to 64
 * bytes, stays short). Output goes into a pw_buf (mmap'ed memory); numbers are
 * formatted by pw_fmt_int, never by stdio: async-signal-safe, locale-free.
 */
#include <string.h>

#include "pw.h"

static void put(pw_json *j, const char *s, size_t n) { pw_buf_put(j->b, s, n); }

/* A JSON string: quotes, '"' and '\' escaped, control characters as \u00XX. */
static void put_str(pw_json *j, const char *s)
{
    static const char hexd[] = "0123456789abcdef";
    put(j, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            put(j, e, 2);
        } else if (*p < 0x20 || *p == 0x7f) {
            char e[6] = {'\\', 'u', '0', '0', hexd[*p >> 4], hexd[*p & 15]};
            put(j, e, 6);
        } else {
            put(j, (const char *)p, 1);
        }
    }
    put(j, "\"", 1);
}

static void put_int(pw_json *j, int64_t v)
{
    char num[24];
    put(j, num, (size_t)pw_fmt_int(num, v));
}

/* Before a value: the comma after the container's previous value, and in an object the
 * key (NULL: ""); in a list the key is not written. */
static void member(pw_json *j, const char *key)
{
    if (j->depth <= 0)
        return;
    if (j->items[j->depth - 1])
        put(j, ",", 1);
    j->items[j->depth - 1] = 1;
    if (j->closer[j->depth - 1] == '}') {
        put_str(j, key);
        put(j, ":", 1);
    }
}

void pw_json_begin(pw_json *j, pw_buf *b)
{
    j->b = b;
    j->depth = 0;
    pw_json_open(j, NULL, '{');
}

void pw_json_open(pw_json *j, const char *key, char kind)
{
    if (j->depth >= PW_JSON_DEPTH) { /* deeper than any file of the format: a bug */
        j->b->failed = 1;
        return;
    }
    member(j, key);
    put(j, kind == '[' ? "[" : "{", 1);
    j->closer[j->depth] = kind == '[' ? ']' : '}';
    j->items[j->depth++] = 0;
}

void pw_json_close(pw_json *j)
{
    if (j->depth > 0) {
        j->depth--;
        put(j, &j->closer[j->depth], 1);
    }
}

void pw_json_end(pw_json *j)
{
    while (j->depth > 0)
        pw_json_close(j);
    put(j, "\n", 1);
}

void pw_json_int(pw_json *j, const char *key, int64_t v)
{
    member(j, key);
    put_int(j, v);
}

void pw_json_str(pw_json *j, const char *key, const char *s)
{
    member(j, key);
    put_str(j, s);
}

void pw_json_bool(pw_json *j, const char *key, int v)
{
    member(j, key);
    put(j, v ? "true" : "false", v ? 4 : 5);
}

void pw_json_double(pw_json *j, const char *key, double v, int decimals)
{
    member(j, key);
    if (v != v || v > 9e18 || v < -9e18) { /* NaN, infinite or beyond int64: no JSON number */
        put(j, "null", 4);
        return;
    }
    if (decimals < 0)
        decimals = 0;
    if (decimals > 18)
        decimals = 18;
    int64_t scale = 1;
    for (int i = 0; i < decimals; i++)
        scale *= 10;
    if (v < 0) {
        put(j, "-", 1);
        v = -v;
    }
    int64_t whole = (int64_t)v;
    int64_t frac = (int64_t)((v - (double)whole) * (double)scale + 0.5);
    if (frac >= scale) { /* rounded up into the next whole number */
        whole++;
        frac -= scale;
    }
    put_int(j, whole);
    if (decimals) {
        char digits[20];
        for (int i = decimals - 1; i >= 0; i--, frac /= 10)
            digits[i] = (char)('0' + frac % 10);
        put(j, ".", 1);
        put(j, digits, (size_t)decimals);
    }
}

void pw_json_strs(pw_json *j, const char *key, const char *const *v, size_t n)
{
    pw_json_open(j, key, '[');
    for (size_t i = 0; i < n; i++)
        pw_json_str(j, NULL, v[i]);
    pw_json_close(j);
}

void pw_json_ints(pw_json *j, const char *key, const int *v, size_t n)
{
    pw_json_open(j, key, '[');
    for (size_t i = 0; i < n; i++)
        pw_json_int(j, NULL, v[i]);
    pw_json_close(j);
}
