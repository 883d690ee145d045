/* report/otlp: the aggregated report as an OTLP profiles
 * ExportProfilesServiceRequest (opentelemetry.proto.profiles.v1development,
 * proto release 1.11.0, via protobuf-c from Debian's opentelemetry-proto):
 * one ResourceProfiles per process, one shared ProfilesDictionary whose
 * tables hold their zero value at index 0. docs/otlp.md has the mapping. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"
#include "stacksnap/version.h"

int ss_report_set_clock(struct ss_report *r, int64_t mono_to_real_ns, const char *host,
                        const char *service, struct ss_err *err)
{
    int64_t h = host && *host ? rp_str_intern(&r->str, host, strlen(host)) : 0;
    int64_t s = service && *service ? rp_str_intern(&r->str, service, strlen(service)) : 0;
    if (h < 0 || s < 0) {
        ss_err_set(err, -ENOMEM, "report: out of memory");
        return -ENOMEM;
    }
    r->have_clock = true;
    r->mono_to_real_ns = mono_to_real_ns;
    r->host = (uint32_t)h;
    r->service = (uint32_t)s;
    return 0;
}

#ifndef SS_HAVE_OTLP
bool ss_report_otlp_built(void)
{
    return false;
}

int ss_report_write_otlp(const struct ss_report *r, FILE *f, struct ss_err *err)
{
    (void)r;
    (void)f;
    ss_err_set(err, -ENOTSUP, "OTLP output: not built in (no opentelemetry-proto 1.11.0)");
    return -ENOTSUP;
}
#else
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "report/otlp_int.h"

bool ss_report_otlp_built(void)
{
    return true;
}

#define PP(n) opentelemetry__proto__profiles__v1development__##n
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary Dict;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles RProf;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles SProf;
typedef Opentelemetry__Proto__Profiles__V1development__Profile Prof;
typedef Opentelemetry__Proto__Profiles__V1development__Link Link;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType VType;
typedef Opentelemetry__Proto__Profiles__V1development__Sample Smp;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping Map;
typedef Opentelemetry__Proto__Profiles__V1development__Stack Stk;
typedef Opentelemetry__Proto__Profiles__V1development__Location Loc;
typedef Opentelemetry__Proto__Profiles__V1development__Line Ln;
typedef Opentelemetry__Proto__Profiles__V1development__Function Fn;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit KVU;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyV;
typedef Opentelemetry__Proto__Common__V1__KeyValue KV;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope Scope;
typedef Opentelemetry__Proto__Resource__V1__Resource Res;
typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest Req;

/* One process: its resource, scope and profile. */
#define NRES                                                                                       \
    6 /* service.name, process.pid, .executable.name, .executable.path, container.id, host.name */
struct ogroup {
    RProf rp;
    Res res;
    SProf sp, *spp;
    Scope scope;
    Prof prof, *profp;
    KV kv[NRES], *kvp[NRES];
    AnyV av[NRES];
    int64_t sval[NRES]; /* resource string ids (x.res), -1: an int */
    size_t n;
};

/* The message's arrays, freed together. */
struct omsg {
    Loc *loc, **locp;
    Ln *ln, **lnp;
    int32_t *locattr, *fmap;
    Smp *smp, **smpp;
    int32_t *sattr;
    int64_t *vals;
    uint64_t *tss;
    size_t *evpos;
    uint32_t *order;
    struct ogroup *grp;
    RProf **rpp;
    Map *map, **mapp;
    int32_t *mattr;
    uint64_t *mlo, *mhi, *moff;
    Fn *fn, **fnp;
    Stk *stk, **stkp;
    int32_t *li;
    KVU *kvu, **kvup;
    AnyV *kav;
    char **strs, **rstrs;
};

