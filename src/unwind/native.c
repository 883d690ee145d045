/* unwind/native.c: stepping native frames (see native.h): the per-process
 * direct-mapped rule cache in front of the per-file CFI row tables, applying
 * plain rules without libunwind, handing the rest to libunwind
 * (native_unw.c), and the sanity checks that end a walk (root, end of
 * snapshot, repeated frame, ip outside mappings, frame cap); walks that
 * hold at anonymous code without CFI for the caller to look at first
 * (LuaJIT traces) and go on from there; code without CFI is stepped out of
 * by native_scan.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "elf/elf.h"
#include "memory/memory.h"
#include "process/process.h"
#include "unwind/native_int.h"
#include "util/pac.h"

void ss_native_frame_from_sample(struct ss_native_frame *f, const uint64_t regs[SS_NREGS])
{
    memset(f, 0, sizeof(*f));
    for (unsigned i = 0; i < SS_NREGS; i++)
        if (SS_PERF_GP_MASK & (1ull << i)) {
            f->regs.r[ss_perf_to_dwarf[i]] = regs[i];
            f->regs.valid |= SS_DBIT(ss_perf_to_dwarf[i]);
        }
    f->flags = SS_NF_EXACT;
}

void ss_native_frame_init(struct ss_native_frame *f, const struct ss_nregs *regs, bool exact)
{
    memset(f, 0, sizeof(*f));
    f->regs = *regs;
    f->flags = exact ? SS_NF_EXACT : 0;
}

int ss_nproc_new(struct ss_nproc **out, struct ss_proc *proc, struct ss_mem *mem,
                 struct ss_err *err)
{
    struct ss_nproc *np = calloc(1, sizeof(*np));
    if (np) np->rc = calloc(1u << SS_RC_BITS_MIN, sizeof(*np->rc));
    if (!np || !np->rc) {
        free(np);
        return -ENOMEM;
    }
    np->rc_bits = SS_RC_BITS_MIN;
    np->proc = proc;
    np->mem = mem;
    np->gen = ss_proc_generation(proc);
    int r = ss_unw_as_new(np, err);
    if (r < 0) {
        free(np->rc);
        free(np);
        return r;
    }
    *out = np;
    return 0;
}

void ss_nproc_free(struct ss_nproc *np)
{
    if (!np) return;
    ss_unw_as_free(np);
    ss_nscan_free(np);
    ss_nmemo_free(np->nmemo);
    free(np->pac_cfi);
    free(np->rc);
    free(np);
}

void ss_nproc_set_mode(struct ss_nproc *np, enum ss_native_mode mode)
{
    np->mode = mode;
}

void ss_nproc_set_pac(struct ss_nproc *np, uint64_t mask)
{
    np->pac_mask = mask;
}

void ss_nproc_set_memo(struct ss_nproc *np, bool on)
{
    np->memo_on = on;
}

void ss_nproc_set_check(struct ss_nproc *np, bool on)
{
    np->check = on;
}

uint64_t ss_nproc_memo_hits(const struct ss_nproc *np)
{
    return ss_nmemo_hits(np->nmemo);
}

const struct ss_nstats *ss_nproc_stats(const struct ss_nproc *np)
{
    return &np->st;
}

void ss_nproc_flush(struct ss_nproc *np)
{
    memset(np->rc, 0, sizeof(*np->rc) << np->rc_bits);
    unw_flush_cache(np->as, 0, 0);
    np->gen = ss_proc_generation(np->proc);
}

static inline void check_gen(struct ss_nproc *np)
{
    if (np->gen != ss_proc_generation(np->proc)) ss_nproc_flush(np);
}

enum ss_trunc ss_native_fault_reason(const struct ss_nproc *np, uint64_t addr)
{
    const struct ss_mem *m = np->mem;
    uint64_t off = addr - m->snap_base;
    if (addr >= m->snap_base + m->snap_len) return SS_TRUNC_SNAPSHOT;
    /* a page the copy could not read: its end too */
    if (m->snap_holes && off < m->snap_len && ss_mem_snap_hole(m, off, 1)) return SS_TRUNC_SNAPSHOT;
    return SS_TRUNC_ERROR;
}

