/* test/fuzz/snapfile_fuzz.c: libFuzzer target for the capture reader. Each
 * input is read as a capture file (through a memfd, like a real file): open,
 * iterate every record, touch every byte the records point to (so ASan sees
 * any out-of-bounds pointer), serve the sample's reads through the replay
 * target, take bundles. Built only when the C compiler is clang; see
 * docs/capture-format.md "Fuzzing" for how to run it long. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdlib.h>

#include "snapfile/target.h"
#include "stacksnap/snapfile.h"

static volatile uint8_t sink;

static void touch(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint8_t x = 0;
    for (size_t i = 0; i < n; i++)
        x ^= b[i];
    sink ^= x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("snapfuzz", MFD_CLOEXEC);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    lseek(fd, 0, SEEK_SET);
    struct ss_err err = {0};
    struct ss_snap_reader *r;
    if (ss_snap_open_fd(&r, fd, "fuzz.snap", &err)) return 0;
    struct ss_snap_record rec;
    char line[512];
    while (ss_snap_next(r, &rec, &err) == 1) {
        switch (rec.type) {
        case SS_SNAP_HEADER:
            touch(rec.header.command, strlen(rec.header.command));
            break;
        case SS_SNAP_PROCESS:
            touch(rec.process.comm, strlen(rec.process.comm));
            for (uint32_t i = 0; i < rec.process.nmaps; i++)
                touch(rec.process.maps[i].path, strlen(rec.process.maps[i].path));
            break;
        case SS_SNAP_SAMPLE: {
            touch(rec.sample.s.stack, rec.sample.s.stack_len);
            struct ss_snap_replay rp = {0};
            ss_snap_replay_set(&rp, &rec.sample);
            for (uint32_t i = 0; i < rec.sample.nreads; i++) {
                const struct ss_snap_read *rd = &rec.sample.reads[i];
                if (!rd->err) touch(rd->data, rd->len);
                uint8_t buf[64];
                struct ss_iov iov = {rd->addr, buf, rd->len < 64 ? rd->len : 64, 0, false, false};
                ss_snap_target_replay.readv(&rp, &iov, 1);
            }
            break;
        }
        case SS_SNAP_MEMREADS:
            for (uint32_t i = 0; i < rec.memreads.nreads; i++)
                if (!rec.memreads.reads[i].err)
                    touch(rec.memreads.reads[i].data, rec.memreads.reads[i].len);
            break;
        case SS_SNAP_COUNTERS:
            for (uint32_t i = 0; i < rec.counters.n; i++)
                touch(rec.counters.items[i].name, strlen(rec.counters.items[i].name));
            break;
        case SS_SNAP_BUNDLE: {
            touch(rec.bundle.data, rec.bundle.size);
            size_t n;
            free(ss_snap_take_bundle(r, &n));
            break;
        }
        case SS_SNAP_STACK: /* --no-stack-bytes: frames from the reader's table */
            touch(rec.stack.st.comm, strlen(rec.stack.st.comm));
            for (uint32_t i = 0; i < rec.stack.st.nframes; i++) {
                const struct ss_frame *f = &rec.stack.st.frames[i];
                if (f->name) touch(f->name, strlen(f->name));
                if (f->module) touch(f->module, strlen(f->module));
                if (f->system_name) touch(f->system_name, strlen(f->system_name));
                touch(f->build_id, f->build_id_len);
            }
            break;
        case SS_SNAP_CORRUPT:
        case SS_SNAP_TRUNCATED:
            ss_snap_event_str(r, &rec, line, sizeof(line));
            break;
        }
    }
    ss_snap_close_reader(r);
    return 0;
}