static void omsg_free(struct omsg *m)
{
    void *p[] = {m->loc,   m->locp,  m->ln,  m->lnp,   m->locattr, m->fmap, m->smp,  m->smpp,
                 m->sattr, m->vals,  m->tss, m->evpos, m->order,   m->grp,  m->rpp,  m->map,
                 m->mapp,  m->mattr, m->mlo, m->mhi,   m->moff,    m->fn,   m->fnp,  m->stk,
                 m->stkp,  m->li,    m->kvu, m->kvup,  m->kav,     m->strs, m->rstrs};
    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
        free(p[i]);
}

struct file_out {
    ProtobufCBuffer base;
    FILE *f;
    int rc;
    struct ss_err *err;
};

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    struct file_out *o = (struct file_out *)b;
    if (!o->rc) o->rc = rp_fwrite(o->f, data, len, "OTLP output", o->err);
}

#define CALLOC(p, n) ((p) = calloc((n) + 1, sizeof(*(p))))

/* Locations: one per report frame, index = frame index + 1. */
static int build_locations(struct ox *x, struct omsg *m)
{
    const struct ss_report *r = x->r;
    size_t nf = r->nframes;
    if (!CALLOC(m->loc, nf) || !CALLOC(m->locp, nf) || !CALLOC(m->ln, nf) || !CALLOC(m->lnp, nf) ||
        !CALLOC(m->locattr, nf) || !CALLOC(m->fmap, nf))
        return -ENOMEM;
    for (size_t i = 0; i <= nf; i++) {
        PP(location__init)(&m->loc[i]);
        m->locp[i] = &m->loc[i];
    }
    for (size_t i = 0; i < nf; i++) {
        const struct rp_frame *fr = &r->frames[i];
        Loc *l = &m->loc[i + 1];
        l->mapping_index = m->fmap[i] = ox_map(x, fr);
        if (fr->kind == SS_FRAME_NATIVE || fr->kind == SS_FRAME_KERNEL) l->address = fr->addr;
        int32_t fn = ox_func(x, fr);
        if (fn) {
            Ln *ln = &m->ln[i + 1];
            PP(line__init)(ln);
            ln->function_index = fn;
            if (fr->kind == SS_FRAME_LUA && fr->module) ln->line = fr->line;
            m->lnp[i + 1] = ln;
            l->n_lines = 1;
            l->lines = &m->lnp[i + 1];
        }
        m->locattr[i + 1] = ox_attr_str(x, "profile.frame.type",
                                        fr->kind == SS_FRAME_LUA      ? "luajit"
                                        : fr->kind == SS_FRAME_KERNEL ? "kernel"
                                                                      : "native");
        l->n_attribute_indices = 1;
        l->attribute_indices = &m->locattr[i + 1];
    }
    return x->oom ? -ENOMEM : 0;
}

/* Samples, grouped by process; values and timestamps (opts.timestamps with a
 * clock: one entry per add, else one aggregated value). */
