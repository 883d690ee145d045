/* unwind/foreign_int.h: state shared by foreign.c (the sample's walks:
 * leaf, VM frames, trace frames, the Lua splice) and foreign_walk.c (one
 * native walk: the rule cache's steps, libdw's for the rest, the checks
 * that end a walk). x86-64 builds only. */
#ifndef SS_UNWIND_FOREIGN_INT_H
#define SS_UNWIND_FOREIGN_INT_H

#include <elfutils/libdwfl.h>

#include "stacksnap/unwind.h"
#include "unwind/foreign_rules.h"
#include "unwind/native.h"
#include "unwind/unwinder.h"

enum { A64_SP = 31, A64_PC = 32, A64_X30 = 30, A64_X29 = 29, A64_X19 = 19 };
/* x19 (BASE, RB), x20 (KBASE), x21 (PC), x22 (GL), x23-x28, x29 (trace code's VM frame) */
enum { VM_REGS = 11 };

/* The VM's registers at one native frame, as recovered there. */
struct vmregs {
    uint64_t r[VM_REGS]; /* x19 .. x29 */
    uint16_t valid;      /* bit i: r[i] known */
};

struct fwalk {
    struct ss_native_frame *nf; /* out: ip, sp, flags (cfa: ss_unwind_foreign) */
    struct vmregs *vr;          /* out: per frame, the VM's registers */
    unsigned n, max;
    enum ss_trunc why;
    bool nocfi;   /* the walk stopped at a frame without CFI */
    bool restart; /* the first frame is a return address given as pc - 1 */
    /* foreign_walk.c: x0-x30, sp of the last frame added, and whether libdw
     * looks its row up at its pc - 1 (not the first frame, nor one a
     * signal interrupted) */
    struct ss_a64regs cur;
    bool dec;
    /* libdw's step of one frame: skip its first frame (the one stepped
     * from), stop after the next (stepped), or only keep it (probe) */
    bool skip, one, stepped;
    struct ss_a64regs *probe;
    bool probed, probe_act;
    uint64_t probe_pc;
};

struct ss_fproc {
    Dwfl *dwfl;
    uint64_t gen;  /* the process view's generation the modules are of */
    bool attached; /* dwfl_attach_state done (an arm64 module was there) */
    struct ss_uproc *up;
    uint32_t tid;
    uint64_t regs[33]; /* the walk's first frame: x0-x30, sp, pc */
    uint64_t valid;    /* bit i: regs[i] known */
    uint64_t pac;      /* the capture's PAC mask (util/pac.h), 0 if it has none */
    struct fwalk *w;
    struct vmregs *vr; /* per native frame of the sample */
    unsigned vrcap;
    struct ss_luaproc *l;     /* the sample's LuaJIT walk, or NULL */
    struct ss_a64rc_ent *rc;  /* the rule cache (foreign_rules.h) */
    enum ss_native_mode mode; /* SS_NATIVE_RULES: rules, libdw for the rest; else libdw alone */
    bool check;               /* every rule step checked against libdw's (tests) */
    struct ss_unwinder_stats *st;
};

extern const Dwfl_Thread_Callbacks ss_fthread_cbs;
/* The mapping's bytes of the file at addr (any protection), len of them. */
const void *ss_ffile_bytes(struct ss_proc *proc, uint64_t addr, size_t len);
/* Has lookup address look a CFI row; is ip the ELF entry's code (the root)? */
bool ss_fhas_cfi(struct ss_fproc *fp, uint64_t look);
bool ss_fat_entry(struct ss_proc *proc, uint64_t ip);
/* One step from the frame at pc with registers in (dec: pc is a return
 * address, its row looked up at pc - 1), a rule's or libdw's as the walk
 * takes it: 1 and the caller's registers in *out, its pc (stripped) in
 * *npc, *nact when it is an interrupted one (under a signal frame); 0 the
 * walk ends there (*why; SS_TRUNC_NONE at the root: a rule's leaves in
 * *out the x30 it read, 0, or none). */
int ss_fstep(struct ss_fproc *fp, const struct ss_a64regs *in, uint64_t pc, bool dec,
             struct ss_a64regs *out, uint64_t *npc, bool *nact, enum ss_trunc *why);
/* foreign_scan.c: the last frame of w, without CFI (w->nocfi, why
 * SS_TRUNC_NOINFO), stepped out of by the arm64 stack scan (a64scan.h) and
 * the walk gone on from its caller; false: refused, the walk ends there. */
bool ss_fscan(struct ss_fproc *fp, struct fwalk *w);
/* One walk from fp->regs (fp->valid; w->restart: its pc is a return
 * address - 1) into w; how it ended in w->why. */
void ss_fwalk(struct ss_fproc *fp, struct fwalk *w);

#endif
