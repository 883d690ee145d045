/* snapfile/: the capture file (.snap) writer and reader.
 *
 * A capture is a 16-byte preamble (magic + format version) followed by a
 * stream of self-delimiting, checksummed records (docs/capture-format.md).
 * The writer appends records through a buffer; whatever reached the disk is
 * readable up to the last complete record, so a crash, SIGKILL or full disk
 * loses at most the buffered tail. The reader delivers typed records in file
 * order, skips corrupted records (reporting their byte offset) and reports
 * how many trailing bytes of a cut-short file it ignored.
 *
 * Strings and arrays in records handed out by the reader point into reader
 * memory and stay valid until the next ss_snap_next() or ss_snap_close(). */
#ifndef STACKSNAP_SNAPFILE_H
#define STACKSNAP_SNAPFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stacksnap/capture.h"
#include "stacksnap/ss.h"
#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"

/* Newest format version this build reads, and the one it writes for a
 * capture of unwound stacks (5: --no-stack-bytes, SS_SNAP_HDR_NOSTACK). A
 * capture of samples is written as version 4 (SS_SNAP_VERSION_SAMPLES), so
 * older readers still read it; 3: memreads not delta-coded, 2: sample bytes
 * not delta-coded, 1: no windows; all still read. */
#define SS_SNAP_VERSION 5u
#define SS_SNAP_VERSION_SAMPLES 4u
#define SS_SNAP_BUILD_ID_MAX 32u /* longest build-id kept (GNU sha1 = 20) */

/* Record types (on disk). Values never change; new types get new numbers and
 * old readers skip them. */
enum ss_snap_type {
    SS_SNAP_HEADER = 1,
    SS_SNAP_PROCESS = 2,
    SS_SNAP_SAMPLE = 3,
    SS_SNAP_MEMREADS = 4, /* delivered attached to their sample when they follow it */
    SS_SNAP_COUNTERS = 5,
    SS_SNAP_BUNDLE = 6,
    SS_SNAP_TRAILER = 7,
    SS_SNAP_PERFMAP = 8,    /* a process's perf map as the live walker used it */
    SS_SNAP_DEBUGFILE = 9,  /* a debug file (debuginfod) names a build-id from here on */
    SS_SNAP_PROCEVENT = 10, /* a process forked, exec'd or exited (ss.h: ss_proc_event) */
    SS_SNAP_KSYMS = 11,     /* kernel symbols that name kernel frames from here on */
    SS_SNAP_LJDET = 12,     /* a file's LuaJIT detection result, as live computed it */
    SS_SNAP_FRAMES = 13,    /* --no-stack-bytes: frames that stack records refer to by id */
    SS_SNAP_STACK = 14,     /* --no-stack-bytes: one sample's unwound stack (no target memory) */
    SS_SNAP_LJRT = 15,      /* a process's LuaJIT runtime: found, its layout, what failed */
    SS_SNAP_NTYPES = 16,
    /* Reader events (never on disk). */
    SS_SNAP_CORRUPT = 0x100,   /* a damaged region was skipped */
    SS_SNAP_TRUNCATED = 0x101, /* the file ends inside a record: last event */
};

/* ---- header: the first record of every capture ---- */
#define SS_SNAP_HDR_BUNDLE 0x1u /* recorded with --bundle */
#define SS_SNAP_HDR_KERNEL 0x2u /* recorded with --kernel */
#define SS_SNAP_HDR_OFFCPU 0x4u /* recorded with --off-cpu: samples are weighted */
/* recorded with --no-stack-bytes: stack records (the unwound frames) instead
 * of samples; no registers, stack bytes, windows or target reads (version 5) */
#define SS_SNAP_HDR_NOSTACK 0x8u

struct ss_snap_header {
    uint32_t version;       /* reader: format version of the file; writer: ignored */
    uint32_t flags;         /* SS_SNAP_HDR_* */
    char arch[16];          /* SS_ARCH of the writer: "x86_64", "aarch64" */
    uint32_t nregs;         /* registers per sample (SS_NREGS for x86_64) */
    uint32_t stack_size;    /* bytes of stack requested per sample */
    uint32_t freq_hz;       /* sampling frequency */
    uint64_t start_real_ns; /* CLOCK_REALTIME at start (Unix epoch, ns) */
    uint64_t start_mono_ns; /* CLOCK_MONOTONIC at the same moment (sample clock) */
    char hostname[65];
    char kernel_release[65]; /* uname -r */
    char tool_version[32];   /* stacksnap version that wrote the file */
    const char *command;     /* recorded command line, NULL/"" if none */
    uint64_t pac_mask;       /* aarch64: the pointer-authentication bits of return
                                addresses (util/pac.h), stripped by the walk; 0 none
                                (x86_64, and captures made before the field) */
};

