/* unwind/lua.c: LuaJIT frames in ss_unwind (see lua.h).
 *
 * Per process, the executable file mappings are checked once per mapping
 * generation for LuaJIT (verdicts cached per file, by build-id or dev/inode,
 * so libc is inspected once per unwinder), and each LuaJIT module gets a
 * runtime that lives as long as the module stays mapped at the same bias (its
 * prototype caches survive map refreshes).
 *
 * A sample whose leaf ip is in a VM starts the native walk at the VM frame's
 * true caller (ss_lj_leaf_cfa: .eh_frame is off by 8 inside VM helpers);
 * everything else is a plain native walk. ss_lj_splice then replaces each VM
 * frame by the Lua frames of the segment it runs. */
#include "unwind/lua.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf/elf.h"
#include "process/perfmap.h"
#include "process/process.h"
#include "stacksnap/ss_lj_luajit.h"
#include "symbolize/symbolize.h"
#include "unwind/luajit/detcache.h"
#include "unwind/luajit/ljregs.h"

#define MAX_RTS 8

struct verdict {
    uint8_t id[20], id_len;
    uint64_t dev, ino, size;
    bool is_luajit;
    struct ss_lj_elfinfo info;
};

/* Replay replaces a process's bundle at every recorded mapping change, where
 * the live unwinder keeps it (and its runtimes) across map refreshes. To
 * walk with the same caches, and so make the same reads, an offline
 * unwinder parks the runtimes of a replaced bundle and hands them to the
 * next bundle of that pid for the same file at the same bias. */
#define MAX_PARKED 16
struct parked {
    uint32_t pid;
    struct verdict id; /* file identity (id, dev/ino/size) */
    int64_t bias;
    struct ss_lj_runtime *rt;
};

struct ss_lua_detect {
    struct verdict *v;
    size_t n, cap;
    struct parked park[MAX_PARKED];
    unsigned npark;
};

#define LRT_PATH 192
struct lrt {
    const struct ss_elf *elf;
    int64_t bias;
    struct ss_lj_runtime *rt;
    char path[LRT_PATH]; /* the mapped file, for diagnostics */
    unsigned said;       /* SS_LJS_* reported by ss_unwinder_lj_news */
};

/* A file with LuaJIT's API but no usable VM (detection's verdict), for
 * diagnostics. */
#define MAX_NOVM 4
struct novm {
    const struct ss_elf *elf;
    int64_t bias;
    char path[LRT_PATH];
    struct ss_lj_elfinfo info;
    bool said;
};

struct ulua {
    struct ss_lua_detect *d; /* offline unwinders only: where to park runtimes */
    uint32_t pid;
    uint64_t gen; /* process generation the list was built for */
    bool scanned;
    struct lrt rts[MAX_RTS];
    unsigned n;
    struct novm novm[MAX_NOVM];
    unsigned nnovm;
    struct ss_lj_native *natives;
    struct ss_lj_item *items;
    unsigned cap;
    uint32_t *tokens;      /* per native frame: ss_lj_trace_cfa token, 0 = not a trace */
    unsigned tcap, tdirty; /* tokens[tdirty..tcap) are zero */
    bool exit_leaf;        /* this sample's leaf is in the trace exit handler: not the VM's top */
    uint64_t plan_key;     /* the window plan last handed out (ss_lj_runtime_plan), 0: none */
    uint64_t epoch;        /* lua_state calls: the walker may have changed its state (memo.h) */
};

static void set_id(struct verdict *v, const struct ss_elf *e)
{
    memset(v, 0, sizeof(*v));
    memcpy(v->id, e->build_id, e->build_id_len);
    v->id_len = e->build_id_len;
    v->dev = e->dev;
    v->ino = e->ino;
    v->size = e->fsize;
}

static void park(struct ss_lua_detect *d, uint32_t pid, const struct lrt *r)
{
    if (d->npark == MAX_PARKED) { /* drop the oldest */
        ss_lj_runtime_free(d->park[0].rt);
        memmove(&d->park[0], &d->park[1], (MAX_PARKED - 1) * sizeof(d->park[0]));
        d->npark--;
    }
    struct parked *pk = &d->park[d->npark++];
    pk->pid = pid;
    set_id(&pk->id, r->elf);
    pk->bias = r->bias;
    pk->rt = r->rt;
}

