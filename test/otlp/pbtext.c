/* test/otlp/pbtext.c: protoc text output as a tree; OTLP samples as folded
 * text (see pbtext.h). */
#include "pbtext.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void why_set(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

static struct pbt *add_kid(struct pbt *t, const char *name, size_t nlen)
{
    if (t->nkids == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4;
        struct pbt *k = realloc(t->kids, cap * sizeof(*k));
        if (!k) abort();
        t->kids = k;
        t->cap = cap;
    }
    struct pbt *k = &t->kids[t->nkids++];
    memset(k, 0, sizeof(*k));
    k->name = strndup(name, nlen);
    return k;
}

/* A quoted string's bytes: C escapes as protoc writes them (\n \t \" \' \\ \ooo \xHH). */
static char *unquote(const char *s, const char *end, size_t *outlen)
{
    char *o = malloc((size_t)(end - s) + 1);
    size_t n = 0;
    for (const char *p = s; p < end; p++) {
        if (*p != '\\' || p + 1 >= end) {
            o[n++] = *p;
            continue;
        }
        p++;
        switch (*p) {
        case 'n':
            o[n++] = '\n';
            break;
        case 't':
            o[n++] = '\t';
            break;
        case 'r':
            o[n++] = '\r';
            break;
        case 'x': {
            unsigned v = 0;
            int k = 0;
            while (k < 2 && p + 1 < end && strchr("0123456789abcdefABCDEF", p[1]) && p[1]) {
                p++;
                v = v * 16 + (unsigned)(*p <= '9' ? *p - '0' : (*p | 32) - 'a' + 10);
                k++;
            }
            o[n++] = (char)v;
            break;
        }
        default:
            if (*p >= '0' && *p <= '7') {
                unsigned v = 0;
                int k = 0;
                p--;
                while (k < 3 && p + 1 < end && p[1] >= '0' && p[1] <= '7') {
                    p++;
                    v = v * 8 + (unsigned)(*p - '0');
                    k++;
                }
                o[n++] = (char)v;
            } else {
                o[n++] = *p; /* \" \' \\ */
            }
        }
    }
    o[n] = 0;
    *outlen = n;
    return o;
}

struct pbt *pbt_parse(const char *text, char *why, size_t whylen)
{
    struct pbt *root = calloc(1, sizeof(*root));
    struct pbt *stack[64] = {root};
    int depth = 0, lineno = 0;
    for (const char *l = text; *l;) {
        const char *eol = strchr(l, '\n');
        if (!eol) eol = l + strlen(l);
        lineno++;
        const char *p = l;
        while (p < eol && *p == ' ')
            p++;
        const char *e = eol;
        while (e > p && e[-1] == ' ')
            e--;
        if (p == e) {
        } else if (*p == '}' && e == p + 1) {
            if (depth == 0) goto bad;
            depth--;
        } else if (e[-1] == '{') {
            const char *ne = e - 1;
            while (ne > p && ne[-1] == ' ')
                ne--;
            if (depth == 63) goto bad;
            struct pbt *k = add_kid(stack[depth], p, (size_t)(ne - p));
            stack[++depth] = k;
        } else {
            const char *c = memchr(p, ':', (size_t)(e - p));
            if (!c || c[1] != ' ') goto bad;
            struct pbt *k = add_kid(stack[depth], p, (size_t)(c - p));
            const char *v = c + 2;
            if (*v == '"' && e - v >= 2 && e[-1] == '"')
                k->val = unquote(v + 1, e - 1, &k->vlen);
            else {
                k->val = strndup(v, (size_t)(e - v));
                k->vlen = (size_t)(e - v);
            }
        }
        l = *eol ? eol + 1 : eol;
        continue;
    bad:
        why_set(why, whylen, "protoc text line %d: cannot parse '%.*s'", lineno, (int)(eol - l), l);
        pbt_free(root);
        return NULL;
    }
    if (depth) {
        why_set(why, whylen, "protoc text: %d unclosed messages", depth);
        pbt_free(root);
        return NULL;
    }
    return root;
}

static void pbt_clear(struct pbt *t)
{
    for (size_t i = 0; i < t->nkids; i++)
        pbt_clear(&t->kids[i]);
    free(t->kids);
    free(t->name);
    free(t->val);
}

void pbt_free(struct pbt *t)
{
    if (!t) return;
    pbt_clear(t);
    free(t);
}

const struct pbt *pbt_get(const struct pbt *t, const char *name, size_t idx)
{
    for (size_t i = 0; t && i < t->nkids; i++)
        if (!strcmp(t->kids[i].name, name) && idx-- == 0) return &t->kids[i];
    return NULL;
}