/* The architecture a capture's samples are of: its header's arch, "x86_64"
 * when empty (captures made before arm64 support). */
const char *ss_snap_arch(const struct ss_snap_header *h);

/* Fill arch, nregs, hostname, kernel release and start times from the
 * running system; stack_size = SS_STACK_DEFAULT, freq_hz = 99. */
void ss_snap_header_init(struct ss_snap_header *h);

/* ---- process: when a process is first seen, after exec, when maps change ---- */
enum ss_snap_proc_reason {
    SS_SNAP_PROC_NEW = 0,  /* first seen */
    SS_SNAP_PROC_EXEC = 1, /* exec'd: replaces the previous image */
    SS_SNAP_PROC_MAPS = 2, /* mappings changed (dlopen, JIT areas) */
};

#define SS_SNAP_PROT_READ 0x1u
#define SS_SNAP_PROT_WRITE 0x2u
#define SS_SNAP_PROT_EXEC 0x4u
#define SS_SNAP_MAP_SHARED 0x8u /* 's' in /proc/PID/maps, else private */

struct ss_snap_mapping {
    uint64_t start, end; /* [start, end) in the process */
    uint64_t offset;     /* file offset of start */
    uint32_t prot;       /* SS_SNAP_PROT_* | SS_SNAP_MAP_SHARED */
    uint32_t dev_major, dev_minor;
    uint64_t inode;
    uint8_t build_id_len; /* 0 = none / not an ELF file */
    uint8_t build_id[SS_SNAP_BUILD_ID_MAX];
    const char *path; /* "" for anonymous; "[heap]", "[vdso]", ... */
};

struct ss_snap_process {
    uint32_t pid, ppid;
    uint32_t reason;  /* enum ss_snap_proc_reason */
    uint64_t time_ns; /* CLOCK_MONOTONIC when (re)read */
    const char *comm;
    const char *exe;
    uint32_t nmaps;
    const struct ss_snap_mapping *maps;
    /* cgroup v2 path when recorded ("0::" of /proc/PID/cgroup, appended to
     * the record: "" in older captures and when unknown) */
    const char *cgroup;
};

/* ---- target-memory reads the live walker made for one sample ---- */
struct ss_snap_read {
    uint64_t addr;
    uint32_t len;
    int32_t err;         /* 0 ok, else negative errno of the failed read */
    const uint8_t *data; /* len bytes when err == 0, else NULL */
};

/* ---- sample ---- */
#define SS_SNAP_MAX_REGS 34 /* the largest register set the format knows: arm64's */
struct ss_snap_sample {
    struct ss_sample s; /* s.stack points into reader memory */
    uint64_t seq;       /* writer's sample number, from 0 */
    uint64_t sp;        /* the recorded stack pointer (where s.stack starts), read by the
                           sample's register count whatever this build's registers are */
    uint32_t nregs;     /* registers the sample recorded */
    uint64_t fregs[SS_SNAP_MAX_REGS]; /* a sample of another register set (nregs !=
                                         SS_NREGS): its registers as recorded, the first
                                         SS_SNAP_MAX_REGS (s.regs has this build's only) */
    bool has_reads;                   /* a MEMREADS record for this sample followed it */
    uint32_t nreads;
    const struct ss_snap_read *reads;
    uint64_t kips[SS_KSTACK_MAX]; /* the reader's copy: s.kernel points there (ss_snap_next
                                     does not copy these s.nkernel addresses to its caller) */
};

/* Reads of a MEMREADS record that did not directly follow its sample. */
struct ss_snap_memreads {
    uint64_t sample_seq;
    uint32_t nreads;
    const struct ss_snap_read *reads;
};

/* ---- counters: cumulative values at time_ns; a later record supersedes ---- */
struct ss_snap_counter {
    const char *name; /* "capture.dropped", "unwind.no unwind info", ... */
    uint64_t value;
};
struct ss_snap_counters {
    uint64_t time_ns; /* CLOCK_MONOTONIC */
    uint32_t n;
    const struct ss_snap_counter *items;
};

