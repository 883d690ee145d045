/* snapfile/writer.h: writer internals shared by writer.c (file, buffering,
 * record framing, compression) and bundle.c (bundle records). */
#ifndef SS_SNAPFILE_WRITER_H
#define SS_SNAPFILE_WRITER_H

#include <zstd.h>

#include "snapfile/delta.h"
#include "snapfile/frames.h"
#include "snapfile/rdelta.h"
#include "snapfile/format.h"

#define SNAP_OUT_BUF (256u << 10)   /* write buffer */
#define SNAP_COMPRESS_MIN 256u      /* smaller payloads are stored as is */
#define SNAP_READS_MAX (256u << 20) /* pending read bytes kept per sample */

/* Compression choice per record: none, fast (samples, reads, processes),
 * or best (bundles: written once, read many times). */
enum snap_level { SNAP_Z_NONE = -1, SNAP_Z_FAST = 0, SNAP_Z_BEST = 1 };
/* zstd levels of SNAP_Z_FAST and SNAP_Z_BEST (docs/capture-format.md has the
 * measurements behind them). */
#define SNAP_ZSTD_FAST (-1)
#define SNAP_ZSTD_BEST 9

/* A payload is the concatenation of parts (no copy before compression). */
struct snap_part {
    const void *p;
    size_t len;
};

struct snap_bundle_key {
    uint32_t kind;
    uint8_t len;
    uint8_t id[SS_SNAP_BUILD_ID_MAX];
};

struct ss_snap_writer {
    int fd;
    char *path;
    uint8_t *out;
    size_t out_len;
    struct snap_buf pay;   /* payload being built */
    struct snap_buf zbuf;  /* compressed payload */
    struct snap_buf reads; /* encoded reads pending for the next sample */
    uint32_t nreads;
    ZSTD_CCtx *zc[2];           /* per level, created on first use, reused */
    struct snap_dstate *delta;  /* the threads' bases of delta-coded samples */
    struct snap_rstate *rdelta; /* and of delta-coded memreads (version 4) */
    uint64_t next_seq;
    struct ss_snap_stats st;
    uint64_t nrecords;
    struct snap_bundle_key *bundles;
    size_t nbundles, bundles_cap;
    /* --no-stack-bytes (frames.c): stack records, frames by id */
    bool nostack;
    struct snap_fdict *fdict;
    uint32_t *ids;
    size_t ids_cap;
    struct snap_buf defs; /* frames record being built */
    int err;              /* sticky: first write error */
    char errmsg[256];
};

/* Frame, maybe compress, and buffer one record. 0 or negative errno. */
int snap_emit(struct ss_snap_writer *w, uint16_t type, enum snap_level level,
              const struct snap_part *parts, int nparts, struct ss_err *err);

/* GNU build-id of the ELF image img (bundle.c): 1 found (id, *len set), 0 no
 * build-id, -ENOEXEC not an ELF file. */
int snap_elf_build_id(const void *img, size_t size, uint8_t *id, uint8_t *len);

#endif
