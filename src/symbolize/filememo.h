/* symbolize/filememo.h: what the addresses of one ELF file are called, kept
 * with the file for every process that maps it (filememo.c). */
#ifndef SS_SYMBOLIZE_FILEMEMO_H
#define SS_SYMBOLIZE_FILEMEMO_H

#include <stdbool.h>
#include <stdint.h>

struct ss_elf;
struct ss_strpool;

enum ss_fm_kind {
    SS_FM_NONE = 0, /* no symbol and no FDE: the frame keeps no name */
    SS_FM_BLANK,    /* a symbol without a name: stays MODULE+0xOFFSET */
    SS_FM_SYM,      /* the symbol at start: name (demangled) and sysname (as spelt) */
    SS_FM_FDE,      /* no symbol, the FDE starting at start: name for module/fileoff */
};

struct ss_fm_ent {
    uint64_t key; /* file address looked up + 1; 0 = empty */
    uint8_t kind; /* enum ss_fm_kind */
    const char *name, *sysname;
    uint64_t start;     /* SYM: symbol address; FDE: its first address (file addresses) */
    const char *module; /* FDE: the module the name was made for (interned) */
    uint64_t fileoff;   /* FDE: and the file offset in it */
};

/* The entry of e for file address look; *hit: it holds look's answer, made
 * with strings of pool in names generation gen. On a miss the entry is
 * emptied for the caller to fill (key set, kind SS_FM_NONE). NULL when the
 * memo cannot be allocated (the caller resolves without it). */
struct ss_fm_ent *ss_filememo_slot(struct ss_elf *e, uint64_t look, uint64_t gen,
                                   const struct ss_strpool *pool, bool *hit);

#endif
