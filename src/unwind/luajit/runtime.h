/* unwind/luajit/runtime.h: the LuaJIT runtime object of one mapped LuaJIT
 * module (runtime.c) and its caches: prototypes, strings, functions, the
 * collector's generations (gc.c) and the window plan's needs (plan.c). */
#ifndef SS_LJ_RUNTIME_H
#define SS_LJ_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/memory.h"
#include "stacksnap/ss_lj_luajit.h"
#include "unwind/luajit/layout.h"

struct lj_arch;

#define LJ_MAX_GS 8
#define LJ_PROTO_SLOTS 1024
#define LJ_SPLICE_THREADS 8 /* lua_States walked per sample (splice.c) */
#define SS_LJ_FWD_NH 9      /* helpers trace_fwdcalls.c places (its hname[]) */
#define LJ_INS_SLOTS 4096
#define LJ_NAMES_PER_PROTO 8
#define LJ_SPILL 512

struct lj_pname {
    uint32_t pos; /* bytecode position of the call instruction + 1 (0 = empty) */
    const char *name;
};

/* Immutable data of one prototype, validated on every use by comparing the
 * header bytes that never change during the prototype's life, and its chunk
 * name's string: a prototype of the same shape allocated where a freed one
 * was, with its chunk name where the old name was, has the old header to
 * the byte (the name is a pointer in it); the string's hash, id, length and
 * first bytes tell the two apart. */
#define LJ_CNS 64 /* bytes of the chunk name's GCstr kept: header and data */
struct lj_proto {
    uint64_t addr;    /* 0 = empty slot */
    uint8_t sig[104]; /* header with mutable fields zeroed */
    uint32_t siglen;
    uint64_t cn;         /* the chunk name's GCstr */
    uint8_t cns[LJ_CNS]; /* its first cnslen bytes as filled (0: none readable, or
                          * read in a walk the GC proof failed: fill again) */
    uint32_t cnslen;
    uint32_t sizebc, numline, sizept, sizekgc, sizeuv;
    int32_t firstline;
    const char *chunk; /* interned, without leading @/= */
    bool cn_bad;       /* its chunk name is no string: "?" (no live prototype: freed memory) */
    uint8_t *blob;     /* bytes [addr, addr + sizept) */
    struct lj_pname names[LJ_NAMES_PER_PROTO];
    uint64_t epoch; /* splice that last used it (ss_lj_runtime.epoch) */
    uint64_t gcgen; /* GC generation its header was last matched in (gc.c) */
};

struct lj_insent {
    uint64_t retpc; /* 0 = empty */
    uint32_t ins;   /* instruction word at retpc - 4 */
};

struct lj_strblk;

#define LJ_FNPT_SLOTS 1024
#define LJ_LSTACK_SLOTS 16
#define LJ_TBASE_SLOTS 8
struct lj_lstack {
    uint64_t L, stack; /* last stack start seen for thread L (walks without windows) */
};

struct lj_fnpt {
    uint64_t fn, pt; /* function -> prototype seen last time (a guess) */
    /* the function's header as read in GC generation gen (gc.c): trusted
     * without a read while the collector has not moved since */
    uint64_t fnpc, cf, gen;
    uint8_t ffid;
};

/* GC generations (gc.c): the collector's bytes (gc.total .. gc.estimate)
 * of the last proof. */
struct lj_gcproof {
    uint8_t ep[88];
    uint64_t gen;  /* generation of ep; 0: none proven since the last step seen */
    uint64_t last; /* generations handed out */
};

/* Window sizes (plan.c): how much Lua stack lies below BASE in the walks of
 * the recent samples, [0] the running thread's, [1] the main thread's under
 * a running coroutine (its resumer); bytes, the maximum of an epoch of
 * LJ_NEED_EPOCH walks. The plan covers the larger of this epoch's and the
 * last one's. */
struct lj_winneed {
    uint32_t cur[2], prev[2];
    uint32_t tr_cur, tr_prev; /* highest trace number a trace sample showed, + 1 */
    bool coro, coro_prev;     /* a coroutine ran (cur_L not the main thread) */
    unsigned walks;           /* in this epoch */
    unsigned epochs;          /* completed */
};

