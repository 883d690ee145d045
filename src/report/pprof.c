/* report/pprof: the aggregated report as a gzipped pprof Profile
 * (profile.proto via protobuf-c, gzip via zlib deflate). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "report/report_int.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;

struct pp {
    const struct ss_report *r;
    struct rp_strtab str; /* the profile's string table */
    struct rp_buf tmp;
    int oom;
    /* functions */
    struct pfunc {
        int64_t name, system_name, filename, start_line;
    } * funcs;
    size_t nfuncs, capfuncs;
    struct rp_index func_ix;
    /* mappings */
    struct pmap {
        uint32_t module;
        uint8_t build_id_len, build_id[20];
        uint64_t bias, lo, hi, lo_off;
        bool all_named;
    } * maps;
    size_t nmaps, capmaps;
    struct rp_index map_ix;
};

/* Intern s escaped for display; returns the string index. */
static int64_t pstr(struct pp *p, const char *s)
{
    rp_buf_reset(&p->tmp);
    rp_escape_str(&p->tmp, s, RP_ESC_DISPLAY);
    int64_t id =
        p->tmp.oom ? -ENOMEM : rp_str_intern(&p->str, p->tmp.p ? p->tmp.p : "", p->tmp.len);
    if (id < 0) p->oom = 1;
    return id < 0 ? 0 : id;
}

struct func_key {
    const struct pp *p;
    const struct pfunc *f;
};

static bool func_eq(const void *ctx, uint32_t idx)
{
    const struct func_key *k = ctx;
    const struct pfunc *a = &k->p->funcs[idx];
    return a->name == k->f->name && a->system_name == k->f->system_name &&
           a->filename == k->f->filename && a->start_line == k->f->start_line;
}

/* Function id (1-based) for a frame. */
static uint64_t func_of(struct pp *p, const struct rp_frame *fr)
{
    const struct ss_report *r = p->r;
    struct pfunc f = {0};
    if (fr->kind == SS_FRAME_LUA) {
        f.name = pstr(p, fr->name ? rp_s(r, fr->name) : "anonymous");
        f.filename = fr->module ? pstr(p, rp_s(r, fr->module)) : 0;
        f.start_line = fr->module ? fr->first_line : 0;
    } else {
        f.name = pstr(p, rp_s(r, fr->text));
    }
    /* system_name: the symbol as the file spells it (mangled) */
    f.system_name = fr->sysname ? pstr(p, rp_s(r, fr->sysname)) : f.name;
    uint64_t h = rp_hash(&f, sizeof(f), 1);
    struct func_key k = {p, &f};
    uint32_t idx;
    if (rp_index_find(&p->func_ix, h, func_eq, &k, &idx)) return idx + 1;
    if (rp_grow(&p->funcs, &p->capfuncs, p->nfuncs + 1, sizeof(*p->funcs)) ||
        rp_index_insert(&p->func_ix, h, (uint32_t)p->nfuncs)) {
        p->oom = 1;
        return 0;
    }
    p->funcs[p->nfuncs] = f;
    return ++p->nfuncs;
}

struct map_key {
    const struct pp *p;
    const struct pmap *m;
};

static bool map_eq(const void *ctx, uint32_t idx)
{
    const struct map_key *k = ctx;
    const struct pmap *a = &k->p->maps[idx];
    return a->module == k->m->module && a->bias == k->m->bias &&
           a->build_id_len == k->m->build_id_len &&
           !memcmp(a->build_id, k->m->build_id, a->build_id_len);
}

