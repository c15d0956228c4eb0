/*
 * gen_format: writes perfweave/_format.py, the Python side of the experiment format,
 * from the X-macro lists of include/perfweave/format.h and of the modules' format
 * headers (include/perfweave/format/MODULE.h). Built and run at build time (CMake); the
 * C compiler reads the lists, so Python never parses C. pw_format_parts.h (made by CMake
 * from runtime/modules/modules.def) includes the modules' headers and lists their parts
 * as PW_FORMAT_PARTS(P), P(core) first.
 *
 * It also checks what numpy will assume: each field's numpy code has the size of its C
 * type, and each record's fields lie back to back in their struct (no padding), so that
 * the dtype reads the bytes the runtime writes. A failed check fails the build.
 *
 *   gen_format OUT.py
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfweave/format.h"
#include "pw_format_parts.h"

static FILE *out;
static int failed;
static const char *part; /* the part being written, for messages */

/* The size in bytes a numpy code such as "<i8", "u1" or "<f8" stands for. */
static size_t code_size(const char *code)
{
    size_t n = strlen(code);
    return n ? (size_t)atoi(code + n - 1 - (n > 2 && code[n - 2] >= '0' && code[n - 2] <= '9')) : 0;
}

static void check(int ok, const char *what, const char *record, const char *field)
{
    if (!ok) {
        fprintf(stderr, "gen_format: %s: record %s%s%s: %s\n", part, record,
                field ? ", field " : "", field ? field : "", what);
        failed = 1;
    }
}

/* ---- the lists of every part, by kind of entry ---- */

/* Each function below writes some kinds of entry of every part: PW_FORMAT_PARTS(PART) with
 * ENTRIES the ON_ macro of each kind it writes and NONE for the others. */
#define NONE2(a, b)
#define NONE3(a, b, c)
#define NONE4(a, b, c, d)
/* PW_FORMAT_PARTS(PART) expands every part with the handlers ENTRIES names, one per kind
 * of entry (CALL: ENTRIES is expanded into the list before the part's macro takes it). */
