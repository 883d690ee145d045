/* symbolize/: native frame names.
 *
 * A native frame gets the name of the function symbol that contains it, or
 * none. Without a symbol the name is MODULE+0xSTART, the file offset where
 * the .eh_frame FDE of the function starts (one frame per function), else
 * the frame text is MODULE+0xOFFSET (module basename and file offset,
 * DESIGN.md "Frame text"). C++ and Rust names are demangled (demangle.c;
 * system_name keeps the symbol). Anonymous executable memory (JIT code) is
 * named from the process's perf map (perf-PID.map) when it has one. Strings are interned in an
 * ss_strpool so frames stay valid after the files and processes they came from are gone (the frame
 * text itself is report/'s ss_frame_text). A per-process direct-mapped cache keyed by address makes
 * repeated addresses cost one lookup; behind it each file keeps what its addresses are called
 * (filememo.c), so a new process of a program seen before is named without symbol searches. */
#ifndef SS_SYMBOLIZE_H
#define SS_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stacksnap/ss.h"

struct ss_proc;
struct ss_strpool;
struct ss_symcache;

int ss_strpool_new(struct ss_strpool **out);
void ss_strpool_free(struct ss_strpool *p);
/* An identity for caches that outlive a pool (filememo.c): a pool freed and
 * another allocated at its address must not be taken for it. 0 by default;
 * unwinders sharing a file cache take one from it (ss_elf_cache_pool_id). */
void ss_strpool_set_id(struct ss_strpool *p, uint64_t id);
uint64_t ss_strpool_id(const struct ss_strpool *p);
/* Interned copy of s (NULL for NULL); NULL on allocation failure. */
const char *ss_strpool_intern(struct ss_strpool *p, const char *s);
const char *ss_strpool_intern_n(struct ss_strpool *p, const char *s, size_t len);
size_t ss_strpool_count(const struct ss_strpool *p);

/* The demangled form of a C++ or Rust symbol name, interned in pool; NULL
 * when name is not mangled (or on allocation failure). */
const char *ss_demangle(struct ss_strpool *pool, const char *name);

int ss_symcache_new(struct ss_symcache **out);
void ss_symcache_free(struct ss_symcache *c);
/* Name anonymous executable memory from this perf map (process/perfmap.h;
 * owned by the caller, outlives the cache); live_pid: a live process whose
 * map is re-read when a lookup misses (0: replay, never). A re-read changes
 * ss_perfmap_version: the caller symbolizes the sample again. */
struct ss_perfmap;
void ss_symcache_set_perfmap(struct ss_symcache *c, struct ss_perfmap *pm, pid_t live_pid);

/* Debug files that arrive later (elf/fetched.c) change names: entries made
 * before a change of files' names generation are looked up again. */
struct ss_elf_cache;
void ss_symcache_set_files(struct ss_symcache *c, const struct ss_elf_cache *files);

/* Rename a frame named before a debug file of its module arrived (build-id,
 * file offset, old name and sym_offset): out gets the name (and
 * system_name, sym_offset) elf's current symbols give at the same place:
 * the old symbol's start + (ip - start - 1) for a named frame with a
 * non-zero sym_offset (the call site of a return address), else ip. false
 * when elf has no symbol there (out unchanged). */
struct ss_elf;
bool ss_symbolize_rename(struct ss_strpool *pool, struct ss_elf *elf, const struct ss_frame *in,
                         struct ss_frame *out);

/* Fill out (kind, addr, offset, name, module, build-id) for native address
 * ip of proc; exact = ip is not a return address (the leaf, a frame below a
 * signal frame, or the signal trampoline itself, which the kernel "returns"
 * to at its first byte). Other addresses are looked up at ip - 1, so a call
 * at the very end of a function names the calling function. */
void ss_symbolize_native(struct ss_symcache *c, struct ss_strpool *pool, struct ss_proc *proc,
                         uint64_t ip, bool exact, struct ss_frame *out);

#endif
