/* unwind/luajit/runtime.c: one LuaJIT runtime of a process (a mapped module
 * carrying the VM): its verified layout and global states, the one
 * diagnostic, interned strings, and the prototype cache.
 *
 * Prototype cache: direct-mapped by address. An entry holds the immutable
 * bytes of a prototype (bytecode, constants, line/upvalue/variable info,
 * chunk name) and a signature of its header with the mutable fields
 * (GC links, mark bits, flags, trace anchor) zeroed. Every use compares the
 * header read in the same sample with the signature: a prototype freed and
 * its memory reused for another one cannot reuse stale names or lines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/luajit/layout.h"
#include "unwind/luajit/runtime.h"
#include "unwind/luajit/frames.h"
#include "unwind/luajit/ljregs.h"
#include "util/zmem.h"

#define LJ_BLOB_MAX (1u << 20)

/* x86-64: perf_event_x86_regs (vm_x64.dasc: BASE rdx, PC rbx, KBASE r15,
 * DISPATCH r14, RB rbp); arm64: x0-x30, sp, pc (vm_arm64.dasc: BASE x19,
 * KBASE x20, PC x21, GL x22; BASE stands in for RB: callee-saved) */
const struct lj_arch ss_lj_arch_x64 = {.base = 3,
                                       .pc = 1,
                                       .kbase = 23,
                                       .disp = 22,
                                       .rb = 6,
                                       .sp = 7,
                                       .ip = 8,
                                       .fp = 6,
                                       .lr = 0xff,
                                       .funcc_kbase = true,
                                       .mcode_unit = 1,
                                       .va_end = 1ull << 47};
const struct lj_arch ss_lj_arch_a64 = {.a64 = true,
                                       .base = 19,
                                       .pc = 21,
                                       .kbase = 20,
                                       .disp = 22,
                                       .rb = 19,
                                       .sp = 31,
                                       .ip = 32,
                                       .fp = 29,
                                       .lr = 30,
                                       .gl_is_g = true,
                                       .mcode_unit = 4,
                                       .va_end = 1ull << 48};
#if defined(__x86_64__)
_Static_assert(SS_REG_DX == 3 && SS_REG_BX == 1 && SS_REG_R15 == 23 && SS_REG_R14 == 22 &&
                   SS_REG_BP == 6 && SS_REG_SP == 7 && SS_REG_IP == 8 &&
                   SS_USER_VA_END == 1ull << 47,
               "ss_lj_arch_x64 numbers this build's registers, its user addresses");
#define LJ_ARCH_HOST ss_lj_arch_x64
#else
_Static_assert(SS_REG_X19 == 19 && SS_REG_X29 == 29 && SS_REG_SP == 31 && SS_REG_IP == 32 &&
                   SS_USER_VA_END == 1ull << 48,
               "ss_lj_arch_a64 numbers this build's registers, its user addresses");
#define LJ_ARCH_HOST ss_lj_arch_a64
#endif
#define STR_ARENA 65536

struct lj_strblk {
    struct lj_strblk *next;
    size_t used;
    char buf[STR_ARENA];
};

/* Interned strings: open addressing over pointers into the arenas. */
struct lj_strset {
    const char **slot;
    size_t cap, n;
};