/* ---- bundle: a whole mapped ELF file, deduplicated by (build-id, kind) ---- */
enum ss_snap_bundle_kind {
    SS_SNAP_BUNDLE_MAPPED = 0,  /* the file a mapping refers to */
    SS_SNAP_BUNDLE_DEBUG = 1,   /* its separate debug file (same build-id) */
    SS_SNAP_BUNDLE_FETCHED = 2, /* a debug file a debuginfod server gave (debugfile record) */
};
struct ss_snap_bundle {
    uint32_t kind; /* enum ss_snap_bundle_kind */
    uint8_t build_id_len;
    uint8_t build_id[SS_SNAP_BUILD_ID_MAX];
    const char *path; /* path on the recording machine */
    uint64_t size;
    const uint8_t *data; /* size bytes: the file's contents */
};

/* ---- perf map: the text of pid's perf-PID.map, written before the first
 * sample that used it (and again after each process record of pid) ---- */
struct ss_snap_perfmap {
    uint32_t pid;
    uint64_t time_ns; /* CLOCK_MONOTONIC of the sample it precedes */
    uint64_t len;
    const char *text; /* len bytes, not NUL-terminated */
};

/* ---- debug file: from this record on, the symbols of build-id come also
 * from the debug file at path (on the recording machine; with --bundle a
 * SS_SNAP_BUNDLE_FETCHED bundle of it precedes), and frames named before
 * are renamed (a debuginfod fetch ended live) ---- */
struct ss_snap_debugfile {
    uint64_t time_ns; /* CLOCK_MONOTONIC when live installed it */
    uint8_t build_id_len;
    uint8_t build_id[SS_SNAP_BUILD_ID_MAX];
    const char *path;
};

/* ---- kernel symbols (--kernel): the symbols live named kernel frames
 * with, written before the first sample that needs them ---- */
struct ss_snap_ksyms {
    uint32_t n;
    const struct ss_ksym *syms; /* unwind.h */
};

/* ---- LuaJIT detection (ss_lj_luajit.h): what detection and layout
 * derivation gave live for the file (build-id, size), written before the
 * first sample after live computed it; replay uses it instead of deriving
 * again when detver is its own SS_LJ_DETECT_VERSION ---- */
struct ss_snap_ljdet {
    uint32_t detver;
    uint8_t build_id_len;
    uint8_t build_id[SS_SNAP_BUILD_ID_MAX];
    uint64_t fsize;
    struct ss_lj_elfinfo info;
};

/* ---- --no-stack-bytes: frames and stacks (snapfile/stackrec.c) ----
 * A frames record defines frame ids first..first+n-1 (a deduplicated table:
 * each distinct frame once per capture); a stack record is one sample's
 * walked stack with its frames by id. */
struct ss_snap_frames {
    uint32_t first, n; /* ids defined (the reader keeps them) */
};
struct ss_snap_stack {
    struct ss_stack st; /* st.frames and st.comm point into / are reader memory */
    uint64_t seq;       /* writer's sample number, from 0 */
    uint32_t flags;     /* the sample's SS_SAMPLE_* flags */
};

/* ---- LuaJIT runtime: a LuaJIT module of process pid as live saw it when
 * its state changed (found; layout chosen; turned off), for `info` and
 * diagnostics; replay does not need it ---- */
#define SS_SNAP_LJRT_VM 1u      /* a usable VM (else LuaJIT's API without one) */
#define SS_SNAP_LJRT_LAYOUT 2u  /* a layout verified */
#define SS_SNAP_LJRT_DERIVED 4u /* ... built from facts derived from the code */
#define SS_SNAP_LJRT_OFF 8u     /* Lua walking turned off (layout text says why) */
struct ss_snap_ljrt {
    uint32_t pid;
    uint32_t flags; /* SS_SNAP_LJRT_* */
    uint8_t build_id_len;
    uint8_t build_id[SS_SNAP_BUILD_ID_MAX];
    uint64_t bias;
    const char *path;   /* the mapped file */
    const char *found;  /* ss_lj_found_text */
    const char *layout; /* ss_lj_layout_text ("" without a VM) */
};

/* ---- trailer: totals written by ss_snap_close (optional) ---- */
struct ss_snap_trailer {
    uint64_t end_real_ns, end_mono_ns;
    uint64_t records; /* records before the trailer, header included */
    uint64_t samples, processes, bundles;
    uint64_t offset; /* file offset of the trailer record */
};

/* ---- reader events ---- */
struct ss_snap_corrupt {
    uint64_t offset;    /* file offset of the damaged region */
    uint64_t skipped;   /* bytes skipped */
    const char *reason; /* "bad record header", "payload checksum mismatch", ... */
};
struct ss_snap_truncated {
    uint64_t offset;  /* where the incomplete record starts */
    uint64_t ignored; /* trailing bytes ignored */
};

