/* The formatting loop of perfweave's Chrome trace export
 * (python/perfweave/interop/chrome/formatting.py).
 *
 * Python describes each kind of JSON event once, as a layout: a list of parts (literal
 * text, a name from a table of JSON strings, a decimal integer, 16 hex digits, a time in
 * microseconds from nanoseconds), each present in every row or where a column of flags
 * says. It hands over the layouts and, for a block of events, the columns of every part
 * and which layout each event has; this loop writes the events one after the other,
 * without padding, into the caller's buffer. The same layouts drive the numpy formatter
 * that runs where this library is not built (fixed-width rows, padded with blanks), so
 * both write the same JSON values. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PW_EXPORT __attribute__((visibility("default")))

/* Part kinds: the order of the _LIT.. constants in interop/chrome/formatting.py, which
 * checks pw_json_kinds(). */
enum { P_LIT, P_NAME, P_INT, P_HEX, P_US, P_COUNT };

/* One part of a layout. data: the literal (P_LIT, len bytes), the table's bytes (P_NAME,
 * entry i from offsets[i] to offsets[i + 1]), or the int64/uint64 column of the part's
 * rows (P_INT, P_HEX, P_US); index: the table entry of each row (P_NAME); present: 0/1 per
 * row, or NULL for a part in every row of its layout. Columns hold the rows of their own
 * layout only, in order. */
struct pw_part {
    int64_t kind;
    const void *data;
    const int64_t *offsets;
    const int64_t *index;
    const uint8_t *present;
    int64_t len;
    int64_t ntable;
};

PW_EXPORT int pw_json_kinds(void) { return P_COUNT; }

PW_EXPORT size_t pw_json_part_size(void) { return sizeof(struct pw_part); }

static const char pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* v in decimal at o, two digits a step from the back; returns the end */
static char *put_u64(char *o, uint64_t v)
{
    int n = 1;
    for (uint64_t p = 10; n < 20 && v >= p; p *= 10)
        n++;
    char *e = o + n, *d = e;
    while (v >= 100) {
        unsigned k = (unsigned)(v % 100) * 2;
        v /= 100;
        d -= 2;
        d[0] = pairs[k];
        d[1] = pairs[k + 1];
    }
    if (v >= 10) {
        d -= 2;
        d[0] = pairs[v * 2];
        d[1] = pairs[v * 2 + 1];
    } else {
        *--d = (char)('0' + v);
    }
    return e;
}

static char *put_i64(char *o, int64_t v)
{
    if (v < 0) {
        *o++ = '-';
        return put_u64(o, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(o, (uint64_t)v);
}

/* Writes rows [0, n): row i has layout which[i] (all layout 0 when which is NULL), the
 * layouts' parts back to back in parts (nparts[k] of layout k). Returns the bytes
 * written, or (size_t)-1 when they would not fit in cap (nothing sensible written then);
 * the caller sizes cap by the widest row of each layout, so that does not happen. */
PW_EXPORT size_t pw_json_rows(char *out, size_t cap, const struct pw_part *parts,
                              const int64_t *nparts, int64_t nlayouts, const int8_t *which,
                              size_t n)
{
    enum { MAX_LAYOUTS = 16, WIDEST_NUMBER = 24 };
    const struct pw_part *first[MAX_LAYOUTS];
    size_t row[MAX_LAYOUTS] = {0};
    if (nlayouts < 1 || nlayouts > MAX_LAYOUTS)
        return (size_t)-1;
    for (int64_t k = 0, at = 0; k < nlayouts; at += nparts[k], k++)
        first[k] = parts + at;
    char *o = out, *end = out + cap;
    for (size_t i = 0; i < n; i++) {
        int k = which ? which[i] : 0;
        if (k < 0 || k >= nlayouts)
            return (size_t)-1;
        size_t j = row[k]++;
        for (const struct pw_part *p = first[k], *pe = first[k] + nparts[k]; p < pe; p++) {
            if (p->present && !p->present[j])
                continue;
            switch (p->kind) {
            case P_LIT:
                if ((size_t)(end - o) < (size_t)p->len)
                    return (size_t)-1;
                memcpy(o, p->data, (size_t)p->len);
                o += p->len;
                break;
            case P_NAME: {
                int64_t t = p->index[j];
                if (t < 0 || t >= p->ntable)
                    return (size_t)-1;
                size_t len = (size_t)(p->offsets[t + 1] - p->offsets[t]);
                if ((size_t)(end - o) < len)
                    return (size_t)-1;
                memcpy(o, (const char *)p->data + p->offsets[t], len);
                o += len;
                break;
            }
            case P_INT:
                if (end - o < WIDEST_NUMBER)
                    return (size_t)-1;
                o = put_i64(o, ((const int64_t *)p->data)[j]);
                break;
            case P_HEX: {
                static const char digits[] = "0123456789abcdef";
                uint64_t v = ((const uint64_t *)p->data)[j];
                if (end - o < 16)
                    return (size_t)-1;
                for (int d = 15; d >= 0; d--, v >>= 4)
                    o[d] = digits[v & 15];
                o += 16;
                break;
            }
            case P_US: {
                int64_t ns = ((const int64_t *)p->data)[j];
                uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
                unsigned frac = (unsigned)(a % 1000);
                if (end - o < WIDEST_NUMBER + 4)
                    return (size_t)-1;
                if (ns < 0)
                    *o++ = '-';
                o = put_u64(o, a / 1000);
                o[0] = '.';
                o[1] = (char)('0' + frac / 100);
                o[2] = (char)('0' + frac / 10 % 10);
                o[3] = (char)('0' + frac % 10);
                o += 4;
                break;
            }
            default:
                return (size_t)-1;
            }
        }
    }
    return (size_t)(o - out);
}
