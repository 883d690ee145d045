/* unwind/luajit/thread_read.h: the reads of one thread walk (thread_read.c)
 * for the walker (frames.c): where each byte comes from (the sample's
 * copies, the process, either), the copy of the thread's Lua stack and the
 * lua_State header read before any frame is walked, and the cframes read
 * as the chain reaches them. */
#ifndef SS_LJ_THREAD_READ_H
#define SS_LJ_THREAD_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/memory.h"
#include "unwind/luajit/frames.h"
#include "unwind/luajit/layout.h"
#include "unwind/luajit/runtime.h"

/* The copy of [lo, hi) of the thread's Lua stack. */
struct stackbuf {
    uint64_t lo, hi; /* [lo, hi) copied */
    uint8_t *buf;
    size_t cap; /* bytes at buf (the runtime's scratch, kept between walks) */
    /* replay's memo (memory.h: ss_mem_track): [src_lo, src_hi) came from
     * window src of the sample; the slots read from there are logged one by
     * one, not the whole copy (the Lua values in it change all the time) */
    struct ss_mem_track *track;
    const struct ss_mem *m;
    int src;
    uint64_t src_lo, src_hi;
    uint64_t live_hi; /* [lo, live_hi) was read from the process, not the sample (lo: none) */
    unsigned bad_L;   /* walks whose lua_State could not be read (runtime.h) */
};

/* The slot at a of the copy into *v (false: not in the copy); logged for the
 * memo when it came from the sample's window. */
static inline bool sb_u64(const struct stackbuf *s, uint64_t a, uint64_t *v)
{
    if (a < s->lo || a + 8 > s->hi) return false;
    *v = lj_u64(s->buf + (a - s->lo));
    if (s->track && a >= s->src_lo && a + 8 <= s->src_hi)
        ss_mem_track_win(s->track, (unsigned)s->src, a - s->m->cw[s->src].addr, 8);
    return true;
}

/* Where the walk's bytes come from (memory.h): the sample's copies and the
 * process's files, else the process (VIEW_ANY); the process itself
 * (VIEW_LIVE: what the thread holds now); the sample's copies alone
 * (VIEW_SAMPLE, to compare with a live read). */
enum view_src { VIEW_ANY, VIEW_LIVE, VIEW_SAMPLE };

/* len bytes at a from src: 0 or negative errno. The walk's reads of one
 * field or slot all come through here. */
int ss_lj_view_read(struct ss_mem *m, enum view_src src, uint64_t a, void *dst, size_t len);

/* One cframe of the chain: prev, nres, pc (ok: read). */
struct cfr {
    uint64_t addr, prev, pc;
    int32_t nres;
    bool ok;
};

/* The cframe at a into *c (c->ok false when it cannot be read). */
void ss_lj_read_cframe(struct ss_lj_runtime *rt, struct ss_mem *m, uint64_t a, struct cfr *c);

/* What the walk knows of the thread before its frames: its lua_State's
 * header, checked against the start (st), and the stack below base in the
 * stackbuf. */
struct lj_thread {
    uint64_t G, stack, base;
    uint64_t cframe; /* L->cframe: the newest cframe */
    bool sampled;    /* read from the sample's copies (windows), not live */
    bool hdr_live;   /* the header came from the process (no window holds it) */
    uint8_t ep[88];  /* the collector's state read live in the same batch (gc.c) */
    size_t elen;     /* its bytes (0: none, or of another global state) */
};

/* Read the thread st->L into t and s: from the sample when it carries the
 * Lua state (windows), else (no windows: --no-lua-window, older captures; or
 * live: the GC moved between the sample and its walk) from the live process.
 * 0 or negative errno (-ESTALE: the thread is not as sampled). */
int ss_lj_read_thread(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_start *st,
                      struct stackbuf *s, bool live, struct lj_thread *t);

#endif
