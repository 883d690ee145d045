/* elf/: ELF files as the unwinder needs them.
 *
 * An ss_elf is one mapped-in file (mmap'd read-only image + libelf handle):
 * build-id, PT_LOAD segments, the RELRO range, the .eh_frame_hdr search
 * table, and, loaded lazily, the .debug_frame FDE index and a sorted symbol
 * table gathered from .symtab/.dynsym, a separate debug file (build-id path or
 * .gnu_debuglink) and .gnu_debugdata (MiniDebugInfo), plus NAME@plt for the
 * PLT entries no real symbol covers. Files are shared through an
 * ss_elf_cache keyed by build-id (or dev/inode/size/mtime when a file has no
 * build-id), so every process mapping libc uses one ss_elf. */
#ifndef SS_ELF_H
#define SS_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stacksnap/ss.h"

#define SS_ELF_MAX_LOAD 16

struct ss_elf_seg {
    uint64_t vaddr, memsz, offset, filesz;
    uint32_t flags; /* PF_R/PF_W/PF_X */
};

/* One symbol: [addr, addr + size) in ELF virtual addresses. */
struct ss_sym {
    uint64_t addr, size;
    const char *name;
};

struct ss_symtab;
struct ss_dframe;
struct ss_elf_cache;

struct ss_elf {
    char *path; /* as opened, for messages */
    uint8_t build_id[20];
    uint8_t build_id_len;
    uint64_t dev, ino, fsize, mtime; /* identity when there is no build-id */

    const uint8_t *image; /* whole file, read-only */
    size_t size;
    void *elf; /* Elf * (libelf) */
    uint16_t e_type;
    uint16_t e_machine; /* EM_X86_64, EM_AARCH64 */
    uint64_t e_entry;   /* ELF header's entry point (vaddr), 0 = none */

    struct ss_elf_seg load[SS_ELF_MAX_LOAD];
    unsigned nload;
    uint64_t relro_vaddr, relro_memsz; /* PT_GNU_RELRO, memsz 0 = none */

    /* .eh_frame_hdr (vaddr 0 = none). The binary search table is usable by
     * libunwind only when table_enc is datarel|sdata4 (eh_hdr_ok). */
    uint64_t eh_hdr_vaddr, eh_hdr_size;
    uint64_t eh_frame_vaddr;
    uint64_t fde_count;
    bool eh_hdr_ok;

    /* lazily loaded; see ss_elf_debug_frame, ss_elf_symbols */
    int dframe_state; /* 0 not tried, 1 loaded, -1 none */
    struct ss_dframe *dframe;
    int syms_state;
    struct ss_symtab *syms;
    int debug_state;
    struct ss_elf *debug;   /* separate debug file, not in the cache */
    int fetched_state;      /* 0 not looked for, 1 looked for (elf/fetched.c) */
    struct ss_elf *fetched; /* debug file a debuginfod server gave, not in the cache */

    /* private slot of the unwinder (per-file unwind rule rows) */
    void *unwind_priv;
    void (*unwind_priv_free)(void *);
    /* private slot of the symbolizer (symbolize/filememo.c: names by address) */
    void *sym_priv;
    void (*sym_priv_free)(void *);

    int refs;
    unsigned idle_rounds; /* collections (ss_elf_cache_gc) seen unreferenced */
    int image_owned;      /* images opened without the cache: 1 free, 2 munmap */
    bool image_mmapped;   /* image is a private file mapping (ss_elf_release_tables) */
    struct ss_elf_cache *cache;
    struct ss_elf *next; /* cache chain */
};

/* The cache of opened files. debug_root: where /usr/lib/debug lives ("" or
 * NULL = "/"), so tests and --symfs can point elsewhere. */
int ss_elf_cache_new(struct ss_elf_cache **out, const char *debug_root);
void ss_elf_cache_free(struct ss_elf_cache *c);
/* Close files no mapping has referred to for the last 8 collections, and
 * the longest unreferenced beyond 16 such files. */
void ss_elf_cache_gc(struct ss_elf_cache *c);
size_t ss_elf_cache_count(const struct ss_elf_cache *c);

/* Open the ELF file on fd (always consumed) and return a referenced ss_elf:
 * the cached one when the same file (device, inode, size, mtime; not mapped
 * again) or a file with the same build-id is already open. */
int ss_elf_open_fd(struct ss_elf_cache *c, int fd, const char *path, struct ss_elf **out,
                   struct ss_err *err);
