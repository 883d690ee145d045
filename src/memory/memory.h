/* memory/: the one read interface every walker uses.
 *
 * Layers, tried in order for each read:
 *   1. the sample's stack snapshot   [sp, sp + stack_len), then the memory
 *      windows copied with it (a read must fit in one of them)
 *   2. bytes of a file-backed, non-writable mapping (mmap'd file), from a
 *      table of them taken from the process view when its mappings change
 *   3. the target: live = process_vm_readv (batched), replay = recorded reads
 * Every target read the live walker makes can be handed to a recorder hook so
 * that replay serves exactly the same bytes. */
#ifndef SS_MEMORY_H
#define SS_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stacksnap/ss.h"

struct ss_proc; /* process/: mappings of one process */

/* One element of a batched read. err: 0 ok, negative errno on failure.
 * live: from the target itself (layer 3), not the sample's copies.
 * sample: from the sample's copies alone (layer 1; -ENOENT where they hold
 * none of it), to compare them with what was read live. */
struct ss_iov {
    uint64_t addr;
    void *dst;
    size_t len;
    int err;
    bool live, sample;
};

/* Target backend: live process or recorded reads (replay). */
struct ss_target_ops {
    /* Fill every iov; set iov[i].err per element. Return 0, or negative errno
     * when the whole target is gone (ESRCH). */
    int (*readv)(void *ctx, struct ss_iov *iov, int n);
    /* Optional: forget the reads served since the sample began, so that
     * the walk that follows is served as if they had not been made (replay:
     * recorded reads are matched in order; the memo checked some). */
    void (*restart)(void *ctx);
    /* Optional: were the reads since the sample began (or the restart) the
     * ones the live walk of this sample made, all of them, in order?
     * (replay; the memo answers a sample only then) */
    bool (*consumed)(void *ctx);
};

/* What one walk took from its inputs (unwind/memo.c): the window bytes it
 * looked at, the target reads it made, and the registers beyond the fixed
 * set that every walk may use. Kept only while ss_mem.track is set. */
struct ss_mem_range {
    uint32_t win, off, len; /* win: index into ss_mem.cw (windows by address) */
};
struct ss_mem_tread {
    uint64_t addr;
    uint32_t len, off; /* off: where its bytes are in ss_mem_track.bytes */
    int err;
};
struct ss_mem_track {
    struct ss_mem_range *r;
    size_t nr, rcap;
    struct ss_mem_tread *t;
    size_t nt, tcap;
    uint8_t *bytes;
    size_t nbytes, bcap;
    uint64_t snap_hi; /* stack snapshot bytes [0, snap_hi) may have been read */
    uint64_t dregs;   /* DWARF registers read (CFA bases, libunwind): bit = register */
    bool opaque;      /* used an input that is not tracked (the sample's time, ...) */
    bool oom;         /* a log could not grow: the walk's inputs are not all known */
};
void ss_mem_track_reset(struct ss_mem_track *t);
/* Bytes [off, off + len) of window cw[w] were looked at (a walker that took
 * a larger copy with the log off says which parts of it it used). */
void ss_mem_track_win(struct ss_mem_track *t, unsigned w, uint64_t off, size_t len);
void ss_mem_track_free(struct ss_mem_track *t);

/* Hook called for each target read (successful or not), for the capture. */
typedef void (*ss_mem_record_fn)(void *ctx, uint64_t addr, const void *data, size_t len, int err);

struct ss_mem {
    /* layer 1: the current sample's snapshot */
    uint64_t snap_base;
    const uint8_t *snap;
    size_t snap_len;
    uint32_t snap_holes;         /* ss_sample.holes: reads that touch them fail */
    const struct ss_window *win; /* the sample's windows (ss.h), nwin of them */
    unsigned nwin;
    /* the copied ones (len > 0), by address: what ss_mem_peek searches */
    struct ss_mem_win {
        uint64_t addr, len;
        const uint8_t *data;
    } cw[SS_WIN_MAX];
    unsigned ncw;
    /* layer 2: files of mapped modules (may be NULL) */
    struct ss_proc *proc;
    /* layer 3: target */
    const struct ss_target_ops *target;
    void *target_ctx;
    ss_mem_record_fn record;
    void *record_ctx;
    /* counters */
    uint64_t n_target_calls, n_target_reads;
    struct ss_mem_track *track; /* NULL, or the log of the walk's inputs */
    /* layer 2's table: the bytes of proc's read-only file mappings
     * ([lo, hi) at base in the file's image), by address, as of the view's
     * generation spans_gen: taken from the view when its mappings change,
     * so that a read asks the view nothing; last: the last hit */
    struct ss_mem_span {
        uint64_t lo, hi;
        const uint8_t *base;
    } * spans;
    size_t nspans, spans_cap, last;
    uint64_t spans_gen;
    bool spans_taken;
};

/* Set up a reader: proc (layer 2) and target (layer 3) may be NULL.
 * ss_mem_free frees what it holds (layer 2's table). */