/* The rule for lookup address look (cache, file table, or fetched now). */
static inline struct ss_rc_ent *rc_slot(struct ss_nproc *np, uint64_t look)
{
    return &np->rc[(look * 0x9e3779b97f4a7c15ull) >> (64 - np->rc_bits)];
}

/* As many misses as the cache has entries: four times the entries (the
 * old ones are dropped; it is a cache). Out of memory: stay as it is. */
static void rc_grow(struct ss_nproc *np)
{
    np->rc_misses = 0;
    unsigned bits = np->rc_bits + 2 < SS_RC_BITS ? np->rc_bits + 2 : SS_RC_BITS;
    struct ss_rc_ent *n = calloc(1u << bits, sizeof(*n));
    if (!n) return;
    free(np->rc);
    np->rc = n;
    np->rc_bits = bits;
}

/* The rule for lookup address look (cache, file table, or fetched now).
 * Entries are only made for addresses of frames that passed
 * ss_native_check, i.e. inside an executable mapping. */
/* Code at a file's ELF entry point that no CFI covers is the outermost
 * frame: only the kernel enters it (the program's or, for a dynamically
 * linked one, ld.so's _start, whose stub calls _dl_start and then _dl_init
 * within its first 64 bytes; glibc's RTLD_START has no CFI). */
#define SS_ENTRY_SPAN 64
static bool at_entry(const struct ss_elf *e, uint64_t vaddr)
{
    return e->e_entry && vaddr >= e->e_entry && vaddr - e->e_entry < SS_ENTRY_SPAN;
}

#if !defined(__x86_64__)
#define A64_SIGRETURN 0xd4000001d2801168ull /* mov x8, #139 (rt_sigreturn); svc #0 */
/* The 8 bytes at addr as libunwind's reads get them (native_unw.c's
 * access_mem: the sample's copies, then the files' bytes). */
static bool code_word(struct ss_nproc *np, uint64_t addr, uint64_t *w)
{
    const void *p = ss_mem_peek_snap(np->mem, addr, 8);
    if (!p) p = ss_mem_peek(np->mem, addr, 8);
    if (!p) {
        const struct ss_mapping *mp = ss_proc_find_cached(np->proc, addr);
        p = mp ? ss_mapping_file_bytes(mp, addr, 8) : NULL;
    }
    if (!p) return false;
    memcpy(w, p, 8);
    return true;
}
#endif

static const struct ss_nrule *get_rule(struct ss_nproc *np, uint64_t look)
{
    struct ss_rc_ent *ce = rc_slot(np, look);
    if (ce->key == look) return &ce->r;
    np->st.cache_misses++;
    if (++np->rc_misses > (1u << np->rc_bits) && np->rc_bits < SS_RC_BITS) rc_grow(np);
    const struct ss_mapping *mp = ss_proc_find_cached(np->proc, look);
    struct ss_nrule rule;
    memset(&rule, 0, sizeof(rule));
    rule.kind = SS_NR_NOINFO;
    if (mp && mp->elf) {
        uint64_t vaddr = look - mp->bias;
        struct ss_elf *e = mp->elf;
        if (!ss_nrules_lookup(e, vaddr, &rule)) {
            ss_unw_load_rows(np, look);
            check_gen(np);
            if (!ss_nrules_lookup(e, vaddr, &rule)) {
                uint64_t lo = vaddr, hi = vaddr + 1;
                memset(&rule, 0, sizeof(rule));
                rule.kind = at_entry(e, vaddr) ? SS_NR_END : SS_NR_NOINFO;
                ss_nrules_add(e, &lo, &hi, &rule, 1);
            }
        }
    }
#if !defined(__x86_64__)
    /* libunwind's aarch64 step takes code at the sigreturn call as a signal
     * frame whatever its CFI says (and looks at code it cannot read as a
     * bad frame): libunwind's then */
    uint64_t w;
    if ((rule.kind == SS_NR_OK || rule.kind == SS_NR_END) &&
        (!code_word(np, look, &w) || w == A64_SIGRETURN))
        rule.kind = SS_NR_COMPLEX;
#endif
    ce = rc_slot(np, look); /* check_gen may have flushed the cache */
    ce->key = look;
    ce->r = rule;
    return &ce->r;
}

