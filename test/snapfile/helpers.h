/* test/snapfile/helpers.h: shared helpers of the capture-file tests: temp
 * folders, real inputs (this process's maps, stack and memory), a canonical
 * digest of every delivered record, and an independent framing walker used as
 * the oracle for record boundaries. */
#ifndef SS_TEST_SNAPFILE_HELPERS_H
#define SS_TEST_SNAPFILE_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stacksnap/snapfile.h"

/* A fresh temp folder (removed by th_rmtree). */
char *th_tmpdir(void);
void th_rmtree(const char *dir);
char *th_path(const char *dir, const char *name); /* malloc'd dir/name */

uint8_t *th_load(const char *path, size_t *len);
void th_store(const char *path, const void *buf, size_t len);
/* A memfd holding buf, positioned at 0. */
int th_memfd(const void *buf, size_t len);

/* This process's mappings from /proc/self/maps (strings malloc'd). */
struct th_maps {
    uint32_t n;
    struct ss_snap_mapping *m;
};
void th_self_maps(struct th_maps *out);
void th_free_maps(struct th_maps *m);

/* A real sample of this thread: registers of this frame, up to stack_req
 * bytes of its stack (process_vm_readv). Stack bytes malloc'd. */
void th_self_sample(struct ss_sample *s, uint32_t stack_req);
extern const char th_text[36]; /* the first read of th_record_self_reads */
/* Record real target reads of this process into the writer: a few good
 * ones and one failing (address 8). Returns how many. */
int th_record_self_reads(struct ss_snap_writer *w);

/* Write a small but complete capture: header, process, n samples (with
 * reads on even ones), counters, trailer. Returns file size. */
size_t th_write_small(const char *path, int nsamples, uint32_t stack_req);

/* One delivered item: a record (reads attached to a sample are split into
 * their own SS_SNAP_MEMREADS item) or an event. */
struct th_item {
    uint32_t type;
    uint64_t offset; /* records: record offset; attached reads: 0 */
    uint32_t digest; /* crc32 over every decoded field */
    uint64_t a, b;   /* events: offset, skipped/ignored */
};
struct th_list {
    struct th_item *v;
    size_t n, cap;
    struct ss_snap_stats st;
    bool header; /* ss_snap_get_header() != NULL at the end */
};
/* Open + read everything. Returns the open error (0 if opened); *msg gets
 * the error message. Fails the test on I/O errors or runaway loops. */
int th_read_fd(int fd, struct th_list *out, char *msg, size_t msglen);
int th_read_path(const char *path, struct th_list *out, char *msg, size_t msglen);
void th_list_free(struct th_list *l);
uint32_t th_digest(const struct ss_snap_record *rec);
uint32_t th_digest_reads(uint64_t seq, uint32_t n, const struct ss_snap_read *r);

/* Independent framing walk (header lengths only, no CRC checks): record
 * offsets/ends/types of an undamaged file. */
struct th_frame {
    uint64_t off, end;
    uint16_t type;
};
size_t th_frames(const uint8_t *buf, size_t len, struct th_frame *out, size_t max);

/* Frame an arbitrary record (valid sync + CRCs) into buf; returns its size. */
size_t th_frame_record(uint8_t *buf, uint16_t type, uint16_t flags, const void *payload,
                       uint32_t len);

#endif