size_t pbt_count(const struct pbt *t, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; t && i < t->nkids; i++)
        n += !strcmp(t->kids[i].name, name);
    return n;
}

long long pbt_int(const struct pbt *t, const char *name, long long def)
{
    const struct pbt *k = pbt_get(t, name, 0);
    return k && k->val ? strtoll(k->val, NULL, 10) : def;
}

static unsigned long long pbt_uint(const struct pbt *t, const char *name)
{
    const struct pbt *k = pbt_get(t, name, 0);
    return k && k->val ? strtoull(k->val, NULL, 10) : 0;
}

/* ---- the request ---- */
struct dict {
    const struct pbt *d;
    size_t nstr, nmap, nloc, nfn, nattr, nstack, nlink;
    const char **str;
};

static const char *dstr(const struct dict *d, long long i)
{
    return i >= 0 && (size_t)i < d->nstr ? d->str[i] : NULL;
}

/* Attribute idx's key and string value (NULL for an int). */
static bool dattr(const struct dict *d, long long idx, const char **key, const char **sval,
                  long long *ival)
{
    if (idx <= 0 || (size_t)idx >= d->nattr) return false;
    const struct pbt *a = pbt_get(d->d, "attribute_table", (size_t)idx);
    *key = dstr(d, pbt_int(a, "key_strindex", 0));
    const struct pbt *v = pbt_get(a, "value", 0);
    const struct pbt *s = pbt_get(v, "string_value", 0);
    *sval = s ? s->val : NULL;
    *ival = pbt_int(v, "int_value", 0);
    return *key != NULL;
}

/* The string attribute key among t's attribute_indices. */
static const char *find_attr(const struct dict *d, const struct pbt *t, const char *key)
{
    for (size_t i = 0; i < pbt_count(t, "attribute_indices"); i++) {
        const char *k, *s;
        long long iv;
        if (dattr(d, strtoll(pbt_get(t, "attribute_indices", i)->val, NULL, 10), &k, &s, &iv) &&
            !strcmp(k, key))
            return s;
    }
    return NULL;
}

static const char *basename_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Folded's escape of a display string: '\' -> \\, ';' -> \x3b. */
static void put_folded(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == ';')
            fputs("\\x3b", f);
        else
            fputc(*s, f);
    }
}

/* Frame text of location li (DESIGN.md's rules) into f; false: broken. */
static bool frame_text(const struct dict *d, long long li, FILE *f, char *why, size_t wl)
{
    if (li <= 0 || (size_t)li >= d->nloc) {
        why_set(why, wl, "location index %lld outside the table (%zu)", li, d->nloc);
        return false;
    }
    const struct pbt *l = pbt_get(d->d, "location_table", (size_t)li);
    const char *type = find_attr(d, l, "profile.frame.type");
    if (!type) {
        why_set(why, wl, "location %lld has no profile.frame.type", li);
        return false;
    }
    long long mi = pbt_int(l, "mapping_index", 0);
    if (mi < 0 || (size_t)mi >= d->nmap) {
        why_set(why, wl, "location %lld: mapping index %lld dangles", li, mi);
        return false;
    }
    unsigned long long addr = pbt_uint(l, "address");
    const struct pbt *line = pbt_get(l, "lines", 0);
    char buf[4096];
    if (!line) { /* unsymbolized native: MODULE+0xOFFSET from the mapping */
        if (strcmp(type, "native")) {
            why_set(why, wl, "location %lld (%s) without a line", li, type);
            return false;
        }
        if (mi) {
            const struct pbt *m = pbt_get(d->d, "mapping_table", (size_t)mi);
            const char *file = dstr(d, pbt_int(m, "filename_strindex", 0));
            unsigned long long off =
                addr - pbt_uint(m, "memory_start") + pbt_uint(m, "file_offset");
            snprintf(buf, sizeof(buf), "%s+0x%llx", basename_of(file ? file : ""), off);
        } else {
            snprintf(buf, sizeof(buf), "[unknown]+0x%llx", addr);
        }
        put_folded(f, buf);
        return true;
    }
    long long fi = pbt_int(line, "function_index", 0);
    if (fi <= 0 || (size_t)fi >= d->nfn) {
        why_set(why, wl, "location %lld: function index %lld dangles", li, fi);
        return false;
    }
    const struct pbt *fn = pbt_get(d->d, "function_table", (size_t)fi);
    const char *name = dstr(d, pbt_int(fn, "name_strindex", 0));
    const char *file = dstr(d, pbt_int(fn, "filename_strindex", 0));
    if (!name || !file || !dstr(d, pbt_int(fn, "system_name_strindex", 0))) {
        why_set(why, wl, "function %lld: string index dangles", fi);
        return false;
    }
    if (!strcmp(type, "luajit") && *file)
        snprintf(buf, sizeof(buf), "%s (%s:%lld)", name, file, pbt_int(line, "line", 0));
    else
        snprintf(buf, sizeof(buf), "%s%s", name, !strcmp(type, "kernel") ? "_[k]" : "");
    put_folded(f, buf);
    return true;
}