static int build_samples(struct ox *x, struct omsg *m, size_t *ngroups)
{
    const struct ss_report *r = x->r;
    size_t ns = r->nstacks, ne = r->nevents;
    bool ts = r->timestamps && r->have_clock;
    bool all_one = true;
    for (size_t i = 0; ts && i < ne; i++)
        if (r->events[i].count != 1) all_one = false;
    bool want_vals = !ts || r->off_cpu || !all_one; /* else timestamps only (value 1 each) */
    if (!CALLOC(x->stack_of, ns) || !CALLOC(m->order, ns) || !CALLOC(m->smp, ns) ||
        !CALLOC(m->smpp, ns) || !CALLOC(m->sattr, 2 * ns) || !CALLOC(m->vals, ts ? ne : ns) ||
        !CALLOC(m->tss, ts ? ne : 0) || !CALLOC(m->evpos, ns))
        return -ENOMEM;
    for (size_t i = 0; i < ns; i++) {
        x->stack_of[i] = ox_stack(x, (uint32_t)i);
        m->order[i] = (uint32_t)i;
    }
    qsort_r(m->order, ns, sizeof(*m->order), ox_by_pid, (void *)r);
    /* each stack's events: evpos[stack] = its first slot, in the grouped order */
    size_t *first = NULL;
    if (ts) {
        if (!CALLOC(first, ns)) return -ENOMEM;
        for (size_t i = 0; i < ne; i++)
            m->evpos[r->events[i].stack]++;
        size_t at = 0;
        for (size_t k = 0; k < ns; k++) {
            uint32_t i = m->order[k];
            size_t n = m->evpos[i];
            first[i] = m->evpos[i] = at;
            at += n;
        }
        for (size_t i = 0; i < ne; i++) {
            const struct rp_event *e = &r->events[i];
            size_t p = m->evpos[e->stack]++;
            m->tss[p] = e->time_ns ? (uint64_t)((int64_t)e->time_ns + r->mono_to_real_ns) : 0;
            m->vals[p] = (int64_t)(r->off_cpu ? (uint64_t)e->count * 1000 : e->count);
        }
    }
    size_t g = 0;
    for (size_t k = 0; k < ns; k++) {
        uint32_t i = m->order[k];
        const struct rp_stack *s = &r->stacks[i];
        Smp *sm = &m->smp[k];
        PP(sample__init)(sm);
        sm->stack_index = x->stack_of[i];
        m->sattr[2 * k] = ox_attr_int(x, "thread.id", s->tid);
        m->sattr[2 * k + 1] = ox_attr_str(x, "thread.name", rp_comm(r, s));
        sm->n_attribute_indices = 2;
        sm->attribute_indices = &m->sattr[2 * k];
        if (ts) {
            size_t n = m->evpos[i] - first[i];
            sm->n_timestamps_unix_nano = n;
            sm->timestamps_unix_nano = &m->tss[first[i]];
            sm->n_values = want_vals ? n : 0;
            sm->values = &m->vals[first[i]];
        } else {
            m->vals[k] = (int64_t)(r->off_cpu ? s->count * 1000 : s->count);
            sm->n_values = 1;
            sm->values = &m->vals[k];
        }
        m->smpp[k] = sm;
        if (!k || r->stacks[m->order[k - 1]].pid != s->pid) g++;
    }
    free(first);
    *ngroups = g;
    return x->oom ? -ENOMEM : 0;
}

static int64_t rstr(struct ox *x, const char *s)
{
    return ox_str_in(x, &x->res, s);
}

/* A container id: 64 hex digits (the agent's cgroup label), else none. */
static bool is_container_id(const char *s)
{
    size_t n = 0;
    while ((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))
        n++;
    return n == 64 && !s[n];
}

/* One ResourceProfiles per process: resource attributes (strings as ids in
 * x.res, resolved once every string is in), one scope, one profile. */