/* The cached file of this identity (device, inode, size, mtime: as
 * ss_elf_open_fd finds it), referenced; NULL when none. With it a caller
 * that has stat'ed a file need not open it for reading. */
struct stat;
struct ss_elf *ss_elf_cache_lookup_stat(struct ss_elf_cache *c, const struct stat *st);
/* A file found not to be ELF (the last 64 such identities are kept), and
 * whether this one is such a file. */
void ss_elf_cache_note_other(struct ss_elf_cache *c, const struct stat *st);
bool ss_elf_cache_is_other(const struct ss_elf_cache *c, const struct stat *st);
/* Open by path (host filesystem); for tests and tools. */
int ss_elf_open_path(struct ss_elf_cache *c, const char *path, struct ss_elf **out,
                     struct ss_err *err);
struct ss_elf *ss_elf_ref(struct ss_elf *e);
void ss_elf_put(struct ss_elf *e);

/* The PT_LOAD segment that holds file offset off (page-rounded mappings
 * match the segment whose file range overlaps [off, off + len)). */
const struct ss_elf_seg *ss_elf_seg_for_offset(const struct ss_elf *e, uint64_t off, uint64_t len);
/* Pointer to the file bytes of ELF vaddr range [vaddr, vaddr + len), or NULL. */
const void *ss_elf_vaddr_ptr(const struct ss_elf *e, uint64_t vaddr, size_t len);
/* Give back the pages of e's symbol, string, hash, version and relocation
 * sections (whole pages inside them): they are read whole once, to build
 * the symbol table and by LuaJIT detection; afterwards only the names of
 * the symbols looked up are read again. Only for images that are private
 * file mappings the agent never writes (a later read faults the page in
 * again from the page cache, same bytes); a no-op otherwise. */
void ss_elf_release_tables(const struct ss_elf *e);
/* The same for the whole pages of [p, p + len) when they lie in e's image:
 * long one-pass scans (relocations, symbol entries) give back what they
 * have read as they go, so a big library never has its tables resident at
 * once. */
void ss_elf_release_range(const struct ss_elf *e, const void *p, size_t len);
/* Entries a scan reads between two ss_elf_release_range calls. */
#define SS_ELF_RELEASE_EVERY 8192
/* Named section data (uncompressed); NULL when absent. */
const void *ss_elf_section(struct ss_elf *e, const char *name, size_t *size, uint64_t *vaddr);

/* Symbols (elf/symbols.c). */
const struct ss_sym *ss_elf_symbol(struct ss_elf *e, uint64_t vaddr);
size_t ss_elf_symbol_count(struct ss_elf *e);
/* Synthetic NAME@plt symbols of e's x86-64 PLT entries (elf/plt.c): fn gets
 * each entry's vaddr, size and a malloc'd name it owns. */
typedef void (*ss_plt_fn)(void *ctx, uint64_t addr, uint64_t size, char *name);
void ss_elf_plt_symbols(struct ss_elf *e, ss_plt_fn fn, void *ctx);
/* The code range [lo, hi) of the .eh_frame FDE that covers vaddr, through
 * the .eh_frame_hdr table (elf/fde.c); false when none does. */
bool ss_elf_fde_range(const struct ss_elf *e, uint64_t vaddr, uint64_t *lo, uint64_t *hi);
/* DWARF helpers (elf/fde.c): read a ULEB128 (also skips an SLEB128) within
 * [*p, end); the size of a DW_EH_PE-encoded value (0 = unsupported). */
uint64_t ss_elf_uleb(const uint8_t **p, const uint8_t *end);
unsigned ss_elf_enc_size(uint8_t enc);
/* Synthetic symbols for files without a full symbol table (the LuaJIT
 * internals, unwind/luajit/vmsyms.c): set once per cache by its owner; fn
 * calls add for each symbol (size 0 = up to the end of its FDE; names must
 * outlive the cache). */
typedef void (*ss_elf_synth_add)(void *ctx, uint64_t vaddr, uint64_t size, const char *name);
typedef void (*ss_elf_synth_fn)(void *sctx, struct ss_elf *e, ss_elf_synth_add add, void *ctx);
void ss_elf_cache_set_synth(struct ss_elf_cache *c, ss_elf_synth_fn fn, void *sctx);
ss_elf_synth_fn ss_elf_cache_synth(const struct ss_elf_cache *c);
void *ss_elf_cache_synth_ctx(const struct ss_elf_cache *c); /* sctx given with fn */
/* Build-id of e as hex (out >= 41 bytes). */
void ss_elf_build_id_hex(const struct ss_elf *e, char *out);