static int cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *folded_sorted(const char *text)
{
    size_t n = 0, cap = 64;
    char **lines = malloc(cap * sizeof(*lines));
    char *copy = strdup(text);
    for (char *l = strtok(copy, "\n"); l; l = strtok(NULL, "\n")) {
        if (n == cap) lines = realloc(lines, (cap *= 2) * sizeof(*lines));
        lines[n++] = l;
    }
    qsort(lines, n, sizeof(*lines), cmp_line);
    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    for (size_t i = 0; i < n;) { /* merge "STACK a", "STACK b" */
        char *sp = strrchr(lines[i], ' ');
        size_t klen = sp ? (size_t)(sp - lines[i]) : strlen(lines[i]);
        long long sum = 0;
        size_t j = i;
        while (j < n && !strncmp(lines[j], lines[i], klen) && lines[j][klen] == ' ') {
            sum += strtoll(lines[j] + klen + 1, NULL, 10);
            j++;
        }
        if (j == i) j++;
        fprintf(f, "%.*s %lld\n", (int)klen, lines[i], sum);
        i = j;
    }
    fclose(f);
    free(lines);
    free(copy);
    return out;
}

static bool zero_entry(const struct dict *d, const char *table, char *why, size_t wl)
{
    const struct pbt *z = pbt_get(d->d, table, 0);
    if (!z) {
        why_set(why, wl, "%s has no entry 0", table);
        return false;
    }
    if (strcmp(table, "link_table") && z->nkids) {
        why_set(why, wl, "%s[0] is not the zero value (field %s)", table, z->kids[0].name);
        return false;
    }
    return true;
}

/* Every index field anywhere in the request within its table. */
static bool indices_ok(const struct dict *d, const struct pbt *t, char *why, size_t wl)
{
    static const char *const names[] = {"attribute_indices", "function_index", "mapping_index",
                                        "location_indices",  "stack_index",    "link_index"};
    const size_t n[] = {d->nattr, d->nfn, d->nmap, d->nloc, d->nstack, d->nlink};
    for (size_t i = 0; i < t->nkids; i++) {
        const struct pbt *k = &t->kids[i];
        if (!k->val) {
            if (!indices_ok(d, k, why, wl)) return false;
            continue;
        }
        size_t nl = strlen(k->name), limit = 0;
        bool idx = false;
        if (nl > 9 && !strcmp(k->name + nl - 9, "_strindex")) {
            idx = true;
            limit = d->nstr;
        }
        for (size_t j = 0; j < sizeof(names) / sizeof(names[0]); j++)
            if (!strcmp(k->name, names[j])) {
                idx = true;
                limit = n[j];
            }
        long long v = strtoll(k->val, NULL, 10);
        if (idx && (v < 0 || (size_t)v >= limit)) {
            why_set(why, wl, "%s %lld dangles (table of %zu)", k->name, v, limit);
            return false;
        }
    }
    return true;
}