static void ulua_free(void *p)
{
    struct ulua *l = p;
    for (unsigned i = 0; i < l->n; i++) {
        if (l->d && l->rts[i].rt)
            park(l->d, l->pid, &l->rts[i]);
        else
            ss_lj_runtime_free(l->rts[i].rt);
    }
    free(l->natives);
    free(l->items);
    free(l->tokens);
    free(l);
}

void ss_lua_detect_cache_free(struct ss_unwinder *u)
{
    if (!u->lua_detect) return;
    for (unsigned i = 0; i < u->lua_detect->npark; i++)
        ss_lj_runtime_free(u->lua_detect->park[i].rt);
    free(u->lua_detect->v);
    free(u->lua_detect);
    u->lua_detect = NULL;
}

static bool same_file(const struct verdict *v, const struct ss_elf *e)
{
    if (e->build_id_len)
        return v->id_len == e->build_id_len && !memcmp(v->id, e->build_id, e->build_id_len);
    return !v->id_len && v->dev == e->dev && v->ino == e->ino && v->size == e->fsize;
}

/* Detection verdict for e, computed once per unwinder. */
static const struct verdict *detect(struct ss_unwinder *u, const struct ss_elf *e)
{
    struct ss_lua_detect *d = u->lua_detect;
    if (!d && !(d = u->lua_detect = calloc(1, sizeof(*d)))) return NULL;
    for (size_t i = 0; i < d->n; i++)
        if (same_file(&d->v[i], e)) return &d->v[i];
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 32;
        struct verdict *nv = realloc(d->v, cap * sizeof(*nv));
        if (!nv) return NULL;
        d->v = nv;
        d->cap = cap;
    }
    struct verdict *v = &d->v[d->n++];
    set_id(v, e);
    v->is_luajit =
        ss_lj_detcache_get(u->ljc, e, &v->info) == 0 && v->info.is_luajit && v->info.vm_found;
    return v;
}

/* Remember a mapped file with LuaJIT's API but no usable VM (once). */
static void note_novm(struct ulua *l, const struct ss_mapping *m, const struct ss_lj_elfinfo *info)
{
    for (unsigned i = 0; i < l->nnovm; i++)
        if (l->novm[i].elf == m->elf && l->novm[i].bias == m->bias) return;
    if (l->nnovm == MAX_NOVM) return;
    struct novm *x = &l->novm[l->nnovm++];
    x->elf = m->elf;
    x->bias = m->bias;
    snprintf(x->path, sizeof(x->path), "%s", m->d.path ? m->d.path : "");
    x->info = *info;
    x->said = false;
}

/* Rebuild the runtime list after the process's mappings changed. */
static void scan(struct ss_unwinder *u, struct ss_uproc *up, struct ulua *l)
{
    size_t n;
    const struct ss_mapping *m = ss_proc_mappings(up->proc, &n);
    struct lrt keep[MAX_RTS];
    unsigned nk = 0;
    for (size_t i = 0; i < n && nk < MAX_RTS; i++) {
        if (!m[i].elf || !(m[i].d.prot & SS_MAP_X)) continue;
        bool dup = false;
        for (unsigned k = 0; k < nk && !dup; k++)
            dup = keep[k].elf == m[i].elf && keep[k].bias == m[i].bias;
        if (dup) continue;
        const struct verdict *v = detect(u, m[i].elf);
        if (v && !v->is_luajit && v->info.is_luajit) note_novm(l, &m[i], &v->info);
        if (!v || !v->is_luajit) continue;
        struct lrt r = {.elf = m[i].elf, .bias = m[i].bias};
        snprintf(r.path, sizeof(r.path), "%s", m[i].d.path ? m[i].d.path : "");
        for (unsigned j = 0; j < l->n; j++) /* same module as before: keep its caches */
            if (l->rts[j].rt && l->rts[j].elf == r.elf && l->rts[j].bias == r.bias) {
                r.rt = l->rts[j].rt;
                r.said = l->rts[j].said;
                l->rts[j].rt = NULL;
            }
        struct ss_lua_detect *d = u->lua_detect;
        for (unsigned j = 0; !r.rt && l->d && j < d->npark; j++) /* replay: same caches */
            if (d->park[j].pid == up->pid && d->park[j].bias == r.bias &&
                same_file(&d->park[j].id, r.elf)) {
                r.rt = d->park[j].rt;
                memmove(&d->park[j], &d->park[j + 1], (d->npark - j - 1) * sizeof(d->park[0]));
                d->npark--;
            }
        if (!r.rt && ss_lj_runtime_new(&r.rt, &v->info, (uint64_t)r.bias, up->pid, NULL) == 0)
            ss_lj_runtime_check_guards(r.rt, u->o.lj_check_guards);
        if (!r.rt) continue;
        keep[nk++] = r;
    }
    for (unsigned j = 0; j < l->n; j++)
        ss_lj_runtime_free(l->rts[j].rt);
    memcpy(l->rts, keep, nk * sizeof(keep[0]));
    l->n = nk;
    l->gen = ss_proc_generation(up->proc);
    l->scanned = true;
}