/* What apply_rule reads with rule r at cfa, for the log of the walk's
 * inputs: the CFA's register, the saved registers' slots. */
static void track_rule(struct ss_mem *m, const struct ss_nrule *r, uint64_t cfa)
{
    m->track->dregs |= SS_DBIT(r->cfa_reg);
    for (int s = 0; s < SS_NRS_COUNT; s++)
        if (r->off[s] != SS_NR_SAME && r->off[s] != SS_NR_UNDEF)
            ss_mem_track_snap(m->track, m, cfa + r->off[s], 8);
}

/* The caller's registers from f's by rule r at cfa, slots 0..n-1: kept
 * ("same value": lost ones stay lost), undefined, or loaded from their save
 * slot (proven). popped: a slot below the sp of an interrupted frame (leaf,
 * or below a signal frame) was popped in the epilogue, the register holds
 * it (x86-64; libunwind's aarch64 step reads the slot). false: the slot
 * at *miss is not in the snapshot. */
static bool load_saved(struct ss_nproc *np, const struct ss_native_frame *f,
                       const struct ss_nrule *r, uint64_t cfa, int n, bool popped,
                       struct ss_native_frame *caller, uint64_t *miss)
{
    caller->regs = f->regs;
    caller->regs.valid &= ~(uint64_t)r->undef;
    for (int s = 0; s < n; s++) {
        int16_t off = r->off[s];
        unsigned d = ss_nrs_dreg[s];
        if (off == SS_NR_SAME) continue;
        if (off == SS_NR_UNDEF) {
            caller->regs.valid &= ~SS_DBIT(d);
            continue;
        }
        uint64_t addr = cfa + off;
        if (popped && d != SS_DR_IP && (f->flags & SS_NF_EXACT) && addr + 8 <= ss_nf_sp(f))
            continue;
        const void *p = ss_mem_peek_snap(np->mem, addr, 8);
        if (!p) {
            *miss = addr;
            return false;
        }
        memcpy(&caller->regs.r[d], p, 8);
        caller->regs.valid |= SS_DBIT(d);
        caller->regs.lost &= ~SS_DBIT(d);
    }
    return true;
}

#if defined(__x86_64__)
static int apply_rule(struct ss_nproc *np, struct ss_native_frame *f, const struct ss_nrule *r,
                      struct ss_native_frame *caller, enum ss_trunc *why)
{
    if (!(f->regs.valid & SS_DBIT(r->cfa_reg))) {
        *why = SS_TRUNC_ERROR;
        return 0;
    }
    uint64_t cfa = f->regs.r[r->cfa_reg] + (int64_t)r->cfa_off;
    if (np->mem->track) track_rule(np->mem, r, cfa); /* replay's memo (memo.c) */
    if (np->nlog.on) ss_nmemo_log_rule(np, r, cfa);  /* the memo of native walks */
    f->cfa = cfa;                                    /* known even when the reads below fail */
    uint64_t miss;
    if (!load_saved(np, f, r, cfa, SS_NRS_COUNT, true, caller, &miss)) {
        *why = ss_native_fault_reason(np, miss);
        return 0;
    }
    caller->regs.r[SS_DR_SP] = cfa;
    caller->regs.valid |= SS_DBIT(SS_DR_SP);
    caller->regs.lost &= caller->regs.valid & ~SS_DBIT(SS_DR_SP);
    caller->cfa = 0;
    caller->flags = SS_NF_RULE;
    f->cfa = cfa;
    np->st.rule_steps++;
    return 1;
}