#define CALL(macro, args) macro args
#define PART(name)                                                                                 \
    part = #name;                                                                                  \
    CALL(PW_FORMAT_##name, (ENTRIES))
/* the same in an initializer list (no statements) */
#define PART_LIST(name) CALL(PW_FORMAT_##name, (ENTRIES))

static void files(void)
{
    fputs("# kind: directory in the experiment, \"format\" of its files' headers, version\n"
          "FILES = {\n",
          out);
#define ON_FILE(kind, dir, magic, version)                                                         \
    fprintf(out, "    \"%s\": FileKind(\"%s\", \"%s\", \"%s\", %d),\n", #kind, #kind, dir, magic,  \
            version);
#undef ENTRIES
#define ENTRIES ON_FILE, NONE3, NONE2, NONE2, NONE2, NONE2
    PW_FORMAT_PARTS(PART)
    fputs("}\n\n", out);
}

/* The Python schema of each JSON type of format.h's JSON entries (readers/files.py
 * check): a type the list does not know fails to compile. */
#define PY_int "int"
#define PY_num "float"
#define PY_str "str"
#define PY_bool "bool"
#define PY_strs "[str]"
#define PY_list "list"
#define PY_object "dict"

static void json(void)
{
    fputs("# kind: the keys of its JSON documents with their types (readers/files.py check)\n"
          "JSON = {\n",
          out);
#define JSON_KEY(type, key) fprintf(out, "        \"%s\": %s,\n", #key, PY_##type);
#define ON_JSON(kind, FIELDS)                                                                      \
    fprintf(out, "    \"%s\": {\n", #kind);                                                        \
    FIELDS(JSON_KEY, JSON_KEY)                                                                     \
    fputs("    },\n", out);
#undef ENTRIES
#define ENTRIES NONE4, NONE3, NONE2, NONE2, NONE2, ON_JSON
    PW_FORMAT_PARTS(PART)
    fputs("}\n# kind: the keys every document of it has (X of its JSON entry)\n"
          "JSON_REQUIRED = {\n",
          out);
#define JSON_NAME(type, key) " \"" #key "\","
#define ON_REQUIRED(kind, FIELDS)                                                                  \
    fprintf(out, "    \"%s\": (%s),\n", #kind, FIELDS(JSON_NAME, NONE2));
#undef ENTRIES
#define ENTRIES NONE4, NONE3, NONE2, NONE2, NONE2, ON_REQUIRED
    PW_FORMAT_PARTS(PART)
    fputs("}\n", out);
}

static void records(void)
{
    fputs("def __getattr__(name):\n"
          "    \"\"\"RECORDS, made at its first use: the names, codes and constants need no numpy\n"
          "    (perfweave run's verdict reads them alone).\"\"\"\n"
          "    if name != \"RECORDS\":\n"
          "        raise AttributeError(f\"module {__name__!r} has no attribute {name!r}\")\n"
          "    import numpy as np\n\n"
          "    global RECORDS\n"
          "    # record: numpy dtype (every field little-endian, back to back)\n"
          "    RECORDS = {\n",
          out);
    size_t at;
#define CHECK_FIELD(ctype, code, field)                                                            \
    check(code_size(code) == sizeof(ctype), "numpy code and C type differ in size", rec, #field);  \
    check(offsetof(struct_t, field) == at, "padding before it", rec, #field);
#define FIELD(ctype, code, field)                                                                  \
    CHECK_FIELD(ctype, code, field)                                                                \
    fprintf(out, "            (\"%s\", \"%s\"),\n", #field, code);                                 \
    at += sizeof(ctype);
#define ARRAY(ctype, code, field, n)                                                               \
    CHECK_FIELD(ctype, code, field)                                                                \
    fprintf(out, "            (\"%s\", \"%s\", (%d,)),\n", #field, code, (int)(n));                \
    at += sizeof(ctype) * (n);
#define ON_RECORD(name, FIELDS, type)                                                              \
    {                                                                                              \
        typedef type struct_t;                                                                     \
        const char *rec = #name;                                                                   \
        at = 0;                                                                                    \
        fprintf(out, "        \"%s\": np.dtype([\n", rec);                                         \
        FIELDS(FIELD, ARRAY)                                                                       \
        fputs("        ]),\n", out);                                                               \
        check(at == sizeof(struct_t), "padding after the last field", rec, NULL);                  \
    }
#undef ENTRIES
#define ENTRIES NONE4, ON_RECORD, NONE2, NONE2, NONE2, NONE2
    PW_FORMAT_PARTS(PART)
    fputs("    }\n"
          "    return RECORDS\n\n\n",
          out);
}

/* The arrays of a profile file, in file order (pw.h PW_PROFILE_ARRAYS): the core's, then
 * each module's, each with the record of a RECORD entry of the same C type. */
static void profile_arrays(void)
{
    static const struct {
        const char *rec_name, *rec_type;
    } records[] = {
#define ON_RECORD_NAME(name, FIELDS, type) {#name, #type},
#undef ENTRIES
#define ENTRIES NONE4, ON_RECORD_NAME, NONE2, NONE2, NONE2, NONE2
        PW_FORMAT_PARTS(PART_LIST)};
#undef ON_RECORD_NAME
    fputs("# array of a profile file, in file order: (the part that declares it, its record in\n"
          "# RECORDS)\n"
          "PROFILE_ARRAYS = {\n",
          out);
#define ON_ARRAY(arr, rec, FIELDS, type)                                                           \
    {                                                                                              \
        int found = 0;                                                                             \
        for (size_t i = 0; i < sizeof records / sizeof *records; i++)                              \
            found |= !strcmp(records[i].rec_name, #rec) && !strcmp(records[i].rec_type, #type);    \
        check(found, "profile array " #arr ": no RECORD of this name and type", #rec, NULL);       \
        fprintf(out, "    \"%s\": (\"%s\", \"%s\"),\n", #arr, part, #rec);                         \
    }
#define ARRAY_PART(name)                                                                           \
    part = #name;                                                                                  \
    PW_PROFILE_ARRAYS_##name(ON_ARRAY)
    PW_PROFILE_ARRAY_PARTS(ARRAY_PART)
#undef ON_ARRAY
#undef ARRAY_PART
    fputs("}\n", out);
}

/* A NAMES list: the names by index (the indexes need not come in order). */
static void names_list(const char *name, const int *index, const char *const *str, int n)
{
    int top = -1;
    for (int i = 0; i < n; i++)
        top = index[i] > top ? index[i] : top;
    fprintf(out, "%s = [", name);
    for (int k = 0; k <= top; k++) {
        const char *s = NULL;
        for (int i = 0; i < n; i++)
            s = index[i] == k ? str[i] : s;
        if (!s) {
            fprintf(stderr, "gen_format: %s: %s has no name at index %d\n", part, name, k);
            failed = 1;
            s = "";
        }
        fprintf(out, "%s\"%s\"", k ? ", " : "", s);
    }
    fputs("]\n", out);
}

static void upper(char *dst, const char *src, size_t cap)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++)
        dst[i] = src[i] >= 'a' && src[i] <= 'z' ? (char)(src[i] - 'a' + 'A') : src[i];
    dst[i] = 0;
}

static void put_const_int(const char *name, long long v)
{
    char u[128];
    upper(u, name, sizeof u);
    fprintf(out, "%s = %lld\n", u, v);
}

static void put_const_str(const char *name, const char *v)
{
    char u[128];
    upper(u, name, sizeof u);
    fprintf(out, "%s = \"%s\"\n", u, v);
}

#define put_const(name, v)                                                                         \
    _Generic((v), char *: put_const_str, const char *: put_const_str, default: put_const_int)(     \
        name, v)

static void lists(void)
{
    char u[128];
#define NAME_INDEX(n, value, str) value,
#define NAME_STR(n, value, str) str,
#define ON_NAMES(name, LIST)                                                                       \
    {                                                                                              \
        static const int index[] = {LIST(NAME_INDEX)};                                             \
        static const char *const str[] = {LIST(NAME_STR)};                                         \
        upper(u, #name, sizeof u);                                                                 \
        names_list(u, index, str, (int)(sizeof index / sizeof *index));                            \
    }
#define CODE_ENTRY(n, value) fprintf(out, "    \"%s\": %d,\n", #n, (int)(value));
#define ON_CODES(name, LIST)                                                                       \
    upper(u, #name, sizeof u);                                                                     \
    fprintf(out, "%s = {\n", u);                                                                   \
    LIST(CODE_ENTRY)                                                                               \
    fputs("}\n", out);
#define ON_CONST(name, value) put_const(#name, value);
#undef ENTRIES
#define ENTRIES NONE4, NONE3, ON_NAMES, ON_CODES, ON_CONST, NONE2
    PW_FORMAT_PARTS(PART)
    /* the activities: PW_ACTIVITIES's own names, and "mpi_" + each family */
    part = "core";
#define MPI_INDEX(n, value, str) 1 + value,
#define MPI_STR(n, value, str) "mpi_" str,
    static const int index[] = {PW_ACTIVITIES(NAME_INDEX, MPI_INDEX)};
    static const char *const str[] = {PW_ACTIVITIES(NAME_STR, MPI_STR)};
    names_list("ACTIVITIES", index, str, (int)(sizeof index / sizeof *index));
    /* the modules, in the order of modules.def */
#define PW_MODULE(name, ...) "\"" #name "\", "
    static const char modules[] =
#include "modules.def"
        ;
#undef PW_MODULE
    fprintf(out, "MODULES = [%.*s]\n", (int)(sizeof modules - 3), modules);
}

int main(int argc, char **argv)
{
    if (argc != 2 || !(out = fopen(argv[1], "w"))) {
        fprintf(stderr, "usage: gen_format OUT.py (a file that can be written)\n");
        return 2;
    }
    fputs("\"\"\"The experiment format's names, for every Python reader and writer: file kinds,\n"
          "record dtypes, lists of names, codes and constants.\n\n"
          "Generated at build time by runtime/core/gen_format.c from include/perfweave/format.h,\n"
          "the modules' include/perfweave/format/MODULE.h and runtime/modules/modules.def:\n"
          "do not edit; edit those (docs/architecture.md \"Names declared once\").\n"
          "\"\"\"\n"
          "from collections import namedtuple\n\n"
          "FileKind = namedtuple(\"FileKind\", \"kind directory magic version\")\n\n",
          out);
    files();
    json();
    lists();
    profile_arrays();
    fputs("\n\n", out);
    records();
    if (fclose(out) != 0 || failed) {
        remove(argv[1]);
        return 1;
    }
    return 0;
}