static struct ulua *lua_state(struct ss_unwinder *u, struct ss_uproc *up)
{
    struct ulua *l = up->luajit;
    if (!l) {
        if (!(l = calloc(1, sizeof(*l)))) return NULL;
        up->luajit = l;
        up->luajit_free = ulua_free;
        l->pid = up->pid;
        if (u->o.offline && (u->lua_detect || (u->lua_detect = calloc(1, sizeof(*u->lua_detect)))))
            l->d = u->lua_detect;
    }
    l->epoch++;
    if (!l->scanned || l->gen != ss_proc_generation(up->proc)) scan(u, up, l);
    return l;
}

static int reserve(struct ulua *l, unsigned n)
{
    if (n <= l->cap) return 0;
    unsigned cap = n + 64;
    struct ss_lj_native *nn = realloc(l->natives, cap * sizeof(*nn));
    if (nn) l->natives = nn;
    struct ss_lj_item *ni = nn ? realloc(l->items, cap * sizeof(*ni)) : NULL;
    if (!ni) return -ENOMEM;
    l->items = ni;
    l->cap = cap;
    return 0;
}

/* The VM frame's caller, read from the VM frame at cfa (see ss_lj_leaf_cfa). */
static bool vm_caller(struct ss_mem *mem, uint64_t cfa, struct ss_native_frame *f)
{
    /* x86-64: [cfa-40 .. cfa-8]: r14, r15, rbx, rbp, ip (arm64: no walker yet) */
    uint64_t w[5];
    if (!LJ_WALKS || ss_mem_read(mem, cfa - 40, w, sizeof(w)) < 0) return false;
    struct ss_nregs r = {0};
    r.r[LJ_DR_DISPATCH] = w[0];
    r.r[LJ_DR_KBASE] = w[1];
    r.r[LJ_DR_PC] = w[2];
    r.r[LJ_DR_RB] = w[3];
    r.r[SS_DR_IP] = w[4];
    r.r[SS_DR_SP] = cfa;
    r.valid = SS_DBIT(LJ_DR_DISPATCH) | SS_DBIT(LJ_DR_KBASE) | SS_DBIT(LJ_DR_PC) |
              SS_DBIT(LJ_DR_RB) | SS_DBIT(SS_DR_IP) | SS_DBIT(SS_DR_SP);
    ss_native_frame_init(f, &r, false);
    return true;
}

/* Could ip be in LuaJIT trace code? That lives in anonymous mappings, which
 * LuaJIT flips between RW and RX while it assembles and patches traces, and
 * which may be newer than the mapping list: any anonymous or unknown
 * address qualifies; ss_lj_trace_cfa only accepts it inside a trace. */
static bool anon_code(struct ss_uproc *up, uint64_t ip)
{
    const struct ss_mapping *mp = ss_proc_find(up->proc, ip);
    return ip > 4096 && (!mp || (!mp->elf && !mp->d.path[0]));
}

/* The VM frame under trace code at nf[k]: its CFA (0 if ip is in no known
 * trace); l->tokens[k] names the validated trace sample for the splice. */