#else
/* arm64: one step by rule r as libunwind's aarch64 step and native_unw.c's
 * read_regs give it: the CFA, x19-x29 loaded or kept or undefined, x0-x18
 * kept or undefined, x30 unknown, the caller's pc the return address
 * (loaded, or a leaf's x30) without its PAC bits (as read_regs strips
 * libunwind's, signed or not: native_pac.c), sp the CFA. 1 done, -1 for
 * libunwind's step wherever libunwind could take another way: a register
 * or slot it needs unknown or out of the snapshot (its reads go further,
 * its frame-pointer guess follows a failed step), a caller at the
 * sigreturn call (a signal frame to it). (libunwind 1.6.2 steps on over a
 * caller's x29 of 0; later ones end the walk there: the rule check,
 * ss_nproc_set_check, shows which.) Not kept for the memo of native walks
 * (opaque, as libunwind's steps are). */
static int apply_rule_a64(struct ss_nproc *np, struct ss_native_frame *f, const struct ss_nrule *r,
                          struct ss_native_frame *caller)
{
    if (!(f->regs.valid & SS_DBIT(r->cfa_reg))) return -1;
    uint64_t cfa = f->regs.r[r->cfa_reg] + (int64_t)r->cfa_off, ra, w;
    int16_t raoff = r->off[SS_NRS_RA];
    const void *p;
    if (raoff == SS_NR_SAME) { /* a leaf's row: the return address in x30 */
        if (!(f->regs.valid & SS_DBIT(SS_DR_X30))) return -1;
        ra = f->regs.r[SS_DR_X30];
    } else {
        if (!(p = ss_mem_peek_snap(np->mem, cfa + raoff, 8))) return -1;
        memcpy(&ra, p, 8);
    }
    if (code_word(np, ra, &w) && w == A64_SIGRETURN) return -1;
    uint64_t miss;
    if (!load_saved(np, f, r, cfa, SS_NRS_RA, false, caller, &miss)) return -1;
    if (np->mem->track) { /* replay's memo (memo.c): any register, as libunwind's */
        track_rule(np->mem, r, cfa);
        np->mem->track->dregs = UINT64_MAX;
    }
    np->nlog.opaque = true;
    caller->regs.r[SS_DR_IP] = ss_pac_strip(ra, np->pac_mask);
    caller->regs.r[SS_DR_SP] = cfa;
    caller->regs.valid |= SS_DBIT(SS_DR_IP) | SS_DBIT(SS_DR_SP);
    caller->regs.lost &= caller->regs.valid & ~(SS_DBIT(SS_DR_SP) | SS_DBIT(SS_DR_IP));
    caller->cfa = 0;
    caller->flags = SS_NF_RULE;
    f->cfa = cfa;
    np->st.rule_steps++;
    return 1;
}
#endif

int ss_native_check(struct ss_nproc *np, const struct ss_native_frame *f,
                    const struct ss_native_frame *caller, enum ss_trunc *why)
{
    uint64_t ip = ss_nf_ip(caller), sp = ss_nf_sp(caller);
    if (ip == 0) {
        *why = SS_TRUNC_NONE;
        return 0;
    }
    if (ip == ss_nf_ip(f) && sp == ss_nf_sp(f)) {
        *why = SS_TRUNC_LOOP;
        return 0;
    }
#if defined(__x86_64__)
    bool down = sp > ss_nf_sp(f); /* a call pushes the return address */
#else
    /* arm64: a call leaves the return address in x30, so an interrupted
     * frameless callee (the leaf, or one under a signal) has its caller's sp */
    bool down = sp > ss_nf_sp(f) || (sp == ss_nf_sp(f) && (f->flags & SS_NF_EXACT));
#endif
    if (!down && !(f->flags & SS_NF_SIGNAL)) { /* stacks grow down */
        *why = SS_TRUNC_LOOP;
        return 0;
    }
    uint64_t look = ss_nf_lookup_ip(caller);
    if (rc_slot(np, look)->key == look) return 1; /* seen in an executable mapping */
    const struct ss_mapping *mp = ss_proc_find(np->proc, ip);
    if (!mp || !(mp->d.prot & SS_MAP_X)) {
        *why = SS_TRUNC_BADIP;
        return 0;
    }
    return 1;
}

/* Is ip in anonymous memory (no file behind it) or in no mapping? */
static bool anon_ip(struct ss_nproc *np, uint64_t ip)
{
    const struct ss_mapping *mp = ss_proc_find_cached(np->proc, ip);
    return !mp || (!mp->elf && !mp->d.path[0]);
}