struct ss_lj_runtime {
    struct ss_lj_elfinfo info;
    const struct lj_arch *arch; /* the VM's (ljregs.h): this build's unless set */
    uint64_t bias, vm_lo, vm_hi;
    uint32_t pid;
    const struct lj_layout *lay; /* a table row, or &dlay */
    struct lj_layout dlay;       /* the derived layout when no row equals it */
    bool lay_derived;            /* lay was built from facts derived from the code */
    uint64_t gs[LJ_MAX_GS];
    unsigned ngs, verify_fail, bad_states;
    bool disabled;
    bool check_guards; /* also place snapshots by guards where mcofs exists (tests) */
    char diag[256];
    char last_reject[200];   /* why the last global state did not verify (diagnostics.c) */
    struct lj_proto *protos; /* LJ_PROTO_SLOTS, direct-mapped */
    uint64_t pused[LJ_PROTO_SLOTS / 64]; /* slots ever filled: the only ones the
                                            free visits (no fault-in) */
    struct lj_insent *ins;               /* LJ_INS_SLOTS, direct-mapped */
    struct lj_strblk *strs;              /* interned strings */
    struct lj_lstack lstack[LJ_LSTACK_SLOTS];
    struct lj_fnpt *fnpt; /* LJ_FNPT_SLOTS */
    struct lj_tcache *tc; /* known traces (trace.c), NULL until the first trace sample */
    /* the IR-call helpers whose calls from trace code trace_fwd.c places
     * (trace_fwdcalls.c: string.rep's, table.concat's, string.format's):
     * IRCALLDEF index and address, fn 0 not known (ss_lj_fwd_setup) */
    uint16_t fwd_id[SS_LJ_FWD_NH];
    uint64_t fwd_fn[SS_LJ_FWD_NH];
    struct {
        uint64_t L, base; /* BASE of the last good trace walk of L (trace.c) */
    } tbase[LJ_TBASE_SLOTS];
    struct ss_lj_stats st;
    /* Frames of a splice point into the prototype cache until the splice
     * ends: a prototype that misses on a slot this splice already uses goes
     * to a spill entry instead of overwriting it (freed by the next splice). */
    uint64_t epoch; /* bumped by every ss_lj_splice; 0: no protection */
    struct lj_gcproof gcp;
    struct lj_winneed need;
    uint64_t spill_epoch;
    struct lj_proto *spill; /* LJ_SPILL entries, allocated on first use */
    unsigned nspill;
    /* scratch kept from sample to sample (no allocation per walk): the
     * walks of one splice (splice.c), the copy of the Lua stack and the
     * header batch of a walk (frames.c); contents never carried over */
    struct lj_walk *walks[LJ_SPLICE_THREADS];
    uint8_t *sbuf, *hbuf;
    size_t sbuf_cap, hbuf_cap;
};

/* The helpers trace_fwd.c places in a file: IRCALLDEF index and ELF vaddr
 * (0: not found), found once per file (ss_lj_fwd_find) and given to each
 * runtime of it (ss_lj_fwd_setup: rt->fwd_*). */
struct ss_lj_fwd {
    uint16_t id[SS_LJ_FWD_NH];
    uint64_t fn[SS_LJ_FWD_NH];
};
struct ss_elf;
void ss_lj_fwd_find(void *detcache, const struct ss_elf *e, struct ss_lj_fwd *out);
void ss_lj_fwd_setup(struct ss_lj_runtime *rt, const struct ss_lj_fwd *f);

/* Intern a string (len bytes, need not be NUL-terminated); NULL on ENOMEM. */
const char *ss_lj_intern(struct ss_lj_runtime *rt, const char *s, size_t len);
/* Make sure G is verified (layout chosen); false if Lua walking is off. */
bool ss_lj_check_G(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t G);
/* Prototype data for pt (read or validated; hdr = current header bytes if
 * the caller already read them, else NULL). NULL when pt is not a valid
 * prototype. */
struct lj_proto *ss_lj_proto(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t pt,
                             const uint8_t *hdr);
/* The same, with cs the read ss_lj_proto_cn_iov(pt) made in the caller's
 * batch (NULL, or not of the entry there now: read here if the header
 * matches the cache, one more read). */
struct lj_proto *ss_lj_proto_cs(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t pt,
                                const uint8_t *hdr, const struct ss_iov *cs);
/* The read of the cached prototype at pt's chunk name, into dst (LJ_CNS
 * bytes), to batch with pt's header: len 0 when the cache has no such
 * prototype. */
struct ss_iov ss_lj_proto_cn_iov(const struct ss_lj_runtime *rt, uint64_t pt, uint8_t *dst);
/* Line for bytecode position pos (0-based index of the instruction). */
uint32_t ss_lj_proto_line(const struct ss_lj_runtime *rt, const struct lj_proto *p, uint32_t pos);

/* A sample's walk of thread L (of global state G) found `below` bytes of
 * its Lua stack below BASE: what the plan's windows should hold (plan.c). */
void ss_lj_need(struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t G, uint64_t L,
                uint64_t below);
/* A sample ran in trace number traceno: the J->trace window should hold
 * its slot (plan.c). */
void ss_lj_need_trace(struct ss_lj_runtime *rt, uint32_t traceno);

/* GC generations (gc.c). The collector's bytes in the sample's copy of
 * global_State G into ep (88 bytes): their length, 0 when the layout or the
 * sample has none. */
size_t ss_lj_gc_sample(const struct ss_lj_runtime *rt, const struct ss_mem *m, uint64_t G,
                       uint8_t *ep);
/* The live read of the same bytes, to come after every object read of a walk. */
struct ss_iov ss_lj_gc_iov(const struct ss_lj_runtime *rt, uint64_t G, uint8_t *dst);
/* Does the sample show no allocation since the last proof (the headers
 * proved in the current generation hold)? If not, that generation ends. */
bool ss_lj_gc_current(struct ss_lj_runtime *rt, const uint8_t *ep, size_t n);
/* Sample vs live bytes: true (and the generation current) when no atomic
 * phase ran between. */
bool ss_lj_gc_prove(struct ss_lj_runtime *rt, const uint8_t *sample, const uint8_t *live, size_t n);
/* The prototype at pt when its header was matched in the current
 * generation (no read), else NULL. */
struct lj_proto *ss_lj_proto_trusted(struct ss_lj_runtime *rt, uint64_t pt);

#endif
