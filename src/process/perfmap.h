/* process/perfmap.h: a process's perf map (/tmp/perf-PID.map, the
 * convention JITs such as V8 with --perf-basic-prof write: one line per
 * code region, "START SIZE NAME" in hex), naming anonymous executable
 * memory (process/perfmap.c). */
#ifndef SS_PROCESS_PERFMAP_H
#define SS_PROCESS_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SS_PERFMAP_MAX_BYTES (16u << 20) /* bigger files are read up to here */
#define SS_PERFMAP_GAP_NS 10000000ull    /* live: at most one re-read per 10 ms */

struct ss_perfmap;

struct ss_perfmap *ss_perfmap_new(void);
void ss_perfmap_free(struct ss_perfmap *m);
/* The name of the region holding addr (its start in *start), or NULL. A
 * miss asks ss_perfmap_sync to look at the file again. */
const char *ss_perfmap_find(struct ss_perfmap *m, uint64_t addr, uint64_t *start);
/* Live: (re)read the map of pid when a lookup missed (or never tried) and
 * min_gap_ns passed since the last look; from the target's own root
 * (/proc/PID/root, RESOLVE_IN_ROOT) under its pid namespace's number, owned
 * by the target's user or root, regular file only. While there is no such
 * file the gap between looks doubles (up to 640 ms); a file whose size and
 * mtime did not change is not read again. Returns true when the contents
 * changed (version() moved). */
bool ss_perfmap_sync(struct ss_perfmap *m, pid_t pid, uint64_t now_ns, uint64_t min_gap_ns);
/* Replace the contents (replay: the text a capture recorded); 0 or -ENOMEM. */
int ss_perfmap_set(struct ss_perfmap *m, const char *text, size_t len);
/* 0 while no map was loaded, then changes with each new contents. */
uint32_t ss_perfmap_version(const struct ss_perfmap *m);
/* The text of the current contents (NULL/0 when none). */
const char *ss_perfmap_text(const struct ss_perfmap *m, size_t *len);

#endif