static uint64_t trace_frame(struct ss_uproc *up, struct ulua *l, struct ss_native_frame *nf,
                            unsigned k, bool exact, uint64_t time_ns)
{
    if (!l->n || (nf[k].flags & SS_NF_FILE) || !anon_code(up, ss_nf_ip(&nf[k]))) return 0;
    struct ss_lj_runtime *rts[MAX_RTS];
    uint64_t regs[SS_NREGS] = {0};
    uint64_t known = 0;
    for (unsigned i = 0; i < l->n; i++)
        rts[i] = l->rts[i].rt;
    for (unsigned r = 0; r < SS_NREGS; r++)
        if (ss_nf_reg(&nf[k], (enum ss_reg)r, &regs[r])) known |= 1ull << r;
    if (up->mem.track) up->mem.track->opaque = true; /* every register, the time (memo.c) */
    if (k >= l->tdirty) l->tdirty = k + 1;
    return ss_lj_trace_cfa(rts, l->n, &up->mem, ss_nf_ip(&nf[k]), exact, regs, known, time_ns,
                           &l->tokens[k]);
}

/* The VM frame under a trace that is exiting: nf[k] returns into
 * vm_exit_handler from lj_trace_exit (its rsp: where the ExitState is).
 * rbx and r15 there are the trace's, not the interpreter's PC and KBASE. */
static uint64_t exit_frame(struct ulua *l, struct ss_uproc *up, struct ss_native_frame *nf,
                           bool leaf)
{
    struct ss_lj_runtime *rts[MAX_RTS];
    uint64_t rsp = 0;
    for (unsigned i = 0; i < l->n; i++)
        rts[i] = l->rts[i].rt;
    uint64_t ip = ss_nf_ip(nf);
    if (!leaf && !ss_lj_exit_ret(rts, l->n, ip)) return 0; /* most frames: no need for rsp */
    if (!ss_nf_reg(nf, SS_REG_SP, &rsp)) return 0;
    uint64_t cfa = leaf ? ss_lj_exit_leaf_cfa(rts, l->n, &up->mem, ip, rsp)
                        : ss_lj_exit_cfa(rts, l->n, &up->mem, ip, rsp);
    if (cfa) nf->regs.valid &= ~(SS_DBIT(LJ_DR_PC) | SS_DBIT(LJ_DR_KBASE) | SS_DBIT(LJ_DR_RB));
    return cfa;
}

/* A stripped LuaJIT names its library C functions only MODULE+0xSTART
 * (symbolize.c: the start of their FDE). The frame right above one that
 * the Lua walk found to be a library function (os.clock, string.rep: ffid
 * > 1) is that function when its start is the GCfuncC's f: named as
 * LuaJIT's source names it, lj_cf_ and the library name (LJLIB_CF: os_clock;
 * io and string.buffer methods io_method_, buffer_method_). */
static void name_libcf(struct ss_strpool *pool, struct ss_frame *nat, const struct ss_lj_item *lua)
{
    const char *n = nat->name, *ln = lua->lua.name, *base;
    if (!lua->cf || !n || !ln || nat->system_name || !nat->module ||
        nat->addr - nat->sym_offset != lua->cf)
        return;
    base = strrchr(nat->module, '/');
    base = base && base[1] ? base + 1 : nat->module;
    size_t bl = strlen(base);
    if (strncmp(n, base, bl) || strncmp(n + bl, "+0x", 3)) return; /* a symbol: keep it */
    static const char *const meth[][2] = {{"file:", "io_method_"}, {"buffer:", "buffer_method_"}};
    char buf[96] = "lj_cf_";
    size_t k = 6;
    for (unsigned j = 0; j < 2; j++) {
        size_t ml = strlen(meth[j][0]);
        if (strncmp(ln, meth[j][0], ml)) continue;
        strcpy(buf + k, meth[j][1]);
        k += strlen(meth[j][1]);
        ln += ml;
    }
    for (; *ln && k + 1 < sizeof(buf); ln++) {
        char c = *ln;
        if (c == '.') c = '_';
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9')))
            return; /* builtin#N, or a name LuaJIT's sources do not spell so */
        buf[k++] = c;
    }
    if (*ln) return;
    buf[k] = 0;
    nat->name = ss_strpool_intern(pool, buf);
}

/* A frame in code without CFI that the native walk stepped over
 * (native_scan.c): its perf-map name (or symbol), else "[jit] MODULE" by the
 * mapping's basename, "[jit] [anon]" for anonymous memory. */