/* One record or event. */
struct ss_snap_record {
    uint32_t type;   /* enum ss_snap_type */
    uint64_t offset; /* file offset of the record (events: of the region) */
    uint32_t size;   /* bytes on disk, record header included (0 for events) */
    bool compressed; /* payload was compressed on disk (zstd, or deflate) */
    union {
        struct ss_snap_header header;
        struct ss_snap_process process;
        struct ss_snap_sample sample;
        struct ss_snap_memreads memreads;
        struct ss_snap_counters counters;
        struct ss_snap_bundle bundle;
        struct ss_snap_trailer trailer;
        struct ss_snap_perfmap perfmap;
        struct ss_snap_debugfile debugfile;
        struct ss_snap_ksyms ksyms;
        struct ss_snap_ljdet ljdet;
        struct ss_snap_ljrt ljrt;
        struct ss_proc_event procevent;
        struct ss_snap_frames frames;
        struct ss_snap_stack stack;
        struct ss_snap_corrupt corrupt;
        struct ss_snap_truncated truncated;
    };
};

/* Per record type counts and on-disk bytes (index = enum ss_snap_type). */
struct ss_snap_stats {
    uint64_t records[SS_SNAP_NTYPES];
    uint64_t bytes[SS_SNAP_NTYPES];
    uint64_t unknown; /* records of unknown type/flags skipped */
    uint64_t corrupt; /* damaged regions skipped */
    uint64_t corrupt_bytes;
    uint64_t trailing_bytes; /* ignored at the end of a cut-short file */
    uint64_t file_bytes;     /* bytes consumed (reader) / written (writer) */
};

/* ======================= writer ======================= */
struct ss_snap_writer;

/* Create PATH (mode 0600; O_EXCL, or O_TRUNC of an existing regular file we
 * then own; never through a symlink) and write the preamble + header. */
int ss_snap_create(struct ss_snap_writer **out, const char *path, const struct ss_snap_header *h,
                   struct ss_err *err);

int ss_snap_write_process(struct ss_snap_writer *w, const struct ss_snap_process *p,
                          struct ss_err *err);

/* Record one target read for the sample being unwound (signature of
 * ss_mem_record_fn; ctx is the writer). Reads accumulate until the next
 * ss_snap_write_sample, which writes them right after the sample. */
void ss_snap_record_read(void *w, uint64_t addr, const void *data, size_t len, int err);
/* Drop reads recorded since the last sample (e.g. the sample is discarded). */
void ss_snap_discard_reads(struct ss_snap_writer *w);

/* --no-stack-bytes (header flag SS_SNAP_HDR_NOSTACK): append st, a walked
 * stack, as a stack record (flags: the sample's SS_SAMPLE_* flags), after a
 * frames record defining the frames it uses that no earlier record defined.
 * Nothing of the target's memory is written. -EINVAL in a capture whose
 * header lacks the flag (and ss_snap_write_sample is -EINVAL in one that has it). */
int ss_snap_write_stack(struct ss_snap_writer *w, const struct ss_stack *st, uint32_t flags,
                        struct ss_err *err);

/* Append a sample, then a MEMREADS record with the reads recorded since the
 * previous sample (if any). *seq_out (optional) gets the sample number. */
int ss_snap_write_sample(struct ss_snap_writer *w, const struct ss_sample *s, uint64_t *seq_out,
                         struct ss_err *err);

int ss_snap_write_counters(struct ss_snap_writer *w, uint64_t time_ns,
                           const struct ss_snap_counter *c, uint32_t n, struct ss_err *err);
int ss_snap_write_perfmap(struct ss_snap_writer *w, const struct ss_snap_perfmap *m,
                          struct ss_err *err);
int ss_snap_write_debugfile(struct ss_snap_writer *w, const struct ss_snap_debugfile *d,
                            struct ss_err *err);
int ss_snap_write_ksyms(struct ss_snap_writer *w, const struct ss_snap_ksyms *k,
                        struct ss_err *err);
int ss_snap_write_ljdet(struct ss_snap_writer *w, const struct ss_snap_ljdet *d,
                        struct ss_err *err);
int ss_snap_write_ljrt(struct ss_snap_writer *w, const struct ss_snap_ljrt *x, struct ss_err *err);
/* A process marker, where it came in the stream of samples. */
int ss_snap_write_procevent(struct ss_snap_writer *w, const struct ss_proc_event *ev,
                            struct ss_err *err);