static int build_groups(struct ox *x, struct omsg *m, size_t ng, const VType *st, const VType *pt)
{
    const struct ss_report *r = x->r;
    if (!CALLOC(m->grp, ng) || !CALLOC(m->rpp, ng)) return -ENOMEM;
    uint64_t t0 = 0, dur = 0;
    if (r->tmax >= r->tmin && r->tmin != UINT64_MAX) {
        uint64_t lo = (uint64_t)((int64_t)r->tmin + r->mono_to_real_ns);
        uint64_t hi = (uint64_t)((int64_t)r->tmax + r->mono_to_real_ns) + r->period_ns;
        t0 = r->wall_start_ns > 0 ? (uint64_t)r->wall_start_ns : lo;
        dur = r->have_clock && hi > t0 ? hi - t0 : 0;
        if (!r->have_clock && r->wall_start_ns <= 0) t0 = 0;
    } else if (r->wall_start_ns > 0) {
        t0 = (uint64_t)r->wall_start_ns;
    }
    size_t k = 0;
    for (size_t gi = 0; gi < ng; gi++) {
        struct ogroup *g = &m->grp[gi];
        size_t k0 = k;
        uint32_t pid = r->stacks[m->order[k]].pid;
        const struct rp_stack *main = &r->stacks[m->order[k]];
        while (k < r->nstacks && r->stacks[m->order[k]].pid == pid) {
            if (r->stacks[m->order[k]].tid == pid) main = &r->stacks[m->order[k]];
            k++;
        }
        const char *comm = main->comm ? rp_s(r, main->comm) : "unknown_service";
        const struct rp_plabel *pl = rp_plabel_of(r, pid);
        const char *exe = pl && pl->exe >= 0 ? rp_s(r, (uint32_t)pl->exe) : NULL;
        const char *cg = pl && pl->cgroup >= 0 ? rp_s(r, (uint32_t)pl->cgroup) : NULL;
        size_t n = 0;
        const char *key[NRES];
        key[n] = "service.name";
        g->sval[n++] = rstr(x, r->service ? rp_s(r, r->service) : comm);
        key[n] = "process.pid";
        g->sval[n] = -1;
        g->av[n++].int_value = pid;
        key[n] = "process.executable.name";
        g->sval[n++] = rstr(x, exe && *exe ? rp_basename(exe) : comm);
        if (exe && *exe) {
            key[n] = "process.executable.path";
            g->sval[n++] = rstr(x, exe);
        }
        if (cg && is_container_id(cg)) {
            key[n] = "container.id";
            g->sval[n++] = rstr(x, cg);
        }
        if (r->host) {
            key[n] = "host.name";
            g->sval[n++] = rstr(x, rp_s(r, r->host));
        }
        for (size_t j = 0; j < n; j++) {
            int64_t iv = g->av[j].int_value;
            opentelemetry__proto__common__v1__key_value__init(&g->kv[j]);
            opentelemetry__proto__common__v1__any_value__init(&g->av[j]);
            g->kv[j].key = (char *)key[j];
            g->kv[j].value = &g->av[j];
            if (g->sval[j] < 0) {
                g->av[j].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
                g->av[j].int_value = iv;
            }
            g->kvp[j] = &g->kv[j];
        }
        g->n = n;
        opentelemetry__proto__resource__v1__resource__init(&g->res);
        g->res.n_attributes = n;
        g->res.attributes = g->kvp;
        opentelemetry__proto__common__v1__instrumentation_scope__init(&g->scope);
        g->scope.name = "stacksnap";
        g->scope.version = SS_VERSION;
        PP(profile__init)(&g->prof);
        g->prof.sample_type = (VType *)st;
        g->prof.n_samples = k - k0;
        g->prof.samples = &m->smpp[k0];
        g->prof.time_unix_nano = t0;
        g->prof.duration_nano = dur;
        g->prof.period_type = (VType *)pt;
        g->prof.period = r->off_cpu ? 1 : (int64_t)r->period_ns;
        g->profp = &g->prof;
        PP(scope_profiles__init)(&g->sp);
        g->sp.scope = &g->scope;
        g->sp.n_profiles = 1;
        g->sp.profiles = &g->profp;
        g->spp = &g->sp;
        PP(resource_profiles__init)(&g->rp);
        g->rp.resource = &g->res;
        g->rp.n_scope_profiles = 1;
        g->rp.scope_profiles = &g->spp;
        m->rpp[gi] = &g->rp;
    }
    return x->oom ? -ENOMEM : 0;
}

/* Mappings: address range and file offset from the frames that use them,
 * the build-id as an attribute. Before build_dict (it adds attributes). */
