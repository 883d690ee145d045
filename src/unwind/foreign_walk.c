/* unwind/foreign_walk.c: one native walk of an arm64 sample in an x86-64
 * build (foreign.c): libdw's thread callbacks (memory: the sample's stack
 * snapshot, else the mapped files' bytes; registers: the walk's first
 * frame), the steps, and the checks on each new frame that end a walk
 * where the arm64 build's (native.c, native_scan.c) ends.
 *
 * Steps: a frame whose CFI row is a plain rule (foreign_rules.h) is
 * stepped by the rule cache without libdw; any other (and any step a rule
 * gives up on) is libdw's: a walk started at that frame with its
 * registers, stopped after the next frame. Both give the same registers
 * (checked step by step with ss_unwinder_opts.check_rules). In
 * SS_NATIVE_UNW_STEP mode every step is such a libdw step; in
 * SS_NATIVE_UNW_CURSOR mode the walk is libdw's alone, one
 * dwfl_getthread_frames.
 *
 * Pointer authentication: every return address a step gives (the rule's
 * x30, libdw's pc) is stripped with the capture's PAC mask (fp->pac: the
 * header's, SS_PAC_DEFAULT when it says 0, replay.c; 0 only under
 * STACKSNAP_PAC_MASK=0) before it is a frame's pc and the next step's
 * lookup, as the arm64 build's steps strip theirs (native.c,
 * native_unw.c): libdw 0.188 strips nothing on aarch64, and a signed pc
 * is in no module, so the walk ended at the first signed frame. A libdw
 * step starts from the stripped pc (dwfl_thread_state_register_pc in
 * set_initial_registers, the one place libdwfl takes a pc). The registers
 * keep what was loaded (x30 signed, as libdw's state has it). Not covered:
 * the whole libdw walk (SS_NATIVE_UNW_CURSOR), which goes on inside libdw
 * with the signed pc, as the arm64 build's one-cursor mode does. */
#if defined(__x86_64__)
#include <string.h>

#include "elf/elf.h"
#include "process/process.h"
#include "unwind/a64call.h"
#include "unwind/foreign_int.h"
#include "util/pac.h"

const void *ss_ffile_bytes(struct ss_proc *proc, uint64_t addr, size_t len)
{
    const struct ss_mapping *mp = ss_proc_find_cached(proc, addr);
    return mp ? ss_mapping_file_bytes(mp, addr, len) : NULL;
}

static bool fmem_read(void *ctx, uint64_t addr, uint64_t *val)
{
    struct ss_fproc *fp = ctx;
    const void *p = ss_mem_peek_snap(&fp->up->mem, addr, 8);
    if (!p) p = ss_ffile_bytes(fp->up->proc, addr, 8);
    if (!p) return false;
    memcpy(val, p, 8);
    return true;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    (void)dwfl;
    uint64_t v;
    if (!fmem_read(arg, addr, &v)) return false;
    *result = v;
    return true;
}

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    (void)dwfl;
    struct ss_fproc *fp = arg;
    if (*thread_argp) return 0;
    *thread_argp = fp;
    return (pid_t)fp->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    (void)dwfl, (void)tid;
    *thread_argp = arg;
    return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
    struct ss_fproc *fp = arg;
    for (int i = 0; i < A64_PC; i++) /* each known one: x30 may be unknown */
        if ((fp->valid & (1ull << i)) && !dwfl_thread_state_registers(thread, i, 1, &fp->regs[i]))
            return false;
    dwfl_thread_state_register_pc(thread, fp->regs[A64_PC]);
    return true;
}

static void thread_detach(Dwfl_Thread *thread, void *arg)
{
    (void)thread, (void)arg;
}

const Dwfl_Thread_Callbacks ss_fthread_cbs = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
    .thread_detach = thread_detach,
};

/* Has look (a frame's lookup address) a CFI row in its file? (The rule
 * cache compiles the row libdw finds there, or says it found none.) */
static bool has_cfi(struct ss_fproc *fp, uint64_t look)
{
    return ss_a64_rule(fp->rc, fp->dwfl, look)->kind != SS_A64R_NOINFO;
}