void ss_mem_init(struct ss_mem *m, struct ss_proc *proc, const struct ss_target_ops *target,
                 void *target_ctx);
void ss_mem_free(struct ss_mem *m);

/* Reset layer 1 for a new sample: its stack snapshot and windows. */
/* holes: ss_sample.holes, pages of the copy that are not stack bytes; with
 * holes the snapshot ends at the end of the mapping that holds sp (the
 * process view's), or at the first hole when none is known */
void ss_mem_set_snapshot(struct ss_mem *m, uint64_t sp, const uint8_t *bytes, size_t len,
                         uint32_t holes);
void ss_mem_set_windows(struct ss_mem *m, const struct ss_window *win, unsigned nwin);
/* Both for sample s (its windows, its stack snapshot at its sp): what a
 * walk of s reads first. */
void ss_mem_set_sample(struct ss_mem *m, const struct ss_sample *s);

/* Pointer to len bytes at addr in the sample itself (its stack snapshot or
 * one of its windows), or NULL. */
const void *ss_mem_peek_sample(const struct ss_mem *m, uint64_t addr, size_t len);

/* The window (index into cw) that ss_mem_peek_sample serves len bytes at
 * addr from; -1 when the stack snapshot does or none. */
int ss_mem_sample_win(const struct ss_mem *m, uint64_t addr, size_t len);

/* Pointer to len bytes at addr from layers 1-2 only (no syscall), or NULL.
 * Layer-2 pointers stay valid while the process view is not refreshed. */
const void *ss_mem_peek(struct ss_mem *m, uint64_t addr, size_t len);

/* Read from the target itself (layer 3, recorded like every target read),
 * not from the sample's copies: to compare the two. */
int ss_mem_read_target(struct ss_mem *m, uint64_t addr, void *dst, size_t len);

/* The lowest x in [lo, hi] such that [x, hi) lies in the stack snapshot or
 * in one window: the part of [lo, hi) that the sample itself holds (hi when
 * none of it). */
uint64_t ss_mem_sample_from(const struct ss_mem *m, uint64_t lo, uint64_t hi);

/* Do snapshot bytes [off, off + len) (len > 0, inside the copy) touch a
 * page the copy could not read? */
static inline bool ss_mem_snap_hole(const struct ss_mem *m, uint64_t off, size_t len)
{
    uint64_t in = m->snap_base & 4095, first = (in + off) >> 12, last = (in + off + len - 1) >> 12;
    if (first > 31) return false;
    if (last > 31) last = 31;
    uint64_t bits = ((2ull << last) - 1) & ~((1ull << first) - 1);
    return (m->snap_holes & bits) != 0;
}

/* Layer 1 only, inline: the hot path of the native unwinder. A caller that
 * reads what it returns while m->track is set tells ss_mem_track_snap. */
static inline const void *ss_mem_peek_snap(const struct ss_mem *m, uint64_t addr, size_t len)
{
    uint64_t off = addr - m->snap_base;
    if (off < m->snap_len && len <= m->snap_len - off) {
        if (m->snap_holes && ss_mem_snap_hole(m, off, len)) return NULL;
        return m->snap + off;
    }
    return NULL;
}

/* The walk that t logs read len bytes of the stack snapshot at addr (the
 * callers of ss_mem_peek_snap say so: it stays a bare lookup). */
static inline void ss_mem_track_snap(struct ss_mem_track *t, const struct ss_mem *m, uint64_t addr,
                                     size_t len)
{
    uint64_t hi = addr - m->snap_base + len;
    if (hi > t->snap_hi) t->snap_hi = hi;
}

/* Read [*lo, hi) into b (hi - *lo + SS_MEM_SEAM bytes): the part the
 * sample holds (in one piece, at its top; none when live) from there, the
 * rest from the target with SS_MEM_SEAM bytes of overlap. If those differ
 * from the sample's, what lies below was popped and pushed again since the
 * sample: the copy then starts at the sample's part (*lo moves up). The
 * sample's part is not logged (track) as a whole: *win is its window (-1:
 * none, or no log) and *from its start, for the caller to log the parts it
 * uses (ss_mem_track_win). 0 or negative errno. */
#define SS_MEM_SEAM 256u
int ss_mem_read_span(struct ss_mem *m, uint64_t *lo, uint64_t hi, uint8_t *b, bool live, int *win,
                     uint64_t *from);

/* Read len bytes at addr through all layers. 0 or negative errno. */
int ss_mem_read(struct ss_mem *m, uint64_t addr, void *dst, size_t len);

/* Batched read through all layers: elements served by layers 1-2 are copied
 * directly, the rest go to the target in one batch. Returns 0 or negative
 * errno (target gone); per-element status in iov[i].err. */
int ss_mem_readv(struct ss_mem *m, struct ss_iov *iov, int n);

/* Live target backend: process_vm_readv on pid. */
extern const struct ss_target_ops ss_target_live;
struct ss_target_live {
    pid_t pid;
};

#endif
