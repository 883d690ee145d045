/* unwind/foreign.c: the native frames of a capture of another
 * architecture: an arm64 capture with stack bytes replayed by an x86-64
 * build, whose libunwind knows x86-64 only (ss_unwind_foreign,
 * include/stacksnap/unwind.h).
 *
 * elfutils' libdw walks the sample as it walks another architecture's core
 * file: one Dwfl per process, its modules the process view's ELF files
 * (reported from the images the view holds), attached with our own thread
 * callbacks (memory_read: the sample's stack snapshot, else the mapped
 * files' bytes; set_initial_registers: the captured x0-x30, sp, pc), its
 * aarch64 backend picked from the modules' machine. A walk
 * (foreign_walk.c) steps plain CFI rows by the rule cache of
 * foreign_rules.c, which compiles the rows libdw parsed, and takes
 * libdw's step (dwfl_getthread_frames from that frame) for the rest.
 *
 * The walk ends where the arm64 build's (unwind/native.c, native_scan.c)
 * ends, so that both give the same frames: a frame without CFI is stepped
 * out of by the same stack scan (a64scan.c, through foreign_scan.c; libdw's
 * frame-pointer guess is never taken), or ends the walk where the scan
 * refuses; a return address of 0 is the root; the caller's sp must be
 * above (or, after an interrupted frame, at) its callee's, its ip in
 * executable memory.
 *
 * LuaJIT's interpreter frames are walked as the arm64 build walks them
 * (walk.c, lua.c), with the arm64 VM's runtime (its architecture taken from
 * the ELF: registers, cframe, layouts derived from its code): a leaf in the
 * VM starts at the VM frame's caller, read from the cframe (x19-x28, fp,
 * lr at the CFA); each frame keeps the VM's registers x19-x22 as its step
 * recovered them, and the Lua frames are spliced in with the sample's
 * arm64 registers (lua.h: ss_lua_splice_with). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"

#if defined(__x86_64__)
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include "elf/elf.h"
#include "process/process.h"
#include "symbolize/symbolize.h"
#include "unwind/foreign_int.h"
#include "unwind/lua.h"
#include "unwind/luajit/layout.h"
#include "unwind/procs.h"

static void fproc_free(void *p)
{
    struct ss_fproc *fp = p;
    if (!fp) return;
    if (fp->dwfl) dwfl_end(fp->dwfl);
    free(fp->vr);
    free(fp->rc);
    free(fp);
}

static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                    char **file_name, Elf **elfp)
{
    (void)mod, (void)modname, (void)base, (void)file_name;
    const struct ss_elf *e = *userdata;
    *elfp = elf_memory((char *)e->image, e->size); /* read only: ELF_C_READ_MMAP */
    return -1;
}

static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    (void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
    (void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
    return -1; /* the file's own .eh_frame and .debug_frame, as the arm64 build */
}

static const Dwfl_Callbacks dwfl_cbs = {
    .find_elf = find_elf,
    .find_debuginfo = find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

/* Where the ELF's vaddr 0 is: the module's low address is its first
 * PT_LOAD's aligned vaddr there (libdwfl's bias = low - that vaddr). */
static bool first_load(const struct ss_elf *e, uint64_t *vaddr)
{
    size_t n;
    if (!e->elf || elf_getphdrnum(e->elf, &n) != 0) return false;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e->elf, (int)i, &ph) || ph.p_type != PT_LOAD) continue;
        uint64_t al = ph.p_align > 1 ? ph.p_align : 1;
        *vaddr = ph.p_vaddr & ~(al - 1);
        return true;
    }
    return false;
}