const struct ss_nrule *ss_native_rule(struct ss_nproc *np, uint64_t look)
{
    return get_rule(np, look);
}

/* The check of a rule step from f0 that gave r (caller, *why): libunwind's
 * step from a copy of f0 (its registers and SS_NF_EXACT, which the rule
 * step left as they were) gives the same, the same registers known, the
 * same values (ss_nproc_set_check). A zero return address is the root
 * for both: the rule's caller at ip 0 (ss_native_check ends the walk
 * there), libunwind's end of the walk (the stack scan's candidates read
 * stale zeros so: arm64-nocfi-rwx, 501 such steps). */
static void check_step(struct ss_nproc *np, const struct ss_native_frame *f0, int r,
                       const struct ss_native_frame *caller, enum ss_trunc why)
{
    struct ss_native_frame f = *f0, c;
    enum ss_trunc w = SS_TRUNC_NONE;
    struct ss_mem_track *track = np->mem->track;
    uint64_t unw = np->st.unw_steps;
    bool opaque = np->nlog.opaque;
    np->mem->track = NULL;
    int r2 = ss_unw_step(np, &f, &c, &w);
    np->mem->track = track;
    np->st.unw_steps = unw;
    np->nlog.opaque = opaque;
    bool root = r && !r2 && w == SS_TRUNC_NONE && (caller->regs.valid & SS_DBIT(SS_DR_IP)) &&
                ss_nf_ip(caller) == 0;
    bool same = root || (r2 == r && (r ? c.regs.valid == caller->regs.valid : w == why));
    for (unsigned d = 0; same && !root && r && d < SS_DR_COUNT; d++)
        same = !(c.regs.valid & SS_DBIT(d)) || c.regs.r[d] == caller->regs.r[d];
    np->st.rule_checks++;
    if (!same) np->st.rule_check_diffs++;
}

/* One step by the rule for f: 1 done (not checked yet), 0 the walk ends
 * (*why), -1 no CFI for f (nothing done). */
static int rule_step(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *caller,
                     enum ss_trunc *why)
{
    const struct ss_nrule *rule = get_rule(np, ss_nf_lookup_ip(f));
    if (rule->kind == SS_NR_OK) {
#if defined(__x86_64__)
        f->flags |= SS_NF_FILE; /* rows come from files only */
        int r = apply_rule(np, f, rule, caller, why);
        if (r && !(caller->regs.valid & (SS_DBIT(SS_DR_FP)))) {
            *why = SS_TRUNC_NONE; /* x86-64 ABI: undefined rbp ends the chain */
            return 0;
        }
#else
        struct ss_nrule keep = *rule; /* the cache slot may be reused by the reads' lookups */
        int r = apply_rule_a64(np, f, &keep, caller);
        if (r < 0) {
            np->nlog.opaque = true;
            return ss_unw_step(np, f, caller, why);
        }
        f->flags |= SS_NF_FILE; /* rows come from files only */
#endif
        if (np->check) check_step(np, f, r, caller, *why);
        return r;
    }
    if (rule->kind == SS_NR_END) {
        *why = SS_TRUNC_NONE;
        if (np->check) check_step(np, f, 0, caller, *why);
        return 0;
    }
    if (rule->kind == SS_NR_NOINFO) return -1;
    np->nlog.opaque = true;
    return ss_unw_step(np, f, caller, why);
}

int ss_native_cfi_step(struct ss_nproc *np, struct ss_native_frame *f,
                       struct ss_native_frame *caller, enum ss_trunc *why)
{
    check_gen(np);
    int r = rule_step(np, f, caller, why);
    if (r < 0) {
        *why = SS_TRUNC_NOINFO;
        return 0;
    }
    return r && ss_native_check(np, f, caller, why);
}

/* ss_native_step; with stop_anon, a frame in anonymous memory without CFI
 * ends the walk (SS_TRUNC_NOINFO, *held) before it is stepped out of. Code
 * without CFI is stepped out of by native_scan.c (rules mode). */