/* Code at the file's ELF entry that no CFI covers: the root (native.c). */
static bool at_entry(struct ss_proc *proc, uint64_t ip)
{
    const struct ss_mapping *mp = ss_proc_find_cached(proc, ip);
    uint64_t v = mp && mp->elf ? ip - (uint64_t)mp->bias : 0;
    return v && mp->elf->e_entry && v >= mp->elf->e_entry && v - mp->elf->e_entry < 64;
}

/* Could ra be a return address (native_scan.c's ret_addr, arm64): in an
 * executable file mapping whose CFI covers ra - 1, right after a call: BL
 * into an executable file mapping, or BLR/BLRA*. */
bool ss_fret_addr(struct ss_fproc *fp, uint64_t ra)
{
    struct ss_proc *proc = fp->up->proc;
    const struct ss_mapping *mp = ss_proc_find_cached(proc, ra);
    if (ra < 4096 || !mp || !mp->elf || !(mp->d.prot & SS_MAP_X)) return false;
    const uint8_t *p = ss_ffile_bytes(proc, ra - 4, 4);
    if (!p || !has_cfi(fp, ra - 1)) return false;
    uint64_t target = 0;
    unsigned kind = ss_a64_call(p, ra, &target);
    if (kind != SS_A64_CALL_DIR) return kind == SS_A64_CALL_IND;
    const struct ss_mapping *t = ss_proc_find_cached(proc, target);
    return t && t->elf && (t->d.prot & SS_MAP_X);
}

/* Is the frame just added at k, on the walk from the leaf's x30, one
 * native_scan.c's trial takes: within its first SCAN_TRIAL steps every
 * return address into file code with CFI follows a call; a zero return
 * address after the first is a stale slot, not the root. */
static bool trial_ok(struct ss_fproc *fp, const struct fwalk *w, unsigned k)
{
    unsigned i = k - w->trial;
    if (!w->trial || k <= w->trial || i > SCAN_TRIAL) return true;
    const struct ss_native_frame *f = &w->nf[k];
    uint64_t ip = ss_nf_ip(f);
    const struct ss_mapping *mp = ss_proc_find_cached(fp->up->proc, ip);
    if (f->flags & SS_NF_EXACT) return true; /* under a signal frame */
    return !(mp && mp->elf && (mp->d.prot & SS_MAP_X) && ip >= 4096 && has_cfi(fp, ip - 1)) ||
           ss_fret_addr(fp, ip);
}

/* Add the frame at pc (act: interrupted, not a return address) with
 * registers g to the walk, after the checks that end a walk there:
 * DWARF_CB_OK to go on, DWARF_CB_ABORT with w->why set to end. */
static int add_frame(struct ss_fproc *fp, struct fwalk *w, uint64_t pc, bool act,
                     const struct ss_a64regs *g)
{
    if (!(g->valid >> A64_SP & 1)) {
        w->why = SS_TRUNC_ERROR;
        return DWARF_CB_ABORT;
    }
    uint64_t sp = g->r[A64_SP];
    if (w->n) {
        const struct ss_native_frame *f = &w->nf[w->n - 1];
        bool fexact = f->flags & SS_NF_EXACT;
        if (pc == 0) {
            w->refused = w->trial && w->n > w->trial && w->n - w->trial < SCAN_TRIAL;
            w->why = SS_TRUNC_NONE;
            return DWARF_CB_ABORT;
        }
        if ((pc == ss_nf_ip(f) && sp == ss_nf_sp(f)) ||
            !(sp > ss_nf_sp(f) || (sp == ss_nf_sp(f) && fexact))) {
            w->why = SS_TRUNC_LOOP;
            return DWARF_CB_ABORT;
        }
        const struct ss_mapping *mp = ss_proc_find(fp->up->proc, pc);
        if (!mp || !(mp->d.prot & SS_MAP_X)) {
            w->why = SS_TRUNC_BADIP;
            return DWARF_CB_ABORT;
        }
        if (w->n == w->max) {
            w->why = SS_TRUNC_DEPTH;
            return DWARF_CB_ABORT;
        }
    }
    struct ss_native_frame *o = &w->nf[w->n++];
    memset(o, 0, sizeof(*o));
    o->regs.r[SS_DR_IP] = pc;
    o->regs.r[SS_DR_SP] = sp;
    o->regs.valid = SS_DBIT(SS_DR_IP) | SS_DBIT(SS_DR_SP);
    o->flags = act ? SS_NF_EXACT : 0;
    struct vmregs *v = &w->vr[w->n - 1];
    v->valid = 0;
    for (int i = 0; i < VM_REGS; i++)
        if (g->valid >> (A64_X19 + i) & 1) {
            v->r[i] = g->r[A64_X19 + i];
            v->valid |= (uint16_t)(1u << i);
        }
    w->cur = *g;
    if (!trial_ok(fp, w, w->n - 1)) {
        w->refused = true;
        return DWARF_CB_ABORT;
    }
    if (!has_cfi(fp, act ? pc : pc - 1)) {
        w->nocfi = true;
        w->why = at_entry(fp->up->proc, pc) ? SS_TRUNC_NONE : SS_TRUNC_NOINFO;
        return DWARF_CB_ABORT;
    }
    return DWARF_CB_OK;
}