static int build_maps(struct ox *x, struct omsg *m)
{
    const struct ss_report *r = x->r;
    size_t nm = x->maps.n;
    if (!CALLOC(m->map, nm) || !CALLOC(m->mapp, nm) || !CALLOC(m->mattr, nm) ||
        !CALLOC(m->mlo, nm) || !CALLOC(m->mhi, nm) || !CALLOC(m->moff, nm))
        return -ENOMEM;
    for (size_t i = 0; i < nm; i++)
        m->mlo[i] = UINT64_MAX;
    for (size_t i = 0; i < r->nframes; i++) {
        int32_t j = m->fmap[i];
        const struct rp_frame *fr = &r->frames[i];
        if (!j) continue;
        if (fr->addr < m->mlo[j]) {
            m->mlo[j] = fr->addr;
            m->moff[j] = fr->offset;
        }
        if (fr->addr > m->mhi[j]) m->mhi[j] = fr->addr;
    }
    for (size_t i = 0; i < nm; i++) {
        Map *mp = &m->map[i];
        PP(mapping__init)(mp);
        m->mapp[i] = mp;
        if (!i) continue;
        const struct omap *om = (const struct omap *)(x->maps.v + i * sizeof(*om));
        mp->memory_start = m->mlo[i];
        mp->memory_limit = m->mhi[i] + 1;
        mp->file_offset = m->moff[i];
        mp->filename_strindex = ox_str(x, rp_s(r, om->module));
        if (om->build_id_len) {
            char hex[2 * sizeof(om->build_id) + 1];
            for (unsigned k = 0; k < om->build_id_len && k < sizeof(om->build_id); k++)
                snprintf(hex + 2 * k, 3, "%02x", om->build_id[k]);
            m->mattr[i] = ox_attr_str(x, "process.executable.build_id.gnu", hex);
            mp->n_attribute_indices = 1;
            mp->attribute_indices = &m->mattr[i];
        }
    }
    return x->oom ? -ENOMEM : 0;
}

/* Functions, stacks, attributes and strings, last (every string is in). */
static int build_dict(struct ox *x, struct omsg *m, Dict *d, Link *link, Link **linkp)
{
    const struct ss_report *r = x->r;
    size_t nfn = x->funcs.n, nst = x->stacks.n, na = x->attrs.n;
    if (!CALLOC(m->fn, nfn) || !CALLOC(m->fnp, nfn) || !CALLOC(m->stk, nst) ||
        !CALLOC(m->stkp, nst) || !CALLOC(m->li, r->nfids) || !CALLOC(m->kvu, na) ||
        !CALLOC(m->kvup, na) || !CALLOC(m->kav, na) || !CALLOC(m->strs, x->str.n) ||
        !CALLOC(m->rstrs, x->res.n))
        return -ENOMEM;
    for (size_t i = 0; i < x->str.n; i++)
        m->strs[i] = (char *)rp_str(&x->str, (uint32_t)i);
    for (size_t i = 0; i < x->res.n; i++)
        m->rstrs[i] = (char *)rp_str(&x->res, (uint32_t)i);
    for (size_t i = 0; i < nfn; i++) {
        const struct ofunc *f = (const struct ofunc *)(x->funcs.v + i * sizeof(*f));
        PP(function__init)(&m->fn[i]);
        m->fn[i].name_strindex = f->name;
        m->fn[i].system_name_strindex = f->sys;
        m->fn[i].filename_strindex = f->file;
        m->fn[i].start_line = f->start;
        m->fnp[i] = &m->fn[i];
    }
    for (size_t i = 0; i < nst; i++) {
        PP(stack__init)(&m->stk[i]);
        m->stkp[i] = &m->stk[i];
        if (!i) continue;
        const struct ostack *o = (const struct ostack *)(x->stacks.v + i * sizeof(*o));
        const struct rp_stack *s = &r->stacks[o->report_stack];
        for (uint32_t j = 0; j < s->nframes; j++) /* leaf first, as the report keeps them */
            m->li[s->first + j] = (int32_t)r->fids[s->first + j] + 1;
        m->stk[i].n_location_indices = s->nframes;
        m->stk[i].location_indices = &m->li[s->first];
    }
    for (size_t i = 0; i < na; i++) {
        PP(key_value_and_unit__init)(&m->kvu[i]);
        m->kvup[i] = &m->kvu[i];
        if (!i) continue;
        const struct oattr *a = (const struct oattr *)(x->attrs.v + i * sizeof(*a));
        AnyV *v = &m->kav[i];
        opentelemetry__proto__common__v1__any_value__init(v);
        if (a->is_str) {
            v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
            v->string_value = m->rstrs[a->v];
        } else {
            v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
            v->int_value = a->v;
        }
        m->kvu[i].key_strindex = a->key;
        m->kvu[i].value = v;
    }
    /* link_table[0]: 16 and 8 zero bytes, as the schema recommends */
    static const uint8_t zeros[16];
    PP(link__init)(link);
    link->trace_id = (ProtobufCBinaryData){16, (uint8_t *)zeros};
    link->span_id = (ProtobufCBinaryData){8, (uint8_t *)zeros};
    *linkp = link;
    PP(profiles_dictionary__init)(d);
    d->n_mapping_table = x->maps.n;
    d->mapping_table = m->mapp;
    d->n_location_table = r->nframes + 1;
    d->location_table = m->locp;
    d->n_function_table = nfn;
    d->function_table = m->fnp;
    d->n_link_table = 1;
    d->link_table = linkp;
    d->n_string_table = x->str.n;
    d->string_table = m->strs;
    d->n_attribute_table = na;
    d->attribute_table = m->kvup;
    d->n_stack_table = nst;
    d->stack_table = m->stkp;
    return 0;
}