/* Mapping id (1-based) for a native frame with a module, 0 otherwise. */
static uint64_t map_of(struct pp *p, const struct rp_frame *fr)
{
    if (fr->kind != SS_FRAME_NATIVE || !fr->module) return 0;
    struct pmap m = {
        .module = fr->module, .build_id_len = fr->build_id_len, .bias = fr->addr - fr->offset};
    memcpy(m.build_id, fr->build_id, fr->build_id_len);
    uint64_t h = rp_hash(m.build_id, m.build_id_len, m.module);
    h = rp_hash_u64(h, m.bias);
    struct map_key k = {p, &m};
    uint32_t idx;
    if (!rp_index_find(&p->map_ix, h, map_eq, &k, &idx)) {
        if (rp_grow(&p->maps, &p->capmaps, p->nmaps + 1, sizeof(*p->maps)) ||
            rp_index_insert(&p->map_ix, h, (uint32_t)p->nmaps)) {
            p->oom = 1;
            return 0;
        }
        idx = (uint32_t)p->nmaps++;
        m.lo = fr->addr;
        m.hi = fr->addr;
        m.lo_off = fr->offset;
        m.all_named = true;
        p->maps[idx] = m;
    }
    struct pmap *pm = &p->maps[idx];
    if (fr->addr < pm->lo) {
        pm->lo = fr->addr;
        pm->lo_off = fr->offset;
    }
    if (fr->addr > pm->hi) pm->hi = fr->addr;
    if (!fr->name) pm->all_named = false;
    return idx + 1;
}

/* protobuf-c output buffer that deflates (gzip) into a FILE, at zlib's
 * fastest level as Go's runtime/pprof writes its profiles (gzip.BestSpeed):
 * the agent gzips a profile for every scrape and push, and the default level
 * took 2.2 times the CPU for a 9% smaller file (a 180 KB system-wide profile). */
struct gz_out {
    ProtobufCBuffer base;
    z_stream zs;
    FILE *f;
    int rc;
    struct ss_err *err;
    size_t nin;
    unsigned char in[1 << 15]; /* protobuf-c appends field by field: deflated in blocks */
    unsigned char chunk[1 << 15];
};

static void gz_run(struct gz_out *g, int flush)
{
    do {
        g->zs.next_out = g->chunk;
        g->zs.avail_out = sizeof(g->chunk);
        int z = deflate(&g->zs, flush);
        if (z == Z_STREAM_ERROR) {
            ss_err_set(g->err, -EIO, "pprof output: deflate failed");
            g->rc = -EIO;
            return;
        }
        size_t n = sizeof(g->chunk) - g->zs.avail_out;
        if (!g->rc && (g->rc = rp_fwrite(g->f, g->chunk, n, "pprof output", g->err))) return;
    } while (g->zs.avail_out == 0);
}

/* Deflate what the input block holds (flush: and end the stream). */
static void gz_drain(struct gz_out *g, int flush)
{
    g->zs.next_in = g->in;
    g->zs.avail_in = (uInt)g->nin;
    g->nin = 0;
    gz_run(g, flush);
}

static void gz_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    struct gz_out *g = (struct gz_out *)b;
    while (len && !g->rc) {
        size_t n = sizeof(g->in) - g->nin < len ? sizeof(g->in) - g->nin : len;
        memcpy(g->in + g->nin, data, n);
        g->nin += n;
        data += n;
        len -= n;
        if (g->nin == sizeof(g->in)) gz_drain(g, Z_NO_FLUSH);
    }
}

static void pp_free(struct pp *p)
{
    rp_strtab_free(&p->str);
    rp_buf_free(&p->tmp);
    free(p->funcs);
    rp_index_free(&p->func_ix);
    free(p->maps);
    rp_index_free(&p->map_ix);
}

