/* report/diff_pprof: one side of a diff from a pprof profile (gzipped or
 * not): inflate (zlib), unpack (protobuf-c), validate every index against
 * its table, and turn each sample into a folded stack. Hostile input is
 * bounded: the file size, the inflated size and the stack depth. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "report/diff_int.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Function Function;
typedef Perftools__Profiles__Mapping Mapping;

#define PP_MAX_IN (1ull << 30)  /* file bytes */
#define PP_MAX_OUT (4ull << 30) /* inflated bytes */
#define PP_MAX_DEPTH (1u << 16) /* frames per sample */

static int slurp(FILE *f, unsigned char **out, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    unsigned char *p = malloc(cap);
    if (!p) return -ENOMEM;
    for (;;) {
        if (n == cap) {
            if (cap >= PP_MAX_IN) {
                free(p);
                return -EFBIG;
            }
            unsigned char *q = realloc(p, cap * 2);
            if (!q) {
                free(p);
                return -ENOMEM;
            }
            p = q;
            cap *= 2;
        }
        size_t r = fread(p + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    if (ferror(f)) {
        free(p);
        return -EIO;
    }
    *out = p;
    *len = n;
    return 0;
}

/* gzip or zlib (auto-detected) -> bytes; plain bytes are passed through. */
static int inflate_all(unsigned char *in, size_t n, unsigned char **out, size_t *len)
{
    if (n < 2 || in[0] != 0x1f || in[1] != 0x8b) {
        *out = in;
        *len = n;
        return 0;
    }
    z_stream z = {0};
    if (inflateInit2(&z, 15 + 32) != Z_OK) return -ENOMEM;
    size_t cap = n * 4 + 4096, o = 0;
    unsigned char *p = malloc(cap);
    int rc = p ? 0 : -ENOMEM, zr = Z_OK;
    z.next_in = in;
    z.avail_in = n > UINT32_MAX ? UINT32_MAX : (uInt)n;
    while (!rc && zr != Z_STREAM_END) {
        if (o == cap) {
            unsigned char *q = cap * 2 > PP_MAX_OUT ? NULL : realloc(p, cap * 2);
            if (!q) {
                rc = cap * 2 > PP_MAX_OUT ? -EFBIG : -ENOMEM;
                break;
            }
            p = q;
            cap *= 2;
        }
        z.next_out = p + o;
        z.avail_out = (uInt)(cap - o > UINT32_MAX ? UINT32_MAX : cap - o);
        zr = inflate(&z, Z_NO_FLUSH);
        o = (size_t)(z.next_out - p);
        if (zr != Z_OK && zr != Z_STREAM_END) rc = -EINVAL;
    }
    inflateEnd(&z);
    free(in);
    if (rc) {
        free(p);
        return rc;
    }
    *out = p;
    *len = o;
    return 0;
}

static int loc_cmp(const void *a, const void *b)
{
    uint64_t x = (*(Location *const *)a)->id, y = (*(Location *const *)b)->id;
    return x < y ? -1 : x > y;
}

static int fn_cmp(const void *a, const void *b)
{
    uint64_t x = (*(Function *const *)a)->id, y = (*(Function *const *)b)->id;
    return x < y ? -1 : x > y;
}

static int map_cmp(const void *a, const void *b)
{
    uint64_t x = (*(Mapping *const *)a)->id, y = (*(Mapping *const *)b)->id;
    return x < y ? -1 : x > y;
}

struct conv {
    const Profile *p;
    Location **locs;
    Function **fns;
    Mapping **maps;
    struct rp_buf frames[2]; /* [0]: this sample's frames leaf first, '\0'-separated */
};

static const char *pstr(const struct conv *c, int64_t i)
{
    return i >= 0 && (uint64_t)i < c->p->n_string_table ? c->p->string_table[i] : NULL;
}

/* bsearch comparators: the key is a uint64_t id */
static int loc_key(const void *k, const void *e)
{
    uint64_t x = *(const uint64_t *)k, y = (*(Location *const *)e)->id;
    return x < y ? -1 : x > y;
}

static int fn_key(const void *k, const void *e)
{
    uint64_t x = *(const uint64_t *)k, y = (*(Function *const *)e)->id;
    return x < y ? -1 : x > y;
}

static int map_key(const void *k, const void *e)
{
    uint64_t x = *(const uint64_t *)k, y = (*(Mapping *const *)e)->id;
    return x < y ? -1 : x > y;
}

static void *find_id(void *arr, size_t n, uint64_t id, int (*cmp)(const void *, const void *))
{
    void **hit = n ? bsearch(&id, arr, n, sizeof(void *), cmp) : NULL;
    return hit ? *hit : NULL;
}

/* Append one frame (folded-escaped) to b. */
static void put_frame(struct rp_buf *b, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == ';')
            rp_buf_puts(b, "\\x3b");
        else if (*p == '\\' && !(p[1] == 'x' && p[2] && p[3] && strchr("0123456789abcdef", p[2]) &&
                                 strchr("0123456789abcdef", p[3])))
            rp_buf_puts(b, "\\\\");
        else if ((unsigned char)*p < 0x20 || *p == 0x7f)
            rp_buf_printf(b, "\\x%02x", (unsigned char)*p);
        else
            rp_buf_putc(b, *p);
    }
    rp_buf_putc(b, '\0');
}