int ss_report_write_otlp(const struct ss_report *r, FILE *f, struct ss_err *err)
{
    struct ox x = {.r = r};
    struct omsg m = {0};
    size_t ng = 0;
    int rc = -ENOMEM;
    if (rp_strtab_init(&x.str) || rp_strtab_init(&x.res)) goto out;
    ox_tab_init(&x, &x.attrs, sizeof(struct oattr));
    ox_tab_init(&x, &x.funcs, sizeof(struct ofunc));
    ox_tab_init(&x, &x.maps, sizeof(struct omap));
    ox_tab_init(&x, &x.stacks, sizeof(struct ostack));
    VType st, pt;
    PP(value_type__init)(&st);
    PP(value_type__init)(&pt);
    st.type_strindex = ox_str(&x, r->off_cpu ? "off_cpu" : "samples");
    st.unit_strindex = ox_str(&x, r->off_cpu ? "nanoseconds" : "count");
    pt.type_strindex = ox_str(&x, r->off_cpu ? "off_cpu" : "cpu");
    pt.unit_strindex = ox_str(&x, "nanoseconds");
    if (x.oom || build_locations(&x, &m) || build_samples(&x, &m, &ng) ||
        (ng && build_groups(&x, &m, ng, &st, &pt)) || build_maps(&x, &m))
        goto out;
    Dict d;
    Link link, *linkp;
    if (build_dict(&x, &m, &d, &link, &linkp)) goto out;
    for (size_t i = 0; i < ng; i++) /* resource strings: all in now */
        for (size_t j = 0; j < m.grp[i].n; j++)
            if (m.grp[i].sval[j] >= 0) {
                m.grp[i].av[j].value_case =
                    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
                m.grp[i].av[j].string_value = m.rstrs[m.grp[i].sval[j]];
            }
    Req req;
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(
        &req);
    req.n_resource_profiles = ng;
    req.resource_profiles = m.rpp;
    req.dictionary = &d;
    struct file_out o = {.base.append = file_append, .f = f, .err = err};
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack_to_buffer(
        &req, &o.base);
    rc = o.rc ? o.rc : rp_fflush(f, "OTLP output", err);
out:
    if (rc == -ENOMEM) ss_err_set(err, -ENOMEM, "OTLP output: out of memory");
    omsg_free(&m);
    ox_free(&x);
    return rc;
}
#endif