static int frame_cb(Dwfl_Frame *state, void *arg)
{
    struct ss_fproc *fp = arg;
    struct fwalk *w = fp->w;
    Dwarf_Addr pc;
    bool act;
    if (!dwfl_frame_pc(state, &pc, &act)) {
        w->why = SS_TRUNC_ERROR;
        return DWARF_CB_ABORT;
    }
    if (w->restart) { /* the first frame is a return address, given as pc - 1 */
        pc += 1;
        act = false;
        w->restart = false;
    }
    /* a signed return address without its signature (see above) */
    pc = ss_pac_strip(pc, fp->pac);
    if (w->skip) { /* libdw's step: the frame it steps from */
        w->skip = false;
        return DWARF_CB_OK;
    }
    struct ss_a64regs g = {.valid = 0};
    for (unsigned i = 0; i < SS_A64R_NREG; i++) {
        Dwarf_Word x;
        if (dwfl_frame_reg(state, i, &x) == 0) {
            g.r[i] = x;
            g.valid |= 1ull << i;
        }
    }
    if (w->probe) {
        *w->probe = g;
        w->probe_pc = pc;
        w->probe_act = act;
        w->probed = true;
        return DWARF_CB_ABORT;
    }
    int r = add_frame(fp, w, pc, act, &g);
    if (r == DWARF_CB_OK && w->one) {
        w->stepped = true;
        return DWARF_CB_ABORT;
    }
    return r;
}

/* libdw's walk from fp->regs, w's flags as set: dwfl_getthread_frames'
 * result (0: ended at an undefined pc). */
static int dw_walk(struct ss_fproc *fp, struct fwalk *w)
{
    fp->w = w;
    int r = dwfl_getthread_frames(fp->dwfl, (pid_t)fp->tid, frame_cb, fp);
    if (r == -1 && !w->probe) {
        /* a read libdw could not make: the snapshot's end, as native.c says it */
        uint64_t sp = w->n ? ss_nf_sp(&w->nf[w->n - 1]) : 0;
        const struct ss_mem *m = &fp->up->mem;
        w->why = sp >= m->snap_base ? SS_TRUNC_SNAPSHOT : SS_TRUNC_ERROR;
    }
    return r;
}

/* libdw's first frame: registers g, pc (less 1 when dec: a return address) */
static void dw_start(struct ss_fproc *fp, const struct ss_a64regs *g, uint64_t pc, bool dec)
{
    memcpy(fp->regs, g->r, sizeof(g->r));
    fp->valid = g->valid & ((1ull << SS_A64R_NREG) - 1);
    fp->regs[A64_PC] = pc - dec;
}

/* The check of a rule step from the last frame (at pc) to the caller
 * registers ng (end: to the walk's end): libdw's step from the same frame
 * gives the same pc, the same registers x0-x30, sp (same known ones, same
 * values), and a return address, not an interrupted frame (or ends the
 * walk there too). */