static void name_jit(struct ss_strpool *pool, struct ss_frame *f)
{
    f->flags |= SS_FF_NOCFI;
    if (f->name) return;
    const char *base = f->module ? strrchr(f->module, '/') : NULL;
    base = base && base[1] ? base + 1 : f->module;
    char buf[300];
    snprintf(buf, sizeof(buf), "[jit] %.280s", base && *base ? base : "[anon]");
    f->name = ss_strpool_intern(pool, buf);
    f->sym_offset = 0;
}

/* The native walk from nf[0]; with traces, a walk stops at a frame in
 * anonymous code (ss_native_unwind_held) for trace_frame to look at before
 * libunwind would guess there, and goes on from it (ss_native_unwind_on)
 * when it is in no trace: the frames are those of plain walks. */
static unsigned native_walk(struct ss_unwinder *u, struct ss_uproc *up, struct ulua *l,
                            const struct ss_sample *s, enum ss_trunc *why)
{
    struct ss_native_frame *nf = u->nf;
    unsigned max = u->o.max_frames, n;
    ss_native_frame_from_sample(&nf[0], s->regs);
    uint64_t ip = s->regs[SS_REG_IP], cfa = 0;
    if (l && l->tcap < max) {
        uint32_t *t = realloc(l->tokens, max * sizeof(*t));
        if (t) l->tokens = t, l->tcap = max, l->tdirty = max; /* all of it to clear */
    }
    bool traces = l && l->n && l->tcap >= max, held = false;
    /* tokens: zero but what the last walk may have set */
    if (l && l->tokens) memset(l->tokens, 0, l->tdirty * sizeof(*l->tokens));
    if (l) l->tdirty = 0;
    if (l) l->exit_leaf = false;
    for (unsigned i = 0; l && i < l->n && !cfa; i++) {
        if (!ss_lj_in_vm(l->rts[i].rt, ip)) continue;
        /* in the trace exit handler: the VM frame is the exiting trace's */
        if ((cfa = exit_frame(l, up, &nf[0], true))) {
            l->exit_leaf = true;
            break;
        }
        if (!(cfa = ss_lj_leaf_cfa(l->rts[i].rt, &up->mem, s->regs))) break;
    }
    /* leaf in trace code: no CFI there; the trace's stack adjustment
     * gives the VM frame */
    if (!cfa && traces) cfa = trace_frame(up, l, nf, 0, true, s->time_ns);
    if (cfa && max >= 2 && vm_caller(&up->mem, cfa, &nf[1])) {
        nf[0].cfa = cfa;
        n = 1 + (traces ? ss_native_unwind_held(up->np, &nf[1], max - 1, why, &held)
                        : ss_native_unwind(up->np, &nf[1], max - 1, why));
    } else {
        if (traces) l->tokens[0] = 0;
        if (l) l->exit_leaf = false;
        n = traces ? ss_native_unwind_held(up->np, nf, max, why, &held)
                   : ss_native_unwind(up->np, nf, max, why);
    }
    /* C code called from trace code: the native walk cannot step out of the
     * trace; restart it from the VM frame the trace runs on */
    for (unsigned k = 1; traces && k <= n && k < max; k++) {
        if (k == n) {
            /* the walk ended at a return address it would not take (trace
             * code in a mapping it does not know as executable): take it
             * only if it is in a trace */
            struct ss_native_frame tmp;
            enum ss_trunc w2;
            memset(&tmp, 0, sizeof(tmp));
            if (*why != SS_TRUNC_BADIP || ss_native_step(up->np, &nf[n - 1], &tmp, &w2) ||
                !ss_nf_ip(&tmp) || !(tmp.regs.valid & (SS_DBIT(SS_DR_SP))))
                break;
            nf[n] = tmp;
            if (!(cfa = trace_frame(up, l, nf, k, false, s->time_ns))) {
                /* in no trace known here (a process gone before its walk:
                 * its trace code is in no mapping the side band told):
                 * step over it as code without CFI (native_scan.c) */
                if (!anon_code(up, ss_nf_ip(&tmp)) || n + 1 > max) break;
                n = ss_native_unwind_on(up->np, nf, n + 1, max, why, &held);
                continue;
            }
            n++;
        } else if (!(nf[k].flags & SS_NF_EXACT) && (cfa = exit_frame(l, up, &nf[k], false))) {
            /* the trace's VM frame, found from the exit handler's state */
        } else if (!(cfa =
                         trace_frame(up, l, nf, k, (nf[k].flags & SS_NF_EXACT) != 0, s->time_ns))) {
            /* in no trace: the step the held walk left out */
            if (held && k == n - 1) n = ss_native_unwind_on(up->np, nf, n, max, why, &held);
            continue;
        }
        held = false;
        nf[k].cfa = cfa;
        if (k + 1 >= max || !vm_caller(&up->mem, cfa, &nf[k + 1])) {
            *why = k + 1 >= max ? SS_TRUNC_DEPTH : SS_TRUNC_SNAPSHOT;
            return k + 1;
        }
        n = k + 1 + ss_native_unwind_held(up->np, &nf[k + 1], max - k - 1, why, &held);
    }
    return n;
}