/* A Dwfl for the process view as it is now: each ELF file it maps, once. */
static int fproc_build(struct ss_fproc *fp, struct ss_uproc *up)
{
    if (fp->dwfl) dwfl_end(fp->dwfl);
    ss_a64rc_flush(fp->rc); /* rows of the modules before */
    fp->attached = false;
    if (!(fp->dwfl = dwfl_begin(&dwfl_cbs))) return -ENOMEM;
    size_t n;
    const struct ss_mapping *m = ss_proc_mappings(up->proc, &n);
    dwfl_report_begin(fp->dwfl);
    for (size_t i = 0; i < n; i++) {
        struct ss_elf *e = m[i].elf;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = m[j].elf == e;
        uint64_t v, hi = 0;
        if (!e || seen || e->e_type == ET_REL || !first_load(e, &v)) continue;
        for (size_t j = i; j < n; j++)
            if (m[j].elf == e && m[j].d.end > hi) hi = m[j].d.end;
        uint64_t lo = (uint64_t)m[i].bias + v;
        if (hi <= lo) continue;
        Dwfl_Module *mod = dwfl_report_module(fp->dwfl, m[i].d.path, lo, hi);
        void **ud = NULL;
        if (mod && dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL) && ud) *ud = e;
    }
    dwfl_report_end(fp->dwfl, NULL, NULL);
    fp->gen = ss_proc_generation(up->proc);
    fp->attached = dwfl_attach_state(fp->dwfl, NULL, (pid_t)up->pid, &ss_fthread_cbs, fp);
    return 0;
}

/* The walk's first frame: the leaf, exact, its registers the sample's. */
static void leaf_frame(struct ss_fproc *fp, struct fwalk *w)
{
    memset(&w->nf[0], 0, sizeof(w->nf[0]));
    w->nf[0].regs.r[SS_DR_IP] = fp->regs[A64_PC];
    w->nf[0].regs.r[SS_DR_SP] = fp->regs[A64_SP];
    w->nf[0].regs.valid = SS_DBIT(SS_DR_IP) | SS_DBIT(SS_DR_SP);
    w->nf[0].flags = SS_NF_EXACT;
    w->vr[0].valid = (1u << VM_REGS) - 1;
    for (int i = 0; i < VM_REGS; i++)
        w->vr[0].r[i] = fp->regs[A64_X19 + i];
    w->n = 1;
}

/* The walk on from the caller of the VM frame whose CFA is cfa, as lua.c's
 * ss_lua_vm_caller reads it (x28 .. x19, then fp, lr below the CFA; the VM
 * does not sign lr), as a return address. false: the cframe is unreadable. */
static bool caller_walk(struct ss_fproc *fp, struct fwalk *w, uint64_t cfa)
{
    uint64_t x[12];
    if (ss_mem_read(&fp->up->mem, cfa - LJ_A64_CFA_X19 - 9 * 8, x, sizeof(x)) < 0) return false;
    memset(fp->regs, 0, sizeof(fp->regs));
    for (unsigned i = 0; i < 10; i++)
        fp->regs[A64_X19 + i] = x[9 - i];
    fp->regs[A64_X29] = x[10];
    fp->regs[A64_SP] = cfa;
    fp->regs[A64_PC] = x[11] - 1; /* looked up as a return address */
    fp->valid = (0x3ffull << A64_X19) | (1ull << A64_X29) | (1ull << A64_SP);
    w->restart = true;
    ss_fwalk(fp, w);
    return true;
}

/* Frames the walk stopped at in code without CFI, each a return address
 * into trace code whose VM frame the Lua walk names (walk.c's held walk):
 * on from that VM frame's caller; one it cannot claim in trace code ends
 * the walk there (cut). */
static void trace_frames(struct ss_fproc *fp, struct fwalk *w, struct ss_luaproc *l,
                         uint64_t time_ns)
{
    while (w->nocfi && w->n >= 2 && w->n < w->max) {
        unsigned k = w->n - 1;
        struct ss_native_frame *f = &w->nf[k];
        if (f->flags & SS_NF_EXACT) return;
        uint64_t r[A64_PC + 1] = {0}, known = 1ull << A64_SP | 1ull << A64_PC;
        r[A64_SP] = ss_nf_sp(f);
        r[A64_PC] = ss_nf_ip(f);
        for (int i = 0; i < VM_REGS; i++)
            if (w->vr[k].valid >> i & 1) {
                r[A64_X19 + i] = w->vr[k].r[i];
                known |= 1ull << (A64_X19 + i);
            }
        uint64_t cfa = ss_lua_trace_regs(l, fp->up, k, ss_nf_ip(f), false, r, known, time_ns);
        if (!cfa) {
            if (ss_lua_in_trace_at(l, fp->up, ss_nf_ip(f) - 1)) f->flags |= SS_NF_TRACE_CUT;
            return;
        }
        f->cfa = cfa;
        w->why = SS_TRUNC_NONE;
        if (!caller_walk(fp, w, cfa)) {
            w->why = SS_TRUNC_SNAPSHOT;
            return;
        }
    }
}