char *otlp_folded(const struct pbt *req, long long div, char *why, size_t wl)
{
    struct dict d = {.d = pbt_get(req, "dictionary", 0)};
    if (!d.d) {
        why_set(why, wl, "no dictionary");
        return NULL;
    }
    d.nstr = pbt_count(d.d, "string_table");
    d.nmap = pbt_count(d.d, "mapping_table");
    d.nloc = pbt_count(d.d, "location_table");
    d.nfn = pbt_count(d.d, "function_table");
    d.nattr = pbt_count(d.d, "attribute_table");
    d.nstack = pbt_count(d.d, "stack_table");
    d.nlink = pbt_count(d.d, "link_table");
    const char *tables[] = {"mapping_table", "location_table",  "function_table",
                            "link_table",    "attribute_table", "stack_table"};
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
        if (!zero_entry(&d, tables[i], why, wl)) return NULL;
    if (!d.nstr || strcmp(pbt_get(d.d, "string_table", 0)->val, "")) {
        why_set(why, wl, "string_table[0] is not \"\"");
        return NULL;
    }
    if (!indices_ok(&d, req, why, wl)) return NULL;
    d.str = calloc(d.nstr, sizeof(*d.str));
    for (size_t i = 0; i < d.nstr; i++)
        d.str[i] = pbt_get(d.d, "string_table", i)->val;
    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    bool ok = true;
    for (size_t m = 1; ok && m < d.nmap; m++) { /* mapping strings and attributes */
        const struct pbt *mp = pbt_get(d.d, "mapping_table", m);
        if (!dstr(&d, pbt_int(mp, "filename_strindex", 0)) ||
            !find_attr(&d, mp, "process.executable.build_id.gnu")) {
            why_set(why, wl, "mapping %zu: no file name or build-id attribute", m);
            ok = false;
        }
    }
    for (size_t r = 0; ok && r < pbt_count(req, "resource_profiles"); r++) {
        const struct pbt *rp = pbt_get(req, "resource_profiles", r);
        const struct pbt *sp = pbt_get(rp, "scope_profiles", 0);
        const struct pbt *prof = pbt_get(sp, "profiles", 0);
        for (size_t s = 0; ok && s < pbt_count(prof, "samples"); s++) {
            const struct pbt *smp = pbt_get(prof, "samples", s);
            long long si = pbt_int(smp, "stack_index", 0);
            if (si <= 0 || (size_t)si >= d.nstack) {
                why_set(why, wl, "sample stack index %lld outside the table (%zu)", si, d.nstack);
                ok = false;
                break;
            }
            long long li = pbt_int(smp, "link_index", 0);
            const char *comm = find_attr(&d, smp, "thread.name");
            if (li < 0 || (size_t)li >= d.nlink || !comm) {
                why_set(why, wl, "sample %zu: link index dangles or no thread.name", s);
                ok = false;
                break;
            }
            size_t nts = pbt_count(smp, "timestamps_unix_nano"), nv = pbt_count(smp, "values");
            if (nts && nv && nts != nv) {
                why_set(why, wl, "sample %zu: %zu timestamps, %zu values", s, nts, nv);
                ok = false;
                break;
            }
            long long n = div ? 0 : (long long)nts, sum = 0;
            for (size_t v = 0; v < nv; v++)
                sum += strtoll(pbt_get(smp, "values", v)->val, NULL, 10);
            if (div)
                n = sum / div;
            else if (!n)
                n = sum;
            put_folded(f, comm);
            const struct pbt *st = pbt_get(d.d, "stack_table", (size_t)si);
            size_t nl = pbt_count(st, "location_indices");
            for (size_t k = nl; ok && k-- > 0;) { /* leaf first in the stack: root first here */
                fputc(';', f);
                ok = frame_text(&d, strtoll(pbt_get(st, "location_indices", k)->val, NULL, 10), f,
                                why, wl);
            }
            fprintf(f, " %lld\n", n);
        }
    }
    fclose(f);
    free(d.str);
    if (!ok) {
        free(out);
        return NULL;
    }
    char *sorted = folded_sorted(out);
    free(out);
    return sorted;
}

const char *otlp_resource_attr(const struct pbt *req, size_t i, const char *key)
{
    const struct pbt *res = pbt_get(pbt_get(req, "resource_profiles", i), "resource", 0);
    for (size_t k = 0; k < pbt_count(res, "attributes"); k++) {
        const struct pbt *a = pbt_get(res, "attributes", k);
        const struct pbt *kk = pbt_get(a, "key", 0);
        if (!kk || strcmp(kk->val, key)) continue;
        const struct pbt *v = pbt_get(a, "value", 0);
        const struct pbt *s = pbt_get(v, "string_value", 0);
        if (s) return s->val;
        const struct pbt *n = pbt_get(v, "int_value", 0);
        return n ? n->val : NULL;
    }
    return NULL;
}

struct pbt *otlp_decode_file(const char *proto_dir, const char *path, char *why, size_t wl)
{
    char *cmd = NULL;
    if (asprintf(&cmd,
                 "protoc -I '%s' "
                 "--decode=opentelemetry.proto.collector.profiles.v1development."
                 "ExportProfilesServiceRequest "
                 "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto "
                 "< '%s' 2>&1",
                 proto_dir, path) < 0)
        return NULL;
    FILE *p = popen(cmd, "r");
    free(cmd);
    if (!p) {
        why_set(why, wl, "cannot run protoc");
        return NULL;
    }
    char *out = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            cap = cap ? cap * 2 : 1 << 20;
            out = realloc(out, cap);
        }
        size_t n = fread(out + len, 1, cap - len - 1, p);
        if (!n) break;
        len += n;
    }
    out[len] = 0;
    int st = pclose(p);
    struct pbt *t = NULL;
    if (st != 0)
        why_set(why, wl, "protoc --decode of %s failed (status %d): %.500s", path, st, out);
    else
        t = pbt_parse(out, why, wl);
    free(out);
    return t;
}
