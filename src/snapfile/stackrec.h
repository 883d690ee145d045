/* snapfile/stackrec.h: captures of unwound stacks (--no-stack-bytes, format
 * version 5): the writer's frame dictionary (fdict.c) and the reader's frame
 * table, and the frames and stack records' payloads. */
#ifndef SS_SNAPFILE_STACKREC_H
#define SS_SNAPFILE_STACKREC_H

#include "snapfile/format.h"

/* Smallest encoded frame: kind, has, bid length, addr, offset, sym_offset,
 * line, first_line. Bounds what a record's bytes can define. */
#define SNAP_FRAME_MIN 37u
#define SNAP_HAS_NAME 0x1u
#define SNAP_HAS_MODULE 0x2u
#define SNAP_HAS_SYSNAME 0x4u

/* Writer (fdict.c): every distinct frame written so far, by content, with its id. */
struct snap_fdict;
void snap_fdict_free(struct snap_fdict *d);

/* Reader (stackrec.c): the frames defined so far, by id (reset by a rewind). */
struct snap_ftable;
struct snap_ftable *snap_ftable_new(void);
void snap_ftable_reset(struct snap_ftable *t);
void snap_ftable_free(struct snap_ftable *t);

/* A frames record at file offset off: its frames join t. A stack record:
 * its ids resolved through t into a->frames. 0, -EBADMSG (*why), -ENOMEM. */
int snap_dec_frames(struct snap_cur *c, struct snap_ftable *t, uint64_t off,
                    struct ss_snap_frames *f, const char **why);
int snap_dec_stack(struct snap_cur *c, const struct snap_ftable *t, struct snap_arrays *a,
                   struct ss_snap_stack *s, const char **why);

#endif
