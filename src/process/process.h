/* process/: one process's address space as the unwinder sees it.
 *
 * A process view is a sorted list of mappings, each resolved to the ELF file
 * behind it (shared through the ss_elf_cache by build-id) with the bias that
 * turns ELF virtual addresses into process addresses and the address range
 * whose bytes can be served from the file image (non-writable, file-backed,
 * outside RELRO).
 *
 * Two ways to build one:
 *  - live: from /proc/PID/maps, files opened through /proc/PID/map_files/
 *    (or /proc/PID/root + path with RESOLVE_IN_ROOT and an inode check) so
 *    processes in other mount namespaces resolve to their own files and a
 *    target cannot redirect us to other files; the vdso image is read from
 *    the target once. Re-read when an address misses (rate limited) or when
 *    the process exec'd.
 *  - explicit: from a list of mapping descriptions and a resolver callback
 *    that opens the file of a mapping (offline replay from a capture file).
 * The generation number changes whenever the mapping list changes, so
 * address-keyed caches built on top of it know when to flush. */
#ifndef SS_PROCESS_H
#define SS_PROCESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "stacksnap/ss.h"

struct ss_elf;
struct ss_elf_cache;
struct ss_proc;

enum { SS_MAP_R = 1, SS_MAP_W = 2, SS_MAP_X = 4, SS_MAP_SHARED = 8 };

/* A mapping as /proc/PID/maps or a capture file describes it. */
struct ss_map_desc {
    uint64_t start, end, offset;
    uint64_t inode;
    uint32_t dev_major, dev_minor;
    uint32_t prot;        /* SS_MAP_* */
    const char *path;     /* "" anonymous, "[vdso]", "[stack]", "/usr/lib/..." */
    uint8_t build_id_len; /* known build-id (capture files), 0 = unknown */
    uint8_t build_id[20];
};

/* A resolved mapping. */
struct ss_mapping {
    struct ss_map_desc d;      /* d.path owned by the process view */
    struct ss_elf *elf;        /* NULL: anonymous, special, unreadable */
    int64_t bias;              /* process address = ELF vaddr + bias */
    uint64_t file_lo, file_hi; /* [lo, hi) served from the file image */
    const uint8_t *file_base;  /* image byte at address file_lo */
};

/* Open the file behind m; return an fd (consumed by the caller) or -errno.
 * For "[vdso]" a resolver may return a memfd with the image. */
typedef int (*ss_proc_resolve_fn)(void *ctx, const struct ss_map_desc *m);

struct ss_proc_opts {
    unsigned refresh_min_ms; /* live: minimum gap between re-reads on a miss (default 10) */
    unsigned exec_check_ms;  /* live: how often ss_proc_check_exec really checks (default 100) */
};

int ss_proc_new_live(struct ss_proc **out, pid_t pid, struct ss_elf_cache *cache,
                     const struct ss_proc_opts *o, struct ss_err *err);
int ss_proc_new(struct ss_proc **out, pid_t pid, const struct ss_map_desc *maps, size_t n,
                ss_proc_resolve_fn fn, void *ctx, struct ss_elf_cache *cache, struct ss_err *err);
void ss_proc_free(struct ss_proc *p);
/* A forked child's view: a copy of the parent's mappings (the child runs
 * in a copy of its parent's memory until it execs), live reads from child.
 * For frozen_ms it is never re-read from /proc (whose maps may already be
 * those of an image exec'd later than the samples being unwound); the exec
 * marker replaces it, ss_proc_thaw ends it early. */
int ss_proc_fork(struct ss_proc **out, const struct ss_proc *parent, pid_t child,
                 unsigned frozen_ms, struct ss_err *err);
void ss_proc_thaw(struct ss_proc *p);

/* Mapping that contains addr, or NULL. ss_proc_find is for code addresses:
 * it re-reads the maps of a live process on a miss, or when the mapping
 * found is not executable (a view older than the process's), rate limited;
 * the _cached variant never does.
 * Returned pointers are valid until the next call that may refresh. */
const struct ss_mapping *ss_proc_find(struct ss_proc *p, uint64_t addr);
const struct ss_mapping *ss_proc_find_cached(struct ss_proc *p, uint64_t addr);
/* Could ip be in code generated at run time (a JIT's: LuaJIT traces)? That
 * lives in anonymous mappings, which a JIT may flip between RW and RX and
 * which may be newer than the mapping list: any anonymous or unknown
 * address (above the first page) qualifies. Looks ip up as ss_proc_find. */
bool ss_proc_anon_code(struct ss_proc *p, uint64_t ip);
/* Is ip in a file the view maps (ss_proc_find)? */
bool ss_proc_in_file(struct ss_proc *p, uint64_t ip);
/* The bytes [addr, addr + len) of the file behind mapping mp as the file
 * holds them (unrelocated, whatever the mapping's protection), or NULL when
 * mp has no file or the range leaves the mapping or the file. */
const uint8_t *ss_mapping_file_bytes(const struct ss_mapping *mp, uint64_t addr, size_t len);

/* Live: re-read /proc/PID/maps now. -ESRCH when the process is gone. */
int ss_proc_refresh(struct ss_proc *p, struct ss_err *err);
/* Live: cheap exec detection (stat of /proc/PID/exe at most every
 * exec_check_ms); re-reads the maps when the executable changed. Returns 1
 * after an exec, 0 otherwise, -ESRCH when the process is gone. */
int ss_proc_check_exec(struct ss_proc *p, uint64_t now_ns);

const struct ss_mapping *ss_proc_mappings(const struct ss_proc *p, size_t *n);
uint64_t ss_proc_generation(const struct ss_proc *p);
pid_t ss_proc_pid(const struct ss_proc *p);
bool ss_proc_is_live(const struct ss_proc *p);
bool ss_proc_gone(const struct ss_proc *p);
/* Live: does the process still exist (same pid, same start time)? */
bool ss_proc_alive(struct ss_proc *p);
const char *ss_proc_comm(const struct ss_proc *p);
void ss_proc_set_comm(struct ss_proc *p, const char *comm);

/* Live: may we open pid's files and read its memory (process/access.c)?
 * 0, -ESRCH, or the permission error with a message naming the missing
 * capability (CAP_SYS_PTRACE). */
int ss_proc_check_access(pid_t pid, struct ss_err *err);

/* Parse /proc/PID/maps text (process/maps.c). Fills a malloc'd array whose
 * path strings point into text (which must stay alive). */
int ss_maps_parse(char *text, struct ss_map_desc **out, size_t *n);
/* Read a whole /proc file into a malloc'd NUL-terminated buffer. */
int ss_read_proc_file(const char *path, char **out, size_t *len);

#endif