/* Separate debug file (elf/debuginfo.c): by build-id under
 * DEBUG_ROOT/usr/lib/debug/.build-id/, else .gnu_debuglink (CRC checked).
 * NULL when none. */
struct ss_elf *ss_elf_debug(struct ss_elf *e);
/* Open a separate debug file at path (a regular file only); NULL when it
 * cannot be read as ELF. */
struct ss_elf *ss_elf_open_debug_file(const char *path);

/* Fetched debug files (elf/fetched.c): debug files that arrive while the
 * cache is in use (debuginfod, or a capture's record of one). They name
 * symbols only (never unwind rules), after the file's own .symtab and its
 * local debug file and before MiniDebugInfo. fetch (optional) is called once
 * for a file whose symbols are loaded without a full table and without a
 * known fetched debug file: the owner may ask a server for it. */
typedef void (*ss_elf_fetch_fn)(void *ctx, struct ss_elf *e);
void ss_elf_cache_set_fetch(struct ss_elf_cache *c, ss_elf_fetch_fn fn, void *ctx);
/* Use the debug file at path for build-id id from now on: attached to the
 * open file of that build-id (its symbol table is rebuilt) and to one opened
 * later. -ESTALE when the file has another build-id, -ENOENT unreadable,
 * -ENOMEM. */
int ss_elf_cache_add_debug(struct ss_elf_cache *c, const uint8_t *id, size_t len, const char *path,
                           struct ss_err *err);
/* Changes whenever ss_elf_cache_add_debug changed a symbol table. */
uint64_t ss_elf_cache_names_gen(const struct ss_elf_cache *c);
/* A new id, never 0, for a string pool whose names caches of c's files keep
 * (symbolize/filememo.c): each unwinder's pool takes one. */
uint64_t ss_elf_cache_pool_id(struct ss_elf_cache *c);
/* The fetched debug file of e, or NULL (may call the fetch hook). */
struct ss_elf *ss_elf_fetched_debug(struct ss_elf *e);
/* The open file with build-id id (no reference taken), or NULL. */
struct ss_elf *ss_elf_cache_find(struct ss_elf_cache *c, const uint8_t *id, size_t len);
/* elf.c keeps this state per cache; fetched.c owns it. */
struct ss_elf_fetched {
    uint8_t id[20];
    uint8_t len;
    char *path;
};
struct ss_elf_fetch_state {
    struct ss_elf_fetched *v;
    size_t n, cap;
    ss_elf_fetch_fn fn;
    void *ctx;
    uint64_t gen;
};
struct ss_elf_fetch_state *ss_elf_cache_fetch_state(struct ss_elf_cache *c);
void ss_elf_fetch_state_free(struct ss_elf_fetch_state *fs);

/* Decompress .gnu_debugdata (xz) into an in-memory ELF; returns a malloc'd
 * image (caller frees) or NULL. */
void *ss_elf_minidebuginfo(struct ss_elf *e, size_t *size);
/* Open an ELF image without the cache (debug files, MiniDebugInfo). owned:
 * free(image) (owned == 1) or munmap (owned == 2) when closed. */
struct ss_elf *ss_elf_open_image(const uint8_t *image, size_t size, int owned, const char *path);
void ss_elf_close_image(struct ss_elf *e);

/* .debug_frame FDE index (elf/debug_frame.c), from the file or its debug
 * file. Entries sorted by start; start/fde_off are int32 as libunwind's
 * table_entry wants them. */
struct ss_dframe_entry {
    int32_t start;
    int32_t fde_off;
};
struct ss_dframe {
    const uint8_t *sec; /* the .debug_frame bytes (8-byte padded) */
    size_t size;
    struct ss_dframe_entry *index;
    size_t n;
    uint64_t lo, hi; /* covered vaddr range */
    void *owned;     /* decompressed copy, if any */
};
const struct ss_dframe *ss_elf_debug_frame(struct ss_elf *e);

/* internal helpers shared by the elf/ files */
int ss_elf_parse(struct ss_elf *e, struct ss_err *err);
void ss_dframe_free(struct ss_dframe *d);
void ss_symtab_free(struct ss_symtab *s);
const char *ss_elf_cache_debug_root(const struct ss_elf_cache *c);

#endif