static void loc_frames(struct conv *c, const Location *l, struct rp_buf *b)
{
    char tmp[96];
    if (!l->n_line) {
        const Mapping *m =
            l->mapping_id ? find_id(c->maps, c->p->n_mapping, l->mapping_id, map_key) : NULL;
        const char *file = m ? pstr(c, m->filename) : NULL;
        if (file && *file) {
            const char *base = strrchr(file, '/');
            snprintf(tmp, sizeof(tmp), "+0x%" PRIx64,
                     l->address - m->memory_start + m->file_offset);
            rp_buf_puts(b, base ? base + 1 : file);
            rp_buf_puts(b, tmp);
            rp_buf_putc(b, '\0');
        } else {
            snprintf(tmp, sizeof(tmp), "[unknown]+0x%" PRIx64, l->address);
            put_frame(b, tmp);
        }
        return;
    }
    for (size_t i = 0; i < l->n_line; i++) { /* innermost first */
        const Function *fn = find_id(c->fns, c->p->n_function, l->line[i]->function_id, fn_key);
        const char *name = fn ? pstr(c, fn->name) : NULL, *file = fn ? pstr(c, fn->filename) : NULL;
        struct rp_buf *t = &c->frames[1];
        rp_buf_reset(t);
        rp_buf_puts(t, name && *name ? name : "[unknown]");
        if (file && *file) rp_buf_printf(t, " (%s:%" PRId64 ")", file, l->line[i]->line);
        put_frame(b, t->p);
    }
}

