/* unwind/native_unw.c: the libunwind side of native unwinding.
 *
 * One remote address space per process (global cache, 2^11 entries). Its
 * accessors: find_proc_info binary-searches the file's .eh_frame_hdr through
 * _U<arch>_dwarf_search_unwind_table (declared here, as perf does), and
 * falls back to our .debug_frame index handed over as an
 * UNW_INFO_FORMAT_TABLE; access_mem serves the snapshot and file bytes only
 * (O(1) through memory/'s last-hit cache); access_reg serves the registers
 * of the frame being stepped. */
#include <errno.h>
#include <string.h>

#include "elf/elf.h"
#include "memory/memory.h"
#include "process/process.h"
#include "unwind/native_int.h"
#include "util/pac.h"

#if defined(__x86_64__)
#define ss_unw_search_table _Ux86_64_dwarf_search_unwind_table
#else
#define ss_unw_search_table _Uaarch64_dwarf_search_unwind_table
#endif
extern int ss_unw_search_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
                               unw_proc_info_t *pi, int need_unwind_info, void *arg);

/* libunwind 1.6.2's struct unw_debug_frame_list (include/dwarf.h): what an
 * UNW_INFO_FORMAT_TABLE's table_data points to. */
struct unw_dfl_mirror {
    unw_word_t start, end, load_offset;
    char *debug_frame;
    size_t debug_frame_size;
    const struct ss_dframe_entry *index;
    size_t index_size; /* bytes */
    void *next;
};

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                          int need_unwind_info, void *arg)
{
    struct ss_uctx *u = arg;
    const struct ss_mapping *mp = ss_proc_find_cached(u->np->proc, ip);
    if (!mp || !mp->elf) {
        u->noinfo = true;
        return -UNW_ENOINFO;
    }
    struct ss_elf *e = mp->elf;
    int r = -UNW_ENOINFO;
    if (e->eh_hdr_ok) {
        unw_dyn_info_t di;
        memset(&di, 0, sizeof(di));
        uint64_t hdr = e->eh_hdr_vaddr + mp->bias;
        di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
        di.start_ip = mp->d.start;
        di.end_ip = mp->d.end;
        di.u.rti.segbase = hdr;
        di.u.rti.table_len = e->fde_count * 8 / sizeof(unw_word_t);
        di.u.rti.table_data = hdr + 12;
        r = ss_unw_search_table(as, ip, &di, pi, need_unwind_info, arg);
        if (r >= 0) {
            if (need_unwind_info) ss_pac_cfi_fix(u->np, pi, false);
            return 0;
        }
    }
    const struct ss_dframe *df = ss_elf_debug_frame(e);
    uint64_t vaddr = ip - mp->bias;
    if (df && vaddr >= df->lo && vaddr < df->hi) {
        struct unw_dfl_mirror dfl = {
            .start = mp->d.start,
            .end = mp->d.end,
            .debug_frame = (char *)df->sec,
            .debug_frame_size = df->size,
            .index = df->index,
            .index_size = df->n * sizeof(*df->index),
        };
        unw_dyn_info_t di;
        memset(&di, 0, sizeof(di));
        di.format = UNW_INFO_FORMAT_TABLE;
        di.start_ip = mp->d.start;
        di.end_ip = mp->d.end;
        di.u.ti.segbase = (unw_word_t)mp->bias;
        di.u.ti.table_len = sizeof(dfl) / sizeof(unw_word_t);
        di.u.ti.table_data = (unw_word_t *)&dfl;
        r = ss_unw_search_table(as, ip, &di, pi, need_unwind_info, arg);
        if (r >= 0) {
            if (need_unwind_info) ss_pac_cfi_fix(u->np, pi, true);
            return 0;
        }
    }
    u->noinfo = true;
    return -UNW_ENOINFO;
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
    (void)as, (void)pi, (void)arg;
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dil, void *arg)
{
    (void)as, (void)dil, (void)arg;
    return -UNW_ENOINFO;
}