/* The native frames of s (arm64 registers regs, taken at time_ns) into nf,
 * max of them, with the VM frames the LuaJIT walk l (NULL: none) names. */
static unsigned foreign_frames(struct ss_fproc *fp, const uint64_t *regs, unsigned nregs,
                               struct ss_native_frame *nf, unsigned max, struct ss_luaproc *l,
                               uint64_t time_ns, enum ss_trunc *why)
{
    memset(fp->regs, 0, sizeof(fp->regs));
    fp->valid = 0;
    for (unsigned i = 0; i <= A64_PC && i < nregs; i++) {
        fp->regs[i] = regs[i];
        fp->valid |= 1ull << i;
    }
    struct fwalk w = {.nf = nf, .vr = fp->vr, .max = max};
    const struct ss_mapping *mp = ss_proc_find(fp->up->proc, fp->regs[A64_PC]);
    uint64_t pc = fp->regs[A64_PC], all = (1ull << (A64_PC + 1)) - 1;
    uint64_t vmcfa = l && max ? ss_lua_vm_leaf_regs(l, fp->up, pc, fp->regs, all, time_ns) : 0;
    if (vmcfa && max >= 2) { /* the leaf's VM frame: on from its caller */
        leaf_frame(fp, &w);
        nf[0].cfa = vmcfa;
        if (caller_walk(fp, &w, vmcfa)) {
            trace_frames(fp, &w, l, time_ns);
            *why = w.why;
            return w.n;
        }
        nf[0].cfa = 0; /* its caller unreadable: a plain leaf (walk.c) */
        w.n = 0;
        memcpy(fp->regs, regs, (A64_PC + 1) * sizeof(*regs));
        fp->valid = all;
    }
    if (l && vmcfa) ss_lua_native_leaf(l);
    if (max && l && ss_lua_in_trace_at(l, fp->up, pc)) {
        /* trace code the Lua walk could not claim: cut there (walk.c) */
        leaf_frame(fp, &w);
        nf[0].flags |= SS_NF_TRACE_CUT;
        *why = SS_TRUNC_NOINFO;
        return 1;
    }
    if (!fp->attached || !mp || !(mp->d.prot & SS_MAP_X) || !max) {
        /* the leaf alone: nothing to walk with, or not in code */
        if (max) leaf_frame(fp, &w);
        *why = fp->attached ? SS_TRUNC_BADIP : SS_TRUNC_NOINFO;
        return max ? 1 : 0;
    }
    ss_fwalk(fp, &w);
    /* code without CFI: trace code the Lua walk claims, else the stack
     * scan's caller (foreign_scan.c), the walk on from there, again */
    do {
        if (l) trace_frames(fp, &w, l, time_ns);
    } while (ss_fscan(fp, &w));
    *why = w.why;
    return w.n;
}

/* Native frame i for the Lua splice: the VM's registers by role (lua.c's
 * fill_native for this build's walk). */
static void fill_a64(void *ctx, unsigned i, struct ss_lj_native *n)
{
    const struct ss_fproc *fp = ctx;
    const struct ss_native_frame *f = &fp->up->u->nf[i];
    const struct vmregs *v = &fp->vr[i];
    n->ip = ss_nf_ip(f);
    n->cfa = f->cfa;
    n->signal = i > 0 && (f->flags & SS_NF_EXACT);
    n->trace = ss_lua_token(fp->l, i);
    static const uint8_t bit[4] = {SS_LJ_HAVE_RBP, SS_LJ_HAVE_R15, SS_LJ_HAVE_RBX, SS_LJ_HAVE_R14};
    uint64_t *dst[4] = {&n->rbp, &n->r15, &n->rbx, &n->r14}; /* x19 .. x22 */
    for (int k = 0; k < 4; k++)
        if (v->valid >> k & 1) {
            *dst[k] = v->r[k];
            n->have |= bit[k];
        }
}