struct lj_rt_priv {
    struct lj_strset set;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* The string set lives in the first arena block's header area: keep it in
 * a static-free way by hanging it off rt->strs (first block). */
static struct lj_strset *strset(struct ss_lj_runtime *rt);

const char *ss_lj_intern(struct ss_lj_runtime *rt, const char *s, size_t len)
{
    struct lj_strset *set = strset(rt);
    if (!set) return NULL;
    if (len > 4096) len = 4096;
    if (set->n * 2 >= set->cap) {
        size_t ncap = set->cap ? set->cap * 2 : 1024;
        const char **ns = calloc(ncap, sizeof(*ns));
        if (!ns) return NULL;
        for (size_t i = 0; i < set->cap; i++) {
            const char *o = set->slot[i];
            if (!o) continue;
            size_t j = hash_bytes(o, strlen(o)) & (ncap - 1);
            while (ns[j])
                j = (j + 1) & (ncap - 1);
            ns[j] = o;
        }
        free(set->slot);
        set->slot = ns;
        set->cap = ncap;
    }
    size_t j = hash_bytes(s, len) & (set->cap - 1);
    while (set->slot[j]) {
        const char *o = set->slot[j];
        if (!strncmp(o, s, len) && o[len] == 0) return o;
        j = (j + 1) & (set->cap - 1);
    }
    struct lj_strblk *b = rt->strs->next;
    if (!b || b->used + len + 1 > STR_ARENA) {
        b = malloc(sizeof(*b));
        if (!b) return NULL;
        b->used = 0;
        b->next = rt->strs->next;
        rt->strs->next = b;
    }
    char *d = b->buf + b->used;
    memcpy(d, s, len);
    d[len] = 0;
    b->used += len + 1;
    set->slot[j] = d;
    set->n++;
    return d;
}

/* rt->strs is a sentinel block whose buf holds the string set. */
static struct lj_strset *strset(struct ss_lj_runtime *rt)
{
    return rt->strs ? (struct lj_strset *)(void *)rt->strs->buf : NULL;
}

int ss_lj_runtime_new(struct ss_lj_runtime **out, const struct ss_lj_elfinfo *info,
                      uint64_t load_bias, uint32_t pid, struct ss_err *err)
{
    *out = NULL;
    if (!info->is_luajit || !info->vm_found) {
        ss_err_set(err, -EINVAL, "luajit: pid %u: module has no verified VM range", pid);
        return -EINVAL;
    }
    struct ss_lj_runtime *rt = calloc(1, sizeof(*rt));
    if (!rt) goto nomem;
    rt->info = *info;
    rt->arch = &LJ_ARCH_HOST;
    rt->bias = load_bias;
    rt->vm_lo = info->vm_lo + load_bias;
    rt->vm_hi = info->vm_hi + load_bias;
    rt->pid = pid;
    rt->protos = ss_zalloc(LJ_PROTO_SLOTS * sizeof(*rt->protos));
    rt->ins = ss_zalloc(LJ_INS_SLOTS * sizeof(*rt->ins));
    rt->fnpt = ss_zalloc(LJ_FNPT_SLOTS * sizeof(*rt->fnpt));
    rt->strs = calloc(1, sizeof(*rt->strs));
    if (!rt->protos || !rt->ins || !rt->strs || !rt->fnpt) goto nomem;
    *out = rt;
    return 0;
nomem:
    ss_lj_runtime_free(rt);
    ss_err_set(err, -ENOMEM, "luajit: pid %u: out of memory", pid);
    return -ENOMEM;
}

void ss_lj_runtime_free(struct ss_lj_runtime *rt)
{
    if (!rt) return;
    if (rt->protos)
        for (unsigned w = 0; w < LJ_PROTO_SLOTS / 64; w++)
            for (uint64_t b = rt->pused[w]; b; b &= b - 1)
                free(rt->protos[w * 64 + (unsigned)__builtin_ctzll(b)].blob);
    ss_zfree(rt->protos, LJ_PROTO_SLOTS * sizeof(*rt->protos));
    for (unsigned i = 0; rt->spill && i < rt->nspill; i++)
        free(rt->spill[i].blob);
    free(rt->spill);
    for (unsigned i = 0; i < LJ_SPLICE_THREADS; i++)
        free(rt->walks[i]);
    free(rt->sbuf);
    free(rt->hbuf);
    ss_zfree(rt->ins, LJ_INS_SLOTS * sizeof(*rt->ins));
    ss_zfree(rt->fnpt, LJ_FNPT_SLOTS * sizeof(*rt->fnpt));
    ss_lj_trace_free(rt);
    if (rt->strs) {
        free(strset(rt)->slot);
        struct lj_strblk *b = rt->strs->next;
        while (b) {
            struct lj_strblk *nx = b->next;
            free(b);
            b = nx;
        }
        free(rt->strs);
    }
    free(rt);
}

const struct ss_lj_elfinfo *ss_lj_runtime_info(const struct ss_lj_runtime *rt)
{
    return &rt->info;
}

bool ss_lj_in_vm(const struct ss_lj_runtime *rt, uint64_t ip)
{
    return ip >= rt->vm_lo && ip < rt->vm_hi;
}

void ss_lj_runtime_set_arch(struct ss_lj_runtime *rt, bool a64)
{
    rt->arch = a64 ? &ss_lj_arch_a64 : &ss_lj_arch_x64;
}

uint64_t ss_lj_leaf_cfa(struct ss_lj_runtime *rt, struct ss_mem *mem, const uint64_t *regs)
{
    const struct lj_arch *a = rt->arch;
    if (!a->a64) {
        /* Inside a VM helper reached by an internal call, [rsp] is the return
         * address into the VM and the cframe is at rsp + 8; in the interpreter
         * [rsp] is TMP1/MULTRES. Snapshot only (no syscall); the walk then checks
         * SAVE_L->cframe == cframe, so a wrong guess never yields frames. */
        uint64_t ret = 0, cframe = regs[a->sp];
        if (ss_mem_read(mem, cframe, &ret, 8)) return 0;
        if (ss_lj_in_vm(rt, ret)) cframe += 8;
        return cframe + rt->info.vm_cfa_off;
    }
    /* arm64: the VM keeps x29 = cframe + 192 (its FDE: CFA = x29 + 16);
     * its helpers are leaves that leave sp and x29 alone. In the entry's
     * first instructions x29 is still the caller's: then it is not sp +
     * 192, and the walk's SAVE_L->cframe check would reject it anyway. */
    uint64_t fp = regs[a->fp];
    if (fp != regs[a->sp] + LJ_A64_CFRAME_SIZE - LJ_A64_CFA_FP) return 0;
    return fp + LJ_A64_CFA_FP;
}

uint64_t ss_lj_helper_ret(struct ss_lj_runtime *rt, struct ss_mem *mem, const uint64_t *regs)
{
    if (!rt->arch->a64) return 0; /* x86-64: ss_lj_leaf_cfa handles VM helpers */
    /* a leaf in a VM helper that trace code called with bl (lj_vm_modi,
     * lj_vm_floor, ...: leaves that keep sp, x29 and x30): x30, when the
     * instruction before it is a bl to at most 128 bytes below the leaf (not
     * an x30 left over by trace code that branched back into the VM) */
    uint64_t lr = regs[rt->arch->lr], ip = regs[rt->arch->ip];
    uint32_t w = 0;
    if (!ss_lj_in_vm(rt, ip) || lr < 4096 || ss_mem_read(mem, lr - 4, &w, 4) ||
        (w & 0xfc000000u) != 0x94000000u)
        return 0;
    uint64_t t = lr - 4 + (uint64_t)((int64_t)((uint64_t)w << 38) >> 36); /* imm26 * 4 */
    return ip >= t && ip - t < 128 ? lr : 0;
}

const char *ss_lj_runtime_layout(const struct ss_lj_runtime *rt)
{
    return rt->lay ? rt->lay->name : NULL;
}

bool ss_lj_runtime_layout_derived(const struct ss_lj_runtime *rt)
{
    return rt->lay && rt->lay_derived;
}

const char *ss_lj_runtime_diag(const struct ss_lj_runtime *rt)
{
    return rt->diag;
}

void ss_lj_runtime_stats(const struct ss_lj_runtime *rt, struct ss_lj_stats *st)
{
    *st = rt->st;
}

void ss_lj_runtime_check_guards(struct ss_lj_runtime *rt, bool on)
{
    rt->check_guards = on;
}

bool ss_lj_check_G(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t G)
{
    if (rt->disabled) return false;
    for (unsigned i = 0; i < rt->ngs; i++)
        if (rt->gs[i] == G) return true;
    const struct lj_layout *lay = NULL;
    struct lj_layout d;
    bool derived = false;
    char why[200];
    /* No DISPATCH register here: it is DISPATCH in the interpreter only (a
     * leaf in a VM helper called from a trace has the trace's r14), and
     * the dispatch table check proves G2DISP without it. */
    int rc = ss_lj_layout_verify_vm(&rt->info, rt->vm_lo, rt->vm_hi, m, G, 0, &d, &lay, &derived,
                                    why, sizeof(why));
    if (rc == 0 && lay == &d)
        lay = rt->lay == &rt->dlay && ss_lj_layout_same(&d, &rt->dlay) ? &rt->dlay : &d;
    if (rc == 0 && rt->lay && lay != rt->lay) {
        snprintf(why, sizeof(why), "global states disagree on the layout (%s vs %s)", rt->lay->name,
                 lay->name);
        rc = -EINVAL;
    }
    if (rc) {
        /* Once a G verified, a failure is one torn or stale sample (the
         * runtime stays on). Before that, a layout that never fits is
         * reported once and turns Lua walking off for this runtime. */
        rt->st.g_rejects++;
        if (rt->lay) return false;
        snprintf(rt->last_reject, sizeof(rt->last_reject), "%s", why);
        if (++rt->verify_fail >= 16) {
            rt->disabled = true;
            snprintf(rt->diag, sizeof(rt->diag), "pid %u: LuaJIT frames off: %s", rt->pid, why);
        }
        return false;
    }
    if (lay == &d) {
        rt->dlay = d;
        lay = &rt->dlay;
    }
    rt->lay = lay;
    rt->lay_derived = derived;
    if (rt->ngs < LJ_MAX_GS)
        rt->gs[rt->ngs++] = G;
    else
        rt->gs[G % LJ_MAX_GS] = G;
    return true;
}

/* ---- prototypes ---- */

static void make_sig(const struct lj_layout *lay, const uint8_t *hdr, uint8_t *sig)
{
    memcpy(sig, hdr, lay->pt_size);
    memset(sig, 0, lay->gct);                                            /* nextgc, marked */
    memset(sig + lay->pt_sizebc + 4, 0, lay->pt_k - lay->pt_sizebc - 4); /* gclist */
    memset(sig + lay->pt_sizeuv + 1, 0, 3);                              /* flags, trace */
}

static struct lj_proto *fill(struct ss_lj_runtime *rt, struct ss_mem *m, struct lj_proto *p,
                             uint64_t pt, const uint8_t *hdr)
{
    const struct lj_layout *lay = rt->lay;
    free(p->blob);
    memset(p, 0, sizeof(*p));
    uint32_t sizept = lj_u32(hdr + lay->pt_sizept);
    uint32_t sizebc = lj_u32(hdr + lay->pt_sizebc);
    if (hdr[lay->gct] != LJ_GCT_PROTO || sizept > LJ_BLOB_MAX || sizebc == 0 ||
        (uint64_t)lay->pt_size + (uint64_t)sizebc * 4 > sizept)
        return NULL;
    uintptr_t i = ((uintptr_t)p - (uintptr_t)rt->protos) / sizeof(*p);
    if ((uintptr_t)p >= (uintptr_t)rt->protos && i < LJ_PROTO_SLOTS)
        rt->pused[i / 64] |= 1ull << (i % 64); /* a protos slot, not a spill entry */
    p->blob = malloc(sizept);
    if (!p->blob || ss_mem_read(m, pt, p->blob, sizept)) {
        free(p->blob);
        p->blob = NULL;
        return NULL;
    }
    /* The blob's header must be the one we were given (no torn read). */
    uint8_t s1[104], s2[104];
    make_sig(lay, hdr, s1);
    make_sig(lay, p->blob, s2);
    if (memcmp(s1, s2, lay->pt_size)) goto bad;
    p->sizept = sizept;
    p->sizebc = sizebc;
    p->numline = lj_u32(hdr + lay->pt_numline);
    p->firstline = (int32_t)lj_u32(hdr + lay->pt_firstline);
    p->sizekgc = lj_u32(hdr + lay->pt_sizekgc);
    p->sizeuv = hdr[lay->pt_sizeuv];
    /* chunk name: GCstr header + data */
    uint64_t cn = lj_ref(lay, hdr + lay->pt_chunkname);
    uint8_t sb[24 + 256];
    /* (a string near the end of its mapping: its header, then the rest) */
    bool got =
        cn &&
        (!ss_mem_read(m, cn, sb, sizeof(sb)) ||
         (!ss_mem_read(m, cn, sb, lay->str_data) &&
          lj_u32(sb + lay->str_len) < sizeof(sb) - lay->str_data &&
          !ss_mem_read(m, cn + lay->str_data, sb + lay->str_data, lj_u32(sb + lay->str_len) + 1)));
    if (got && sb[lay->gct] == LJ_GCT_STR) {
        uint32_t len = lj_u32(sb + lay->str_len);
        uint64_t n = (uint64_t)lay->str_data + len + 1;
        p->cn = cn;
        p->cnslen = n < LJ_CNS ? (uint32_t)n : LJ_CNS;
        memcpy(p->cns, sb, p->cnslen);
        char tmp[4096];
        const char *s = NULL;
        if (len <= sizeof(sb) - lay->str_data - 1) {
            s = (const char *)sb + lay->str_data;
        } else if (len < sizeof(tmp) && !ss_mem_read(m, cn + lay->str_data, tmp, len + 1)) {
            s = tmp;
        }
        if (s && s[len] == 0) {
            if (len && (s[0] == '@' || s[0] == '=')) s++, len--;
            p->chunk = ss_lj_intern(rt, s, len);
        }
    }
    /* a live prototype's chunk name is a live string: without one, the
     * header came from freed memory (walks naming it are rejected) */
    p->cn_bad = !p->chunk;
    if (!p->chunk) p->chunk = ss_lj_intern(rt, "?", 1);
    memcpy(p->sig, s1, lay->pt_size);
    p->siglen = lay->pt_size;
    p->addr = pt;
    return p;
bad:
    free(p->blob);
    p->blob = NULL;
    return NULL;
}

/* A spill entry for this splice (see ss_lj_runtime.spill), or NULL. */
static struct lj_proto *spill_entry(struct ss_lj_runtime *rt)
{
    if (rt->spill_epoch != rt->epoch) { /* entries of an earlier splice: free */
        for (unsigned i = 0; rt->spill && i < rt->nspill; i++) {
            free(rt->spill[i].blob);
            rt->spill[i].blob = NULL;
            rt->spill[i].addr = 0; /* a trace sample taken before this splice may
                                      still point here: no prototype (trace.c) */
        }
        rt->nspill = 0;
        rt->spill_epoch = rt->epoch;
    }
    if (!rt->spill && !(rt->spill = calloc(LJ_SPILL, sizeof(*rt->spill)))) return NULL;
    return rt->nspill < LJ_SPILL ? &rt->spill[rt->nspill++] : NULL;
}

/* Is the chunk name at p->cn still the string p was filled with? cs: the
 * caller's read of it, used if it read what p holds now, else (NULL too) it
 * is read here. The GC header's link and mark bytes change; the rest (hash,
 * id, length, data) does not. */
static bool same_name(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_proto *p,
                      const struct ss_iov *cs)
{
    uint8_t own[LJ_CNS];
    const uint8_t *b = own;
    unsigned from = rt->lay->gct;
    if (!p->cnslen) return false;
    if (cs && cs->addr == p->cn && cs->len == p->cnslen && !cs->err)
        b = cs->dst;
    else if (ss_mem_read(m, p->cn, own, p->cnslen))
        return false;
    return !memcmp(b + from, p->cns + from, p->cnslen - from);
}

struct ss_iov ss_lj_proto_cn_iov(const struct ss_lj_runtime *rt, uint64_t pt, uint8_t *dst)
{
    const struct lj_proto *p = &rt->protos[(pt >> 3) % LJ_PROTO_SLOTS];
    if (!pt || p->addr != pt || !p->cnslen) return (struct ss_iov){.dst = dst};
    return (struct ss_iov){.addr = p->cn, .dst = dst, .len = p->cnslen};
}

struct lj_proto *ss_lj_proto(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t pt,
                             const uint8_t *hdr)
{
    return ss_lj_proto_cs(rt, m, pt, hdr, NULL);
}

struct lj_proto *ss_lj_proto_cs(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t pt,
                                const uint8_t *hdr, const struct ss_iov *cs)
{
    const struct lj_layout *lay = rt->lay;
    uint8_t own[104], ocs[LJ_CNS];
    if (!lay || !pt || (pt & 3)) return NULL;
    struct lj_proto *p = &rt->protos[(pt >> 3) % LJ_PROTO_SLOTS];
    struct ss_iov iov[2];
    if (!hdr) { /* the header and the cached entry's name in one read */
        iov[0] = (struct ss_iov){.addr = pt, .dst = own, .len = lay->pt_size};
        iov[1] = ss_lj_proto_cn_iov(rt, pt, ocs);
        if (ss_mem_readv(m, iov, iov[1].len ? 2 : 1) || iov[0].err) return NULL;
        hdr = own;
        cs = &iov[1];
    }
    if (p->addr == pt) {
        uint8_t s[104];
        make_sig(lay, hdr, s);
        if (!memcmp(s, p->sig, p->siglen)) {
            if (same_name(rt, m, p, cs)) {
                rt->st.proto_hits++;
                p->epoch = rt->epoch;
                return p;
            }
            if (p->cnslen) rt->st.proto_renamed++;
        }
    }
    rt->st.proto_misses++;
    /* a frame of this splice holds this slot: never overwrite it (two
     * prototypes of one stack sharing a slot named each other's frames) */
    if (p->addr && rt->epoch && p->epoch == rt->epoch && !(p = spill_entry(rt))) return NULL;
    p = fill(rt, m, p, pt, hdr);
    if (p) p->epoch = rt->epoch;
    return p;
}

struct lj_proto *ss_lj_proto_trusted(struct ss_lj_runtime *rt, uint64_t pt)
{
    struct lj_proto *p = &rt->protos[(pt >> 3) % LJ_PROTO_SLOTS];
    if (!pt || p->addr != pt || !rt->gcp.gen || p->gcgen != rt->gcp.gen) return NULL;
    rt->st.proto_hits++;
    p->epoch = rt->epoch;
    return p;
}

uint32_t ss_lj_proto_line(const struct ss_lj_runtime *rt, const struct lj_proto *p, uint32_t pos)
{
    const struct lj_layout *lay = rt->lay;
    uint64_t li = lj_ref(lay, p->blob + lay->pt_lineinfo);
    if (!li || pos > p->sizebc || p->firstline < 0) return 0;
    /* lj_debug_line: instruction 0 (FUNCF) has no lineinfo entry */
    if (pos == p->sizebc) return (uint32_t)p->firstline + p->numline;
    if (pos-- == 0) return (uint32_t)p->firstline;
    unsigned esz = p->numline < 256 ? 1 : p->numline < 65536 ? 2 : 4;
    if (li < p->addr || li - p->addr + (uint64_t)(pos + 1) * esz > p->sizept)
        return (uint32_t)p->firstline;
    const uint8_t *e = p->blob + (li - p->addr) + (size_t)pos * esz;
    uint32_t d = esz == 1 ? e[0] : esz == 2 ? (uint32_t)(e[0] | e[1] << 8) : lj_u32(e);
    return (uint32_t)p->firstline + d;
}