/* Unrelocated file bytes at addr, whatever the mapping's protection: what
 * libunwind reads outside the stack and the unwind tables is the personality
 * routine's GOT slot of 'P' augmentations (DW_EH_PE_indirect), whose value it
 * stores but never uses. perf serves everything outside the stack from the
 * file in the same way. */
static const void *raw_file_bytes(struct ss_nproc *np, uint64_t addr, size_t len)
{
    const struct ss_mapping *mp = ss_proc_find_cached(np->proc, addr);
    return mp ? ss_mapping_file_bytes(mp, addr, len) : NULL;
}

/* Code bytes of executable memory that is not file-backed (JIT code) are
 * not read from the target: libunwind's x86-64 step reads code only for its
 * heuristics on frames without CFI (is the ip readable at all, is it a PLT
 * stub). Zeros say "valid code, not a PLT stub", so it goes on to follow the
 * frame pointer instead of treating the ip as a bad function pointer. */
static bool anon_code(struct ss_nproc *np, uint64_t addr)
{
    const struct ss_mapping *mp = ss_proc_find_cached(np->proc, addr);
    return mp && !mp->elf && (mp->d.prot & SS_MAP_X) && addr + 8 <= mp->d.end;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *valp, int write, void *arg)
{
    (void)as;
    struct ss_uctx *u = arg;
    if (write) return -UNW_EREADONLYREG;
    struct ss_mem *m = u->np->mem;
    const void *p = ss_pac_cfi_peek(u->np, addr); /* CFI programs fixed for libunwind */
    if (p) {
        memcpy(valp, p, 8);
        return 0;
    }
    p = ss_mem_peek_snap(m, addr, 8);
    if (p && m->track) ss_mem_track_snap(m->track, m, addr, 8);
    if (!p) p = ss_mem_peek(m, addr, 8);
    if (!p) p = raw_file_bytes(u->np, addr, 8);
    if (!p && anon_code(u->np, addr)) {
        *valp = 0;
        return 0;
    }
    if (!p) {
        if (!u->faulted) {
            u->faulted = true;
            u->fault_addr = addr;
        }
        return -UNW_EINVAL;
    }
    memcpy(valp, p, 8);
    return 0;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *valp, int write, void *arg)
{
    (void)as;
    struct ss_uctx *u = arg;
    if (write) return -UNW_EREADONLYREG;
    if (reg < 0 || reg >= SS_DR_COUNT || !(u->regs.valid & SS_DBIT(reg))) return -UNW_EBADREG;
    *valp = u->regs.r[reg];
    return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
                        void *arg)
{
    (void)as, (void)reg, (void)val, (void)write, (void)arg;
    return -UNW_EINVAL;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
    (void)as, (void)c, (void)arg;
    return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
                         unw_word_t *off, void *arg)
{
    (void)as, (void)addr, (void)buf, (void)len, (void)off, (void)arg;
    return -UNW_ENOINFO;
}

static unw_accessors_t accessors = {
    .find_proc_info = find_proc_info,
    .put_unwind_info = put_unwind_info,
    .get_dyn_info_list_addr = get_dyn_info_list_addr,
    .access_mem = access_mem,
    .access_reg = access_reg,
    .access_fpreg = access_fpreg,
    .resume = resume,
    .get_proc_name = get_proc_name,
};

int ss_unw_as_new(struct ss_nproc *np, struct ss_err *err)
{
    np->as = unw_create_addr_space(&accessors, 0);
    if (!np->as) {
        ss_err_set(err, -ENOMEM, "pid %d: unw_create_addr_space failed",
                   (int)ss_proc_pid(np->proc));
        return -ENOMEM;
    }
    unw_set_caching_policy(np->as, UNW_CACHE_GLOBAL);
    unw_set_cache_size(np->as, 1u << 11, 0); /* default 128; the rule cache takes the hot ips */
    return 0;
}

void ss_unw_as_free(struct ss_nproc *np)
{
    if (np->as) unw_destroy_addr_space(np->as);
    np->as = NULL;
}