int ss_unwind_foreign(struct ss_unwinder *u, const struct ss_sample *s, const uint64_t *regs,
                      unsigned nregs, struct ss_stack *out)
{
    ss_unwind_start(u, s, out);
    if (nregs <= A64_PC) {
        u->st.errors++;
        out->trunc = SS_TRUNC_ERROR;
        return -EINVAL;
    }
    /* the view and memory reader as for a sample of this build: its sp and pc */
    struct ss_sample hs = *s;
    memset(hs.regs, 0, sizeof(hs.regs));
    hs.regs[SS_REG_SP] = regs[A64_SP];
    hs.regs[SS_REG_IP] = regs[A64_PC];
    struct ss_err err = {0};
    struct ss_uproc *up = ss_procs_get(u, &hs, &err);
    if (!up) {
        u->st.errors++;
        out->trunc = SS_TRUNC_ERROR;
        return err.code ? err.code : -ESRCH;
    }
    ss_unwind_comm(out, up);
    struct ss_fproc *fp = up->foreign;
    if (!fp) {
        if (!(fp = calloc(1, sizeof(*fp)))) return -ENOMEM;
        if (!(fp->rc = calloc(1u << SS_A64RC_BITS, sizeof(*fp->rc)))) {
            free(fp);
            return -ENOMEM;
        }
        up->foreign = fp;
        up->foreign_free = fproc_free;
    }
    unsigned max = u->o.max_frames;
    if (fp->vrcap < max) {
        struct vmregs *nv = realloc(fp->vr, max * sizeof(*nv));
        if (!nv) return -ENOMEM;
        fp->vr = nv;
        fp->vrcap = max;
    }
    fp->up = up;
    fp->tid = s->tid ? s->tid : s->pid;
    fp->pac = u->o.pac_mask;
    fp->mode = u->o.native_mode;
    fp->check = u->o.check_rules;
    fp->st = &u->st;
    if ((!fp->dwfl || fp->gen != ss_proc_generation(up->proc)) && fproc_build(fp, up) < 0)
        return -ENOMEM;
    enum ss_trunc why = SS_TRUNC_NONE;
    unsigned n = 0;
    bool hold;
    struct ss_luaproc *l = fp->l = ss_lua_begin(u, up, &hold);
    if (regs[A64_PC] || regs[A64_SP] || !s->nkernel) { /* else compat: kernel alone */
        n = foreign_frames(fp, regs, nregs, u->nf, max, l, s->time_ns, &why);
        for (unsigned i = 0; i + 1 < n; i++) /* a CFA is its caller's sp */
            if (!u->nf[i].cfa) u->nf[i].cfa = ss_nf_sp(&u->nf[i + 1]);
        if (l) n = ss_lua_splice_with(l, u, up, regs, n, fill_a64, fp);
    }
    if (ss_unwinder_reserve(u, (size_t)n + SS_KSTACK_MAX) < 0) return -ENOMEM;
    ss_unwind_name(u, up, l, n);
    ss_unwind_finish(u, out, ss_unwind_kernel(u, s, n), why);
    return 0;
}

#else /* an arm64 build: no other architecture's captures */

int ss_unwind_foreign(struct ss_unwinder *u, const struct ss_sample *s, const uint64_t *regs,
                      unsigned nregs, struct ss_stack *out)
{
    (void)u, (void)s, (void)regs, (void)nregs;
    memset(out, 0, sizeof(*out));
    return -ENOEXEC;
}
#endif

bool ss_unwind_foreign_arch(const char *arch)
{
    return arch && !strcmp(arch, "aarch64") && strcmp(SS_ARCH, "aarch64");
}
