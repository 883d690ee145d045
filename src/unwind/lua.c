/* unwind/lua.c: the LuaJIT adapter of the walk (lua.h), called by walk.c.
 *
 * A sample whose leaf ip is in a VM starts the native walk at the VM frame's
 * true caller (ss_lj_leaf_cfa: .eh_frame is off by 8 inside VM helpers);
 * one in trace code, or in C code called from it, at the VM frame the trace
 * runs on (ss_lj_trace_cfa, or the exit handler's state for a trace that is
 * exiting); a frame elsewhere stays native. ss_lj_splice then replaces each
 * VM frame by the Lua frames of the segment it runs, and a stripped
 * LuaJIT's library C functions are named after the Lua frame above them.
 * The runtimes themselves are lua_runtimes.c's. */
#include "unwind/lua.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "process/process.h"
#include "stacksnap/ss_lj_luajit.h"
#include "symbolize/symbolize.h"
#include "unwind/lua_runtimes.h"
#include "unwind/luajit/layout.h"
#include "unwind/luajit/ljregs.h"

static int reserve(struct ss_luaproc *l, unsigned n)
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

/* The VM frame's caller, read from the VM frame at cfa (see ss_lj_leaf_cfa):
 * the callee-saved registers the VM's entry saved, as its FDE states them. */
bool ss_lua_vm_caller(struct ss_uproc *up, uint64_t cfa, struct ss_native_frame *f)
{
    struct ss_nregs r = {0};
#if defined(__x86_64__)
    /* [cfa-40 .. cfa-8]: r14, r15, rbx, rbp, ip */
    uint64_t w[5];
    if (ss_mem_read(&up->mem, cfa - 40, w, sizeof(w)) < 0) return false;
    r.r[LJ_DR_DISPATCH] = w[0];
    r.r[LJ_DR_KBASE] = w[1];
    r.r[LJ_DR_PC] = w[2];
    r.r[LJ_DR_RB] = w[3];
    r.r[SS_DR_IP] = w[4];
    r.valid =
        SS_DBIT(LJ_DR_DISPATCH) | SS_DBIT(LJ_DR_KBASE) | SS_DBIT(LJ_DR_PC) | SS_DBIT(LJ_DR_RB);
#else
    /* [cfa-96 .. cfa-24]: x28 .. x19, then fp, lr (layout.h) */
    _Static_assert(LJ_A64_CFA_X19 == LJ_A64_CFA_FP + 8 && LJ_A64_CFA_FP == LJ_A64_CFA_LR + 8,
                   "x19, fp, lr side by side below the CFA");
    uint64_t w[12];
    if (ss_mem_read(&up->mem, cfa - LJ_A64_CFA_X19 - 9 * 8, w, sizeof(w)) < 0) return false;
    for (unsigned i = 0; i < 10; i++) {
        r.r[19 + i] = w[9 - i];
        r.valid |= SS_DBIT(19 + i);
    }
    r.r[SS_DR_FP] = w[10];
    r.r[SS_DR_IP] = w[11]; /* the VM does not sign lr (no paciasp in vm_arm64.dasc) */
    r.valid |= SS_DBIT(SS_DR_FP);
#endif
    r.r[SS_DR_SP] = cfa;
    r.valid |= SS_DBIT(SS_DR_IP) | SS_DBIT(SS_DR_SP);
    ss_native_frame_init(f, &r, false);
    return true;
}

/* The VM frame under trace code at nf[k]: its CFA (0 if ip is in no known
 * trace: LuaJIT's traces live in anonymous code, ss_proc_anon_code, and
 * ss_lj_trace_cfa only accepts an ip inside one); l->tokens[k] names the validated trace sample for
 * the splice. */