/* ---- CFI rows from libunwind ---- */
struct rows {
    uint64_t lo[64], hi[64];
    struct ss_nrule r[64];
    size_t n;
    int64_t bias;
    struct ss_elf *e;
};

static void rows_flush(struct rows *t)
{
    ss_nrules_add(t->e, t->lo, t->hi, t->r, t->n);
    t->n = 0;
}

static int row_cb(void *token, void *rs, size_t size, unw_word_t start, unw_word_t end)
{
    struct rows *t = token;
    if (t->n == 64) rows_flush(t);
    ss_nrule_compile(rs, size, &t->r[t->n]);
    t->lo[t->n] = start - t->bias;
    t->hi[t->n] = end - t->bias;
    t->n++;
    return 0;
}

void ss_unw_load_rows(struct ss_nproc *np, uint64_t look)
{
    const struct ss_mapping *mp = ss_proc_find_cached(np->proc, look);
    if (!mp || !mp->elf) return;
    struct ss_uctx u = {.np = np};
    u.regs.r[SS_DR_IP] = look;
    u.regs.r[SS_DR_SP] = np->mem->snap_base;
    u.regs.valid = (SS_DBIT(SS_DR_IP)) | (SS_DBIT(SS_DR_SP));
    struct rows t = {.n = 0, .bias = mp->bias, .e = mp->elf};
    unw_cursor_t c;
    memset(&c, 0, sizeof(c)); /* see ss_unw_step */
    np->st.rule_loads++;
    if (unw_init_remote(&c, np->as, &u) < 0) return;
    unw_reg_states_iterate(&c, row_cb, &t);
    if (t.n) rows_flush(&t);
}

/* ---- libunwind steps ---- */
static void read_regs(unw_cursor_t *c, struct ss_native_frame *out, uint64_t pac_mask)
{
#if defined(__x86_64__)
    (void)pac_mask; /* no pointer authentication */
#endif
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < SS_DR_COUNT; i++) {
        unw_word_t v;
#if !defined(__x86_64__)
        /* aarch64: UNW_REG_IP is x30 (unw_get_reg answers the frame's pc
         * for it) and the pc register's location is still the callee's:
         * the pc from UNW_REG_IP below; the caller's own x30 is unknown */
        if (i == SS_DR_X30 || i == SS_DR_IP) continue;
#endif
        if (unw_get_reg(c, i, &v) == 0) {
            out->regs.r[i] = v;
            out->regs.valid |= SS_DBIT(i);
        }
    }
#if !defined(__x86_64__)
    unw_word_t ip;
    if (unw_get_reg(c, UNW_REG_IP, &ip) == 0) {
        /* a return address saved by code built with pac-ret is signed:
         * without its signature (util/pac.h; native_pac.c) */
        out->regs.r[SS_DR_IP] = ss_pac_strip(ip, pac_mask);
        out->regs.valid |= SS_DBIT(SS_DR_IP);
    }
#endif
}

static enum ss_trunc fail_reason(struct ss_nproc *np, const struct ss_uctx *u, int r)
{
    if (u->faulted) return ss_native_fault_reason(np, u->fault_addr);
    if (r == -UNW_EBADFRAME) return SS_TRUNC_LOOP;
    if (r == -UNW_ENOINFO || u->noinfo) return SS_TRUNC_NOINFO;
    return SS_TRUNC_ERROR;
}