/* Fill out[] with "capture.seen", ... from st and, when st saw off-CPU waits
 * (--off-cpu), "capture.off_blocks", "capture.off_short" and
 * "capture.off_unmatched"; returns how many (6, or SS_SNAP_CAPTURE_COUNTERS). */
#define SS_SNAP_CAPTURE_COUNTERS 9
uint32_t ss_snap_capture_counters(const struct ss_capture_stats *st, struct ss_snap_counter *out);

/* Bundle the ELF file at open_path (recorded as name; NULL = open_path):
 * its bytes, zstd-compressed, with the contents of non-loadable .debug_* sections
 * other than .debug_frame zeroed (sizes and offsets unchanged).
 * The build-id is read from the file; when expect_id is given it must match
 * (-ESTALE otherwise: the file changed since it was mapped). Returns 1 when
 * written, 0 when that (build-id, kind) is already in the capture, negative
 * errno on failure (-ENODATA: no build-id, -EFBIG: over 1 GiB). */
int ss_snap_write_bundle(struct ss_snap_writer *w, const char *open_path, const char *name,
                         enum ss_snap_bundle_kind kind, const uint8_t *expect_id, size_t expect_len,
                         struct ss_err *err);
bool ss_snap_has_bundle(const struct ss_snap_writer *w, const uint8_t *id, size_t len,
                        enum ss_snap_bundle_kind kind);

/* Push buffered records to the file (write(2), no fsync). */
int ss_snap_flush(struct ss_snap_writer *w, struct ss_err *err);
void ss_snap_writer_stats(const struct ss_snap_writer *w, struct ss_snap_stats *st);
/* Write the trailer, flush, close and free. Returns the first error any
 * write hit (e.g. -ENOSPC), which was also returned by that call. */
int ss_snap_close(struct ss_snap_writer *w, struct ss_err *err);
/* Close without trailer or flush (what a crash leaves; tests). */
void ss_snap_abandon(struct ss_snap_writer *w);

/* ======================= reader ======================= */
struct ss_snap_reader;

/* Open a capture. Errors: -EINVAL "not a stacksnap capture: FILE";
 * -EPROTONOSUPPORT "FILE: capture format version N is newer than this
 * stacksnap (reads version M)"; open(2) errors naming FILE. */
int ss_snap_open(struct ss_snap_reader **out, const char *path, struct ss_err *err);
/* Same on an open descriptor (pipe, memfd); takes ownership of fd. */
int ss_snap_open_fd(struct ss_snap_reader **out, int fd, const char *name, struct ss_err *err);

/* The header record, or NULL if the file's first record is not a valid
 * header (damaged). */
const struct ss_snap_header *ss_snap_get_header(const struct ss_snap_reader *r);

/* Next record or event: 1 delivered, 0 end of file, negative errno on an I/O
 * error. Damage is never an error: it comes as SS_SNAP_CORRUPT events and at
 * most one final SS_SNAP_TRUNCATED event. The header is delivered too. */
int ss_snap_next(struct ss_snap_reader *r, struct ss_snap_record *rec, struct ss_err *err);

/* Callback form: calls fn for every record/event until the end or until fn
 * returns nonzero (returned). 0 at the end, negative errno on I/O error. */
typedef int (*ss_snap_record_fn)(void *ctx, const struct ss_snap_record *rec);
int ss_snap_foreach(struct ss_snap_reader *r, ss_snap_record_fn fn, void *ctx, struct ss_err *err);

/* After a SS_SNAP_BUNDLE record: take ownership of its data (free() it).
 * The record's bundle.data is invalid afterwards. NULL if not a bundle. */
uint8_t *ss_snap_take_bundle(struct ss_snap_reader *r, size_t *len);

/* Start over at the first record (regular files only; -ESPIPE otherwise).
 * Stats restart too. */
int ss_snap_rewind(struct ss_snap_reader *r, struct ss_err *err);

void ss_snap_reader_stats(const struct ss_snap_reader *r, struct ss_snap_stats *st);
void ss_snap_close_reader(struct ss_snap_reader *r);

/* One line for a CORRUPT or TRUNCATED event, naming the file and offset:
 * "FILE: corrupted record at offset N skipped (REASON, M bytes)",
 * "FILE: truncated at offset N, ignored M trailing bytes". Returns buf. */
const char *ss_snap_event_str(const struct ss_snap_reader *r, const struct ss_snap_record *rec,
                              char *buf, size_t len);

/* Name of a record type or event ("sample", "corrupt"...). */
const char *ss_snap_type_str(uint32_t type);

#endif