unsigned ss_unwind_mixed(struct ss_unwinder *u, struct ss_uproc *up, const struct ss_sample *s,
                         enum ss_trunc *why)
{
    struct ulua *l = lua_state(u, up);
    struct ss_native_frame *nf = u->nf;
    unsigned nn = native_walk(u, up, l, s, why);
    struct ss_lj_out out = {0};
    bool labelled = false;
    if (l && l->n && reserve(l, nn + u->o.max_frames) == 0) {
        struct ss_lj_runtime *rts[MAX_RTS];
        for (unsigned i = 0; i < l->n; i++)
            rts[i] = l->rts[i].rt;
        for (unsigned i = 0; i < nn; i++) {
            struct ss_lj_native *n = &l->natives[i];
            uint64_t v;
            memset(n, 0, sizeof(*n));
            n->ip = ss_nf_ip(&nf[i]);
            n->cfa = nf[i].cfa;
            /* exact ip; not the live top of the VM for a leaf in the exit handler */
            n->signal = (i > 0 || l->exit_leaf) && (nf[i].flags & SS_NF_EXACT);
            n->trace = l->tcap > i ? l->tokens[i] : 0;
            if (ss_nf_reg(&nf[i], LJ_REG_PC, &v)) {
                n->rbx = v;
                n->have |= SS_LJ_HAVE_RBX;
            }
            if (ss_nf_reg(&nf[i], LJ_REG_DISPATCH, &v)) {
                n->r14 = v;
                n->have |= SS_LJ_HAVE_R14;
            }
            if (ss_nf_reg(&nf[i], LJ_REG_KBASE, &v)) {
                n->r15 = v;
                n->have |= SS_LJ_HAVE_R15;
            }
            if (ss_nf_reg(&nf[i], LJ_REG_RB, &v)) {
                n->rbp = v;
                n->have |= SS_LJ_HAVE_RBP;
            }
        }
        out.items = l->items;
        out.cap = l->cap;
        int rc = ss_lj_splice(rts, l->n, &up->mem, s->regs, l->natives, nn, &out);
        /* no Lua frame, but a VM-state frame among all the native ones */
        labelled = rc == 0 && !out.lua_frames && out.n > nn;
        if (rc < 0 && out.n == 0) out.lua_frames = 0;
    }
    bool native_only = !out.lua_frames && !labelled;
    unsigned n = native_only ? nn : out.n;
    if (ss_unwinder_reserve(u, n) < 0) return 0;
    /* a perf map re-read while naming (a JIT frame missed): name the whole
     * sample again with the new map, the one the capture records for it */
    uint32_t pmv = ss_perfmap_version(up->pm);
    for (int pass = 0; pass < 2; pass++) {
        int32_t prev = -1; /* the native frame u->out[i - 1] names */
        for (unsigned i = 0; i < n; i++) {
            int32_t k = native_only ? (int32_t)i : out.items[i].native;
            bool exact = k >= 0 && (nf[k].flags & (SS_NF_EXACT | SS_NF_SIGNAL)) != 0;
            if (k >= 0 && prev >= 0 && ss_nf_ip(&nf[k]) == ss_nf_ip(&nf[prev]) &&
                exact == ((nf[prev].flags & (SS_NF_EXACT | SS_NF_SIGNAL)) != 0))
                u->out[i] = u->out[i - 1]; /* recursion: what the cache would give again */
            else if (k >= 0) {
                ss_symbolize_native(up->syms, u->strs, up->proc, ss_nf_ip(&nf[k]), exact,
                                    &u->out[i]);
                if (nf[k].flags & SS_NF_JIT) name_jit(u->strs, &u->out[i]);
            } else
                u->out[i] = out.items[i].lua;
            if (k >= 0 && !native_only && i + 1 < n && out.items[i + 1].native < 0)
                name_libcf(u->strs, &u->out[i], &out.items[i + 1]);
            prev = k;
        }
        if (ss_perfmap_version(up->pm) == pmv) break;
        pmv = ss_perfmap_version(up->pm);
    }
    return n;
}