static int step(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *caller,
                enum ss_trunc *why, bool stop_anon, bool *held)
{
    check_gen(np);
    int r;
    if (np->mode == SS_NATIVE_RULES) {
        r = rule_step(np, f, caller, why);
        if (r < 0 && stop_anon && anon_ip(np, ss_nf_ip(f))) {
            *why = SS_TRUNC_NOINFO;
            *held = true;
            return 0;
        }
        if (r < 0) return ss_nscan_step(np, f, caller, why); /* checks included */
    } else {
        r = ss_unw_step(np, f, caller, why);
    }
    if (!r) return 0;
    return ss_native_check(np, f, caller, why);
}

int ss_native_step(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *caller,
                   enum ss_trunc *why)
{
    return step(np, f, caller, why, false, NULL);
}

/* Step on from out[n - 1] (n >= 1 frames in out); stop_anon as in step(),
 * never for out[0]. memo (a walk from the leaf, n = 1, without stop_anon:
 * a held end is for the caller to look at): replay's memo of native walks
 * (native_memo.c), above the leaf the frames a walk with the same inputs
 * made. */
static unsigned walk_on(struct ss_nproc *np, struct ss_native_frame *out, unsigned n, unsigned max,
                        enum ss_trunc *why, bool stop_anon, bool *held, bool memo)
{
    struct ss_native_frame spare;
    bool logging = false;
    for (;;) { /* step straight into out[n]; past the cap into spare */
        struct ss_native_frame *next = n < max ? &out[n] : &spare;
        if (!step(np, &out[n - 1], next, why, stop_anon && n > 1, held)) break;
        if (n == max) {
            *why = SS_TRUNC_DEPTH;
            break;
        }
        n++;
        if (logging) {
            ss_nmemo_log_step(np, &out[n - 1], n - 2);
        } else if (memo && n == 2) {
            unsigned k = ss_nmemo_find(np, &out[1], max - 1, why);
            if (k) {
                n = 1 + k;
                break;
            }
            logging = ss_nmemo_log_start(np, &out[1], max - 1) == 0;
        }
    }
    if (logging) ss_nmemo_log_end(np, &out[1], n - 1, max - 1, *why);
    return n;
}

static unsigned unwind(struct ss_nproc *np, struct ss_native_frame *out, unsigned max,
                       enum ss_trunc *why, bool stop_anon, bool *held)
{
    unsigned n = 1;
    np->st.walks++;
    const struct ss_mapping *mp = ss_proc_find(np->proc, ss_nf_ip(&out[0]));
    if (!mp || !(mp->d.prot & SS_MAP_X))
        *why = SS_TRUNC_BADIP;
    else if (np->mode == SS_NATIVE_UNW_CURSOR)
        n = ss_unw_walk(np, out, max, why);
    else
        n = walk_on(np, out, 1, max, why, stop_anon, held,
                    np->memo_on && np->mode == SS_NATIVE_RULES && !stop_anon);
    np->st.frames += n;
    np->st.trunc[*why]++;
    return n;
}

unsigned ss_native_unwind(struct ss_nproc *np, struct ss_native_frame *out, unsigned max,
                          enum ss_trunc *why)
{
    return unwind(np, out, max, why, false, NULL);
}

unsigned ss_native_unwind_held(struct ss_nproc *np, struct ss_native_frame *out, unsigned max,
                               enum ss_trunc *why, bool *held)
{
    *held = false;
    return unwind(np, out, max, why, true, held);
}

unsigned ss_native_unwind_on(struct ss_nproc *np, struct ss_native_frame *out, unsigned n,
                             unsigned max, enum ss_trunc *why, bool *held)
{
    *held = false;
    struct ss_native_frame spare;
    struct ss_native_frame *next = n < max ? &out[n] : &spare;
    unsigned m = n;
    np->st.trunc[*why]--; /* the held walk's end was counted: count how it ends now */
    if (step(np, &out[n - 1], next, why, false, NULL)) {
        if (n == max)
            *why = SS_TRUNC_DEPTH;
        else
            m = walk_on(np, out, n + 1, max, why, true, held, false);
    }
    np->st.frames += m - n;
    np->st.trunc[*why]++;
    return m;
}