static uint64_t trace_frame(struct ss_uproc *up, struct ss_luaproc *l, struct ss_native_frame *nf,
                            unsigned k, bool exact, uint64_t time_ns)
{
    if (!l->n || (nf[k].flags & SS_NF_FILE) || !ss_proc_anon_code(up->proc, ss_nf_ip(&nf[k])))
        return 0;
    struct ss_lj_runtime *rts[SS_LUA_MAX_RTS];
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
static uint64_t exit_frame(struct ss_luaproc *l, struct ss_uproc *up, struct ss_native_frame *nf,
                           bool leaf)
{
    struct ss_lj_runtime *rts[SS_LUA_MAX_RTS];
    uint64_t rsp = 0;
    for (unsigned i = 0; i < l->n; i++)
        rts[i] = l->rts[i].rt;
    uint64_t ip = ss_nf_ip(nf);
    if (!leaf && !ss_lj_exit_ret(rts, l->n, ip)) return 0; /* most frames: no need for rsp */
    if (!ss_nf_reg(nf, SS_REG_SP, &rsp)) return 0;
    uint64_t cfa = leaf ? ss_lj_exit_leaf_cfa(rts, l->n, &up->mem, ip, rsp)
                        : ss_lj_exit_cfa(rts, l->n, &up->mem, ip, rsp);
    /* arm64's VM FDE finds this VM frame by itself (x29 is the trace's),
     * with the trace's registers: cleared whether or not the state checks */
    bool clear = cfa != 0;
#if defined(__aarch64__)
    clear |= !leaf;
#endif
    if (clear) nf->regs.valid &= ~(SS_DBIT(LJ_DR_PC) | SS_DBIT(LJ_DR_KBASE) | SS_DBIT(LJ_DR_RB));
    return cfa;
}

/* The VM frame under a leaf in a VM: in the trace exit handler the exiting
 * trace's, else the interpreter's (ss_lj_leaf_cfa), else (arm64) the trace
 * that called the VM helper the leaf is in (ss_lj_helper_ret: the trace's
 * frame is its caller at x30); 0: the leaf is in no VM. */
static uint64_t vm_leaf(struct ss_luaproc *l, struct ss_uproc *up, struct ss_native_frame *nf,
                        const struct ss_sample *s)
{
    for (unsigned i = 0; i < l->n; i++) {
        if (!ss_lj_in_vm(l->rts[i].rt, s->regs[SS_REG_IP])) continue;
        uint64_t cfa = exit_frame(l, up, &nf[0], true);
        if (cfa) {
            l->exit_leaf = true;
            return cfa;
        }
        cfa = ss_lj_leaf_cfa(l->rts[i].rt, &up->mem, s->regs);
        uint64_t lr = cfa || !l->traces ? 0 : ss_lj_helper_ret(l->rts[i].rt, &up->mem, s->regs);
        if (!lr) return cfa;
        struct ss_native_frame tmp = nf[0];
        tmp.regs.r[SS_DR_IP] = lr;
        tmp.flags = 0;
        return trace_frame(up, l, &tmp, 0, false, s->time_ns);
    }
    return 0;
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

struct ss_luaproc *ss_lua_begin(struct ss_unwinder *u, struct ss_uproc *up, bool *hold)
{
    struct ss_luaproc *l = ss_luaproc_get(u, up);
    unsigned max = u->o.max_frames;
    *hold = false;
    if (!l) return NULL;
    if (l->tcap < max) {
        uint32_t *t = realloc(l->tokens, max * sizeof(*t));
        if (t) l->tokens = t, l->tcap = max, l->tdirty = max; /* all of it to clear */
    }
    *hold = l->traces = l->n && l->tcap >= max; /* traces: stop at anonymous code */
    /* tokens: zero but what the last walk may have set */
    if (l->tokens) memset(l->tokens, 0, l->tdirty * sizeof(*l->tokens));
    l->tdirty = 0;
    l->exit_leaf = false;
    l->spliced = false;
    return l;
}

uint64_t ss_lua_vm_frame(struct ss_luaproc *l, struct ss_uproc *up, struct ss_native_frame *nf,
                         unsigned k, enum ss_lua_at at, const struct ss_sample *s)
{
    uint64_t cfa = 0;
    bool exact = true;
    if (at == SS_LUA_END)
        exact = false;
    else if (at == SS_LUA_FRAME) {
        exact = (nf[k].flags & SS_NF_EXACT) != 0;
        if (!exact && (cfa = exit_frame(l, up, &nf[k], false))) return cfa;
    } else if ((cfa = vm_leaf(l, up, nf, s)) || !l->traces) {
        return cfa;
    }
    /* trace code (a leaf there too): no CFI there; the trace's stack
     * adjustment gives the VM frame */
    return trace_frame(up, l, nf, k, exact, s->time_ns);
}

bool ss_lua_in_trace(const struct ss_luaproc *l, struct ss_uproc *up,
                     const struct ss_native_frame *nf)
{
    struct ss_lj_runtime *rts[SS_LUA_MAX_RTS];
    if (!l->traces || (nf->flags & SS_NF_FILE)) return false;
    for (unsigned i = 0; i < l->n; i++)
        rts[i] = l->rts[i].rt;
    uint64_t look = ss_nf_lookup_ip(nf), lo = look, hi = look + 1;
    /* an anonymous mapping (not a file's, which has no trace) */
    const struct ss_mapping *mp = ss_proc_find_cached(up->proc, look);
    if (mp && !mp->elf && !mp->d.path[0]) lo = mp->d.start, hi = mp->d.end;
    return ss_lj_in_trace(rts, l->n, look, lo, hi);
}

void ss_lua_native_leaf(struct ss_luaproc *l)
{
    if (l->traces) l->tokens[0] = 0;
    l->exit_leaf = false;
}

uint64_t ss_lua_trace_regs(struct ss_luaproc *l, struct ss_uproc *up, unsigned k, uint64_t ip,
                           bool exact, const uint64_t *regs, uint64_t known, uint64_t time_ns)
{
    if (!l->n || !l->traces || k >= l->tcap || !ss_proc_anon_code(up->proc, ip)) return 0;
    struct ss_lj_runtime *rts[SS_LUA_MAX_RTS];
    for (unsigned i = 0; i < l->n; i++)
        rts[i] = l->rts[i].rt;
    if (k >= l->tdirty) l->tdirty = k + 1;
    return ss_lj_trace_cfa(rts, l->n, &up->mem, ip, exact, regs, known, time_ns, &l->tokens[k]);
}

uint64_t ss_lua_vm_leaf_regs(struct ss_luaproc *l, struct ss_uproc *up, uint64_t ip,
                             const uint64_t *regs, uint64_t known, uint64_t time_ns)
{
    for (unsigned i = 0; i < l->n; i++) {
        struct ss_lj_runtime *rt = l->rts[i].rt;
        if (!ss_lj_in_vm(rt, ip)) continue;
        uint64_t cfa = ss_lj_leaf_cfa(rt, &up->mem, regs);
        uint64_t lr = cfa || !l->traces ? 0 : ss_lj_helper_ret(rt, &up->mem, regs);
        return lr ? ss_lua_trace_regs(l, up, 0, lr, false, regs, known, time_ns) : cfa;
    }
    return ss_lua_trace_regs(l, up, 0, ip, true, regs, known, time_ns);
}

bool ss_lua_in_trace_at(const struct ss_luaproc *l, struct ss_uproc *up, uint64_t look)
{
    struct ss_native_frame f;
    memset(&f, 0, sizeof(f));
    f.regs.r[SS_DR_IP] = look;
    f.flags = SS_NF_EXACT; /* (its lookup address: look itself) */
    return ss_lua_in_trace(l, up, &f);
}

uint32_t ss_lua_token(const struct ss_luaproc *l, unsigned k)
{
    return l->tcap > k ? l->tokens[k] : 0;
}

struct native_fill {
    struct ss_luaproc *l;
    const struct ss_native_frame *nf;
};

/* Native frame i of this build's walk (u->nf): its registers by role. */
static void fill_native(void *ctx, unsigned i, struct ss_lj_native *n)
{
    const struct native_fill *c = ctx;
    const struct ss_native_frame *nf = c->nf;
    uint64_t v;
    n->ip = ss_nf_ip(&nf[i]);
    n->cfa = nf[i].cfa;
    /* exact ip; not the live top of the VM for a leaf in the exit handler */
    n->signal = (i > 0 || c->l->exit_leaf) && (nf[i].flags & SS_NF_EXACT);
    n->trace = c->l->tcap > i ? c->l->tokens[i] : 0;
    if (ss_nf_reg(&nf[i], LJ_REG_PC, &v)) {
        n->rbx = v;
        n->have |= SS_LJ_HAVE_RBX;
    }
    n->lost = (ss_nf_lost(&nf[i], LJ_REG_PC) ? SS_LJ_HAVE_RBX : 0) |
              (ss_nf_lost(&nf[i], LJ_REG_KBASE) ? SS_LJ_HAVE_R15 : 0) |
              (ss_nf_lost(&nf[i], LJ_REG_RB) ? SS_LJ_HAVE_RBP : 0);
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

unsigned ss_lua_splice(struct ss_luaproc *l, struct ss_unwinder *u, struct ss_uproc *up,
                       const struct ss_sample *s, unsigned nn)
{
    struct native_fill c = {l, u->nf};
    return ss_lua_splice_with(l, u, up, s->regs, nn, fill_native, &c);
}

unsigned ss_lua_splice_with(struct ss_luaproc *l, struct ss_unwinder *u, struct ss_uproc *up,
                            const uint64_t *regs, unsigned nn, ss_lua_fill_fn fill, void *ctx)
{
    struct ss_lj_out out = {0};
    bool labelled = false;
    if (l->n && reserve(l, nn + u->o.max_frames) == 0) {
        struct ss_lj_runtime *rts[SS_LUA_MAX_RTS];
        for (unsigned i = 0; i < l->n; i++)
            rts[i] = l->rts[i].rt;
        for (unsigned i = 0; i < nn; i++) {
            memset(&l->natives[i], 0, sizeof(l->natives[i]));
            fill(ctx, i, &l->natives[i]);
        }
        out.items = l->items;
        out.cap = l->cap;
        int rc = ss_lj_splice(rts, l->n, &up->mem, regs, l->natives, nn, &out);
        /* no Lua frame, but a VM-state frame among all the native ones */
        labelled = rc == 0 && !out.lua_frames && out.n > nn;
        if (rc < 0 && out.n == 0) out.lua_frames = 0;
    }
    l->spliced = out.lua_frames || labelled;
    return l->spliced ? out.n : nn;
}

int32_t ss_lua_item(const struct ss_luaproc *l, unsigned i, const struct ss_frame **own)
{
    if (!l->spliced) return (int32_t)i;
    *own = &l->items[i].lua;
    return l->items[i].native;
}

void ss_lua_rename(const struct ss_luaproc *l, struct ss_strpool *pool, struct ss_frame *out,
                   unsigned i, unsigned n)
{
    if (l->spliced && i + 1 < n && l->items[i + 1].native < 0)
        name_libcf(pool, &out[i], &l->items[i + 1]);
}