unsigned ss_unwinder_lua_runtimes(struct ss_unwinder *u, uint32_t pid,
                                  const struct ss_lj_runtime **out, unsigned max)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    struct ulua *l = up ? lua_state(u, up) : NULL;
    unsigned n = 0;
    for (unsigned i = 0; l && i < l->n && n < max; i++)
        out[n++] = l->rts[i].rt;
    return n;
}

void ss_unwinder_lj_news(struct ss_unwinder *u, uint32_t pid, ss_lj_status_fn fn, void *ctx)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    struct ulua *l = up ? up->luajit : NULL; /* no scan: the walks' view as it is */
    if (!l) return;
    for (unsigned i = 0; i < l->nnovm; i++) {
        struct novm *x = &l->novm[i];
        if (x->said) continue;
        x->said = true;
        struct ss_lj_status st = {.path = x->path,
                                  .build_id = x->elf->build_id,
                                  .build_id_len = x->elf->build_id_len,
                                  .bias = (uint64_t)x->bias,
                                  .info = &x->info,
                                  .news = SS_LJS_FOUND};
        fn(ctx, pid, &st);
    }
    for (unsigned i = 0; i < l->n; i++) {
        struct lrt *r = &l->rts[i];
        if (!r->rt) continue;
        unsigned now = SS_LJS_FOUND | (ss_lj_runtime_layout(r->rt) ? SS_LJS_LAYOUT : 0) |
                       (ss_lj_runtime_diag(r->rt)[0] ? SS_LJS_DIAG : 0);
        if (!(now & ~r->said)) continue;
        struct ss_lj_status st = {.path = r->path,
                                  .build_id = r->elf->build_id,
                                  .build_id_len = r->elf->build_id_len,
                                  .bias = (uint64_t)r->bias,
                                  .rt = r->rt,
                                  .info = ss_lj_runtime_info(r->rt),
                                  .news = now & ~r->said};
        r->said |= now;
        fn(ctx, pid, &st);
    }
}

uint64_t ss_lua_epoch(const struct ss_uproc *up)
{
    const struct ulua *l = up->luajit;
    return l ? l->epoch : 0;
}

_Static_assert(2 + MAX_RTS * (1 + SS_LJ_STATE_WORDS) <= SS_LUA_STATE_WORDS, "ss_lua_state fits");

size_t ss_lua_state(const struct ss_uproc *up, uint64_t *w)
{
    const struct ulua *l = up->luajit;
    if (!l) return 0;
    size_t n = 0;
    w[n++] = 1 + l->n + ((uint64_t)l->scanned << 8);
    w[n++] = l->gen;
    for (unsigned i = 0; i < l->n; i++) {
        w[n++] = (uint64_t)(uintptr_t)l->rts[i].rt;
        if (l->rts[i].rt) n += ss_lj_runtime_state(l->rts[i].rt, w + n);
    }
    return n;
}

unsigned ss_lua_nruntimes(const struct ss_uproc *up)
{
    const struct ulua *l = up->luajit;
    unsigned n = 0;
    for (unsigned i = 0; l && i < l->n; i++)
        n += l->rts[i].rt != NULL;
    return n;
}

bool ss_unwinder_take_plan(struct ss_unwinder *u, uint32_t pid, struct ss_win_plan *p)
{
    struct ss_uproc *up = ss_unwinder_proc(u, pid, false, NULL);
    struct ulua *l = up ? up->luajit : NULL;
    for (unsigned i = 0; l && i < l->n; i++) {
        const struct ss_lj_runtime *rt = l->rts[i].rt;
        uint64_t key = 0;
        int r = rt ? ss_lj_runtime_plan(rt, l->plan_key, p, &key) : -1;
        if (r < 0) continue;
        if (r == 0) return false; /* already handed out */
        l->plan_key = key;
        return true;
    }
    return false;
}