static void check(struct ss_fproc *fp, struct fwalk *w, uint64_t pc, const struct ss_a64regs *ng,
                  bool end)
{
    struct ss_a64regs g = {.valid = 0};
    struct fwalk pw = {.probe = &g, .skip = true, .restart = w->dec};
    dw_start(fp, &w->cur, pc, w->dec);
    int r = dw_walk(fp, &pw);
    fp->w = w;
    bool same = end ? !pw.probed && r == 0
                    : pw.probed && !pw.probe_act &&
                          pw.probe_pc == ss_pac_strip(ng->r[A64_X30], fp->pac) &&
                          g.valid == ng->valid;
    for (unsigned i = 0; same && !end && i < SS_A64R_NREG; i++)
        same = !(g.valid >> i & 1) || g.r[i] == ng->r[i];
    fp->st->rule_checks++;
    if (!same) fp->st->rule_check_diffs++;
}

/* A rule step from the last frame (at pc): 1 and its caller's registers
 * in ng, -1 the walk ends there (at the root, as libdw's), 0 for libdw's
 * step (no rule; the rule gives up; the caller's row is a signal frame's,
 * which libdw's walk takes as interrupted). */
static int rule_step(struct ss_fproc *fp, struct fwalk *w, uint64_t pc, struct ss_a64regs *ng)
{
    const struct ss_a64rule *r = ss_a64_rule(fp->rc, fp->dwfl, pc - w->dec);
    int k = ss_a64_apply(r, &w->cur, ng, fmem_read, fp);
    if (k <= 0) return k;
    uint64_t npc = ss_pac_strip(ng->r[A64_X30], fp->pac);
    return ss_a64_rule(fp->rc, fp->dwfl, npc - 1)->kind != SS_A64R_SIGNAL;
}

void ss_fwalk(struct ss_fproc *fp, struct fwalk *w)
{
    fp->w = w;
    w->nocfi = false;
    w->why = SS_TRUNC_NONE;
    if (fp->mode == SS_NATIVE_UNW_CURSOR) {
        unsigned n0 = w->n;
        dw_walk(fp, w);
        fp->st->unw_steps += w->n - n0;
        return;
    }
    uint64_t keep[A64_PC + 1], kvalid = fp->valid;
    memcpy(keep, fp->regs, sizeof(keep));
    struct ss_a64regs g = {.valid = fp->valid & ((1ull << SS_A64R_NREG) - 1)};
    memcpy(g.r, fp->regs, sizeof(g.r));
    uint64_t pc = fp->regs[A64_PC];
    bool act = !w->restart;
    w->dec = w->restart;
    pc += w->restart;
    w->restart = false;
    int r = add_frame(fp, w, pc, act, &g);
    while (r == DWARF_CB_OK) {
        int k = fp->mode == SS_NATIVE_RULES ? rule_step(fp, w, pc, &g) : 0;
        if (k < 0) { /* the root: libdw's walk ends without a frame (why: none) */
            if (fp->check) check(fp, w, pc, &g, true);
            fp->st->rule_steps++;
            break;
        }
        if (k > 0) {
            if (fp->check) check(fp, w, pc, &g, false);
            fp->st->rule_steps++;
            pc = ss_pac_strip(g.r[A64_X30], fp->pac);
            w->dec = true;
            r = add_frame(fp, w, pc, false, &g);
            continue;
        }
        fp->st->unw_steps++;
        bool signal = ss_a64_rule(fp->rc, fp->dwfl, pc - w->dec)->kind == SS_A64R_SIGNAL;
        dw_start(fp, &w->cur, pc, w->dec);
        w->restart = w->dec;
        w->skip = w->one = true;
        w->stepped = false;
        dw_walk(fp, w);
        w->skip = w->one = w->restart = false;
        if (!w->stepped) break;
        pc = ss_nf_ip(&w->nf[w->n - 1]);
        w->dec = !signal; /* libdw: a signal frame's caller is looked up at its pc */
    }
    memcpy(fp->regs, keep, sizeof(keep));
    fp->valid = kvalid;
}
#endif