int ss_unw_step(struct ss_nproc *np, struct ss_native_frame *f, struct ss_native_frame *caller,
                enum ss_trunc *why)
{
    struct ss_uctx u = {.np = np, .regs = f->regs};
    u.regs.r[SS_DR_IP] = ss_nf_lookup_ip(f); /* a fresh cursor looks up at ip itself */
    if (np->mem->track) np->mem->track->dregs = UINT64_MAX; /* any register (memo.c) */
    /* zeroed: libunwind's remote init leaves the exception-handling
     * registers' state unset, and its aarch64 x0-x3 were then read from
     * whatever the stack held (found by the rule check, ss_nproc_set_check) */
    unw_cursor_t c;
    memset(&c, 0, sizeof(c));
    np->st.unw_steps++;
    int r = unw_init_remote(&c, np->as, &u);
    if (r >= 0) r = unw_step(&c);
    if (r <= 0) {
        *why = r == 0 ? (u.noinfo ? SS_TRUNC_NOINFO : SS_TRUNC_NONE) : fail_reason(np, &u, r);
        return 0;
    }
    read_regs(&c, caller, np->pac_mask);
    if (!(caller->regs.valid & (SS_DBIT(SS_DR_IP))) ||
        !(caller->regs.valid & (SS_DBIT(SS_DR_SP)))) {
        *why = fail_reason(np, &u, -UNW_EINVAL);
        return 0;
    }
    /* lost registers (native.h): a register libunwind left as it was may
     * still be the value of code without CFI below (one it reloaded with
     * the same value is taken as lost too: no proof either way); over code
     * without CFI (its frame-pointer guess) all but ip, sp and the frame
     * pointer are that code's */
    uint64_t same = 0;
    for (unsigned d = 0; d < SS_DR_COUNT; d++)
        if (caller->regs.r[d] == f->regs.r[d]) same |= SS_DBIT(d);
    caller->regs.lost = f->regs.lost & same;
    if (u.noinfo)
        caller->regs.lost |=
            caller->regs.valid & ~(SS_DBIT(SS_DR_IP) | SS_DBIT(SS_DR_SP) | SS_DBIT(SS_DR_FP));
    caller->regs.lost &= caller->regs.valid & ~(SS_DBIT(SS_DR_IP) | SS_DBIT(SS_DR_SP));
    caller->flags = SS_NF_UNW | (u.noinfo ? SS_NF_NOCFI : 0);
    if (u.noinfo) f->flags |= SS_NF_JIT; /* named as native_scan.c's steps name it */
    if (unw_is_signal_frame(&c) > 0) {
        f->flags |= SS_NF_SIGNAL;
        caller->flags |= SS_NF_EXACT;
    }
    f->cfa = caller->regs.r[SS_DR_SP];
    return 1;
}

unsigned ss_unw_walk(struct ss_nproc *np, struct ss_native_frame *out, unsigned max,
                     enum ss_trunc *why)
{
    struct ss_uctx u = {.np = np, .regs = out[0].regs};
    if (!(out[0].flags & SS_NF_EXACT)) u.regs.r[SS_DR_IP] -= 1;
    if (np->mem->track) np->mem->track->dregs = UINT64_MAX;
    unw_cursor_t c;
    memset(&c, 0, sizeof(c)); /* see ss_unw_step */
    unsigned n = 1;
    if (unw_init_remote(&c, np->as, &u) < 0) {
        *why = SS_TRUNC_ERROR;
        return 1;
    }
    for (;;) {
        u.faulted = u.noinfo = false;
        np->st.unw_steps++;
        int r = unw_step(&c);
        if (r <= 0) {
            *why = r == 0 ? (u.noinfo ? SS_TRUNC_NOINFO : SS_TRUNC_NONE) : fail_reason(np, &u, r);
            return n;
        }
        struct ss_native_frame nf;
        read_regs(&c, &nf, np->pac_mask);
        nf.flags = SS_NF_UNW | (u.noinfo ? SS_NF_NOCFI : 0);
        if (u.noinfo) out[n - 1].flags |= SS_NF_JIT;
        if (unw_is_signal_frame(&c) > 0) {
            out[n - 1].flags |= SS_NF_SIGNAL;
            nf.flags |= SS_NF_EXACT;
        }
        out[n - 1].cfa = nf.regs.r[SS_DR_SP];
        if (!ss_native_check(np, &out[n - 1], &nf, why)) return n;
        if (n == max) {
            *why = SS_TRUNC_DEPTH;
            return n;
        }
        out[n++] = nf;
    }
}