static int convert(struct ss_diff *d, enum ss_diff_side side, struct conv *c, const char *name,
                   struct ss_err *err)
{
    const Profile *p = c->p;
    size_t vi = 0;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const char *t = pstr(c, p->sample_type[i]->type);
        if (t && !strcmp(t, "samples")) {
            vi = i;
            break;
        }
    }
    struct rp_buf line = {0};
    int rc = 0;
    for (size_t i = 0; i < p->n_sample && !rc; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        if (vi >= s->n_value || s->value[vi] <= 0) continue;
        if (s->n_location_id > PP_MAX_DEPTH) {
            ss_err_set(err, -EINVAL, "%s: sample %zu has %zu locations (max %u)", name, i,
                       s->n_location_id, PP_MAX_DEPTH);
            rc = -EINVAL;
            break;
        }
        const char *comm = "[unknown]";
        for (size_t j = 0; j < s->n_label; j++) {
            const char *k = pstr(c, s->label[j]->key), *v = pstr(c, s->label[j]->str);
            if (k && v && !strcmp(k, "comm") && *v) comm = v;
        }
        struct rp_buf *fr = &c->frames[0];
        rp_buf_reset(fr);
        for (size_t j = 0; j < s->n_location_id; j++) {
            const Location *l = find_id(c->locs, p->n_location, s->location_id[j], loc_key);
            if (!l) {
                ss_err_set(err, -EINVAL,
                           "%s: sample %zu names location %" PRIu64
                           " that the profile does not have",
                           name, i, s->location_id[j]);
                rc = -EINVAL;
                break;
            }
            loc_frames(c, l, fr);
        }
        if (rc) break;
        rp_buf_reset(&line);
        put_frame(&line, comm);
        line.len--; /* drop put_frame's separator */
        /* fr holds frames leaf first, each NUL-terminated: write root first */
        size_t end = fr->len;
        if (!end) rp_buf_puts(&line, ";" SS_REPORT_NO_FRAMES);
        while (end) {
            size_t start = end - 1;
            while (start && fr->p[start - 1] != '\0')
                start--;
            rp_buf_putc(&line, ';');
            rp_buf_put(&line, fr->p + start, end - 1 - start);
            end = start;
        }
        if (line.oom || fr->oom || c->frames[1].oom ||
            rp_diff_add(d, side, line.p, line.len, (uint64_t)s->value[vi])) {
            ss_err_set(err, -ENOMEM, "%s: out of memory", name);
            rc = -ENOMEM;
        }
    }
    rp_buf_free(&line);
    return rc;
}

int ss_diff_add_pprof(struct ss_diff *d, enum ss_diff_side side, FILE *f, const char *name,
                      struct ss_err *err)
{
    unsigned char *raw = NULL, *pb = NULL;
    size_t n = 0, len = 0;
    int rc = slurp(f, &raw, &n);
    if (!rc)
        rc = inflate_all(raw, n, &pb, &len);
    else
        free(raw);
    if (rc) {
        ss_err_set(err, rc,
                   rc == -EINVAL  ? "%s: not a gzip stream (damaged or not pprof)"
                   : rc == -EFBIG ? "%s: too big for a profile"
                   : rc == -EIO   ? "%s: read error"
                                  : "%s: out of memory",
                   name);
        return rc;
    }
    Profile *p = perftools__profiles__profile__unpack(NULL, len, pb);
    free(pb);
    if (!p || !p->n_string_table || p->string_table[0][0]) {
        if (p) perftools__profiles__profile__free_unpacked(p, NULL);
        ss_err_set(err, -EINVAL, "%s: not a pprof profile (protobuf does not decode as one)", name);
        return -EINVAL;
    }
    struct conv c = {.p = p};
    c.locs = malloc((p->n_location + 1) * sizeof(*c.locs));
    c.fns = malloc((p->n_function + 1) * sizeof(*c.fns));
    c.maps = malloc((p->n_mapping + 1) * sizeof(*c.maps));
    if (!c.locs || !c.fns || !c.maps) {
        ss_err_set(err, -ENOMEM, "%s: out of memory", name);
        rc = -ENOMEM;
    } else {
        if (p->n_location) memcpy(c.locs, p->location, p->n_location * sizeof(*c.locs));
        if (p->n_function) memcpy(c.fns, p->function, p->n_function * sizeof(*c.fns));
        if (p->n_mapping) memcpy(c.maps, p->mapping, p->n_mapping * sizeof(*c.maps));
        qsort(c.locs, p->n_location, sizeof(*c.locs), loc_cmp);
        qsort(c.fns, p->n_function, sizeof(*c.fns), fn_cmp);
        qsort(c.maps, p->n_mapping, sizeof(*c.maps), map_cmp);
        rc = convert(d, side, &c, name, err);
    }
    free(c.locs);
    free(c.fns);
    free(c.maps);
    rp_buf_free(&c.frames[0]);
    rp_buf_free(&c.frames[1]);
    perftools__profiles__profile__free_unpacked(p, NULL);
    return rc;
}