static int pack(Profile *prof, FILE *f, struct ss_err *err)
{
    struct gz_out *g = calloc(1, sizeof(*g));
    if (!g) {
        ss_err_set(err, -ENOMEM, "pprof output: out of memory");
        return -ENOMEM;
    }
    g->base.append = gz_append;
    g->f = f;
    g->err = err;
    if (deflateInit2(&g->zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(g);
        ss_err_set(err, -ENOMEM, "pprof output: deflateInit failed");
        return -ENOMEM;
    }
    perftools__profiles__profile__pack_to_buffer(prof, &g->base);
    if (!g->rc) gz_drain(g, Z_FINISH);
    deflateEnd(&g->zs);
    int rc = g->rc ? g->rc : rp_fflush(f, "pprof output", err);
    free(g);
    return rc;
}

#define NLAB 5 /* pid, tid, comm, and with ss_report_set_labels exe, cgroup */

int ss_report_write_pprof(const struct ss_report *r, FILE *f, struct ss_err *err)
{
    struct pp p = {.r = r};
    size_t ns = r->nstacks, nf = r->nframes;
    ValueType vt[3];
    Sample *smp = calloc(ns + 1, sizeof(*smp));
    Sample **smpp = calloc(ns + 1, sizeof(*smpp));
    int64_t *vals = calloc(2 * ns + 1, sizeof(*vals));
    Label *lab = calloc(NLAB * ns + 1, sizeof(*lab));
    Label **labp = calloc(NLAB * ns + 1, sizeof(*labp));
    uint64_t *locids = calloc(r->nfids + 1, sizeof(*locids));
    Location *loc = calloc(nf + 1, sizeof(*loc));
    Location **locp = calloc(nf + 1, sizeof(*locp));
    Line *line = calloc(nf + 1, sizeof(*line));
    Line **linep = calloc(nf + 1, sizeof(*linep));
    Function *fn = NULL, **fnp = NULL;
    Mapping *map = NULL, **mapp = NULL;
    char **strs = NULL;
    int64_t comment;
    int rc = 0;
    if (rp_strtab_init(&p.str) || !smp || !smpp || !vals || !lab || !labp || !locids || !loc ||
        !locp || !line || !linep)
        goto oom;

    int64_t s_samples = pstr(&p, "samples"), s_count = pstr(&p, "count"), s_cpu = pstr(&p, "cpu"),
            s_ns = pstr(&p, "nanoseconds"), s_pid = pstr(&p, "pid"), s_tid = pstr(&p, "tid"),
            s_comm = pstr(&p, "comm"), s_exe = pstr(&p, "exe"), s_cgroup = pstr(&p, "cgroup");
    comment = pstr(&p, "stacksnap");
    if (r->off_cpu) s_cpu = pstr(&p, "off_cpu");
    int64_t types[3][2] = {{s_samples, s_count}, {s_cpu, s_ns}, {s_cpu, s_ns}};
    for (int i = 0; i < 3; i++) {
        perftools__profiles__value_type__init(&vt[i]);
        vt[i].type = types[i][0];
        vt[i].unit = types[i][1];
    }

    /* locations: one per distinct frame, id = frame index + 1 */
    for (size_t i = 0; i < nf; i++) {
        const struct rp_frame *fr = &r->frames[i];
        perftools__profiles__location__init(&loc[i]);
        perftools__profiles__line__init(&line[i]);
        loc[i].id = i + 1;
        loc[i].mapping_id = map_of(&p, fr);
        if (fr->kind == SS_FRAME_NATIVE || fr->kind == SS_FRAME_KERNEL) loc[i].address = fr->addr;
        line[i].function_id = func_of(&p, fr);
        if (fr->kind == SS_FRAME_LUA && fr->module) line[i].line = fr->line;
        linep[i] = &line[i];
        loc[i].n_line = 1;
        loc[i].line = &linep[i];
        locp[i] = &loc[i];
    }

    /* samples: one per key */
    for (size_t i = 0; i < ns; i++) {
        const struct rp_stack *s = &r->stacks[i];
        Sample *sm = &smp[i];
        perftools__profiles__sample__init(sm);
        for (uint32_t j = 0; j < s->nframes; j++)
            locids[s->first + j] = (uint64_t)r->fids[s->first + j] + 1;
        sm->n_location_id = s->nframes;
        sm->location_id = locids + s->first;
        vals[2 * i] = (int64_t)s->n;
        vals[2 * i + 1] = (int64_t)(s->count * (r->off_cpu ? 1000 : r->period_ns));
        sm->n_value = 2;
        sm->value = &vals[2 * i];
        Label *l = &lab[NLAB * i];
        for (int k = 0; k < NLAB; k++) {
            perftools__profiles__label__init(&l[k]);
            labp[NLAB * i + k] = &l[k];
        }
        l[0].key = s_pid;
        l[0].num = s->pid;
        l[1].key = s_tid;
        l[1].num = s->tid;
        l[2].key = s_comm;
        l[2].str = pstr(&p, rp_comm(r, s));
        sm->n_label = 3;
        const struct rp_plabel *pl = rp_plabel_of(r, s->pid);
        if (pl && pl->exe >= 0) {
            l[sm->n_label].key = s_exe;
            l[sm->n_label++].str = pstr(&p, rp_s(r, (uint32_t)pl->exe));
        }
        if (pl && pl->cgroup >= 0) {
            l[sm->n_label].key = s_cgroup;
            l[sm->n_label++].str = pstr(&p, rp_s(r, (uint32_t)pl->cgroup));
        }
        sm->label = &labp[NLAB * i];
        smpp[i] = sm;
    }

    fn = calloc(p.nfuncs + 1, sizeof(*fn));
    fnp = calloc(p.nfuncs + 1, sizeof(*fnp));
    map = calloc(p.nmaps + 1, sizeof(*map));
    mapp = calloc(p.nmaps + 1, sizeof(*mapp));
    if (!fn || !fnp || !map || !mapp) goto oom;
    for (size_t i = 0; i < p.nfuncs; i++) {
        perftools__profiles__function__init(&fn[i]);
        fn[i].id = i + 1;
        fn[i].name = p.funcs[i].name;
        fn[i].system_name = p.funcs[i].system_name;
        fn[i].filename = p.funcs[i].filename;
        fn[i].start_line = p.funcs[i].start_line;
        fnp[i] = &fn[i];
    }
    for (size_t i = 0; i < p.nmaps; i++) {
        const struct pmap *m = &p.maps[i];
        char hex[41];
        for (unsigned k = 0; k < m->build_id_len; k++)
            snprintf(hex + 2 * k, 3, "%02x", m->build_id[k]);
        hex[2 * m->build_id_len] = '\0';
        perftools__profiles__mapping__init(&map[i]);
        map[i].id = i + 1;
        map[i].memory_start = m->lo;
        map[i].memory_limit = m->hi + 1;
        map[i].file_offset = m->lo_off;
        map[i].filename = pstr(&p, rp_s(r, m->module));
        map[i].build_id = pstr(&p, hex);
        map[i].has_functions = m->all_named;
        mapp[i] = &map[i];
    }
    if (p.oom || !(strs = calloc(p.str.n, sizeof(*strs)))) goto oom;
    for (size_t i = 0; i < p.str.n; i++)
        strs[i] = (char *)rp_str(&p.str, (uint32_t)i);

    Profile prof;
    perftools__profiles__profile__init(&prof);
    prof.n_sample_type = 2;
    ValueType *vtp[2] = {&vt[0], &vt[1]};
    prof.sample_type = vtp;
    prof.n_sample = ns;
    prof.sample = smpp;
    prof.n_mapping = p.nmaps;
    prof.mapping = mapp;
    prof.n_location = nf;
    prof.location = locp;
    prof.n_function = p.nfuncs;
    prof.function = fnp;
    prof.n_string_table = p.str.n;
    prof.string_table = strs;
    prof.time_nanos = r->wall_start_ns;
    prof.duration_nanos = r->tmax >= r->tmin ? (int64_t)(r->tmax - r->tmin + r->period_ns) : 0;
    prof.period_type = &vt[2];
    prof.period = r->off_cpu ? 1 : (int64_t)r->period_ns;
    prof.n_comment = 1;
    prof.comment = &comment;
    prof.default_sample_type = s_cpu;
    rc = pack(&prof, f, err);
    goto out;
oom:
    ss_err_set(err, -ENOMEM, "pprof output: out of memory");
    rc = -ENOMEM;
out:
    free(smp);
    free(smpp);
    free(vals);
    free(lab);
    free(labp);
    free(locids);
    free(loc);
    free(locp);
    free(line);
    free(linep);
    free(fn);
    free(fnp);
    free(map);
    free(mapp);
    free(strs);
    pp_free(&p);
    return rc;
}
