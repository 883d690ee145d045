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
bool ss_fhas_cfi(struct ss_fproc *fp, uint64_t look)
{
    return ss_a64_rule(fp->rc, fp->dwfl, look)->kind != SS_A64R_NOINFO;
}

/* Code at the file's ELF entry that no CFI covers: the root (native.c). */
bool ss_fat_entry(struct ss_proc *proc, uint64_t ip)
{
    const struct ss_mapping *mp = ss_proc_find_cached(proc, ip);
    uint64_t v = mp && mp->elf ? ip - (uint64_t)mp->bias : 0;
    return v && mp->elf->e_entry && v >= mp->elf->e_entry && v - mp->elf->e_entry < 64;
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
    if (!ss_fhas_cfi(fp, act ? pc : pc - 1)) {
        w->nocfi = true;
        w->why = ss_fat_entry(fp->up->proc, pc) ? SS_TRUNC_NONE : SS_TRUNC_NOINFO;
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

int ss_fstep(struct ss_fproc *fp, const struct ss_a64regs *in, uint64_t pc, bool dec,
             struct ss_a64regs *out, uint64_t *npc, bool *nact, enum ss_trunc *why)
{
    struct fwalk *keep = fp->w, t = {.cur = *in, .dec = dec};
    *nact = false;
    *why = SS_TRUNC_NONE;
    out->valid = 0;
    int k = fp->mode == SS_NATIVE_RULES ? rule_step(fp, &t, pc, out) : 0;
    if (k) {
        if (fp->check) check(fp, &t, pc, out, k < 0);
        fp->st->rule_steps++;
        fp->w = keep;
        if (k > 0) *npc = ss_pac_strip(out->r[A64_X30], fp->pac);
        return k > 0;
    }
    fp->st->unw_steps++;
    struct fwalk pw = {.probe = out, .skip = true, .restart = dec};
    dw_start(fp, in, pc, dec);
    int r = dw_walk(fp, &pw);
    fp->w = keep;
    if (pw.probed) {
        *npc = pw.probe_pc;
        *nact = pw.probe_act;
        return 1;
    }
    out->valid = 0;
    if (r != 0) /* a read libdw could not make: the snapshot's end, as dw_walk says it */
        *why = in->r[A64_SP] >= fp->up->mem.snap_base ? SS_TRUNC_SNAPSHOT : SS_TRUNC_ERROR;
    return 0;
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
