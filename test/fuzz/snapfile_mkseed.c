/* test/fuzz/snapfile_mkseed.c: writes small valid captures into a folder, as
 * the starting corpus of snapfile_fuzz (usage: snapfile_mkseed DIR). One
 * capture per shape: samples with and without reads, compressed and stored
 * records, counters, a bundle of this program, with and without trailer,
 * and a capture of unwound stacks (--no-stack-bytes, version 5). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stacksnap/snapfile.h"

static int seed(const char *dir, const char *name, int nsamples, unsigned stack, bool bundle,
                bool trailer)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    strcpy(h.tool_version, "seed");
    h.command = "snapfile_mkseed";
    struct ss_err err = {0};
    struct ss_snap_writer *w;
    if (ss_snap_create(&w, path, &h, &err)) goto fail;
    struct ss_snap_mapping maps[3] = {
        {0x400000,
         0x401000,
         0,
         SS_SNAP_PROT_READ | SS_SNAP_PROT_EXEC,
         8,
         1,
         1234,
         20,
         {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20},
         "/usr/bin/app"},
        {0x7f0000000000,
         0x7f0000021000,
         0,
         SS_SNAP_PROT_READ | SS_SNAP_PROT_WRITE,
         0,
         0,
         0,
         0,
         {0},
         "[heap]"},
        {0x7ffff0000000,
         0x7ffff0021000,
         0,
         SS_SNAP_PROT_READ | SS_SNAP_PROT_WRITE,
         0,
         0,
         0,
         0,
         {0},
         "[stack]"}};
    struct ss_snap_process p = {
        .pid = 100, .ppid = 1, .comm = "app", .exe = "/usr/bin/app", .nmaps = 3, .maps = maps};
    if (ss_snap_write_process(w, &p, &err)) goto fail;
    uint8_t *st = calloc(1, stack + 1);
    for (int i = 0; i < nsamples; i++) {
        for (unsigned k = 0; k < stack; k += 8)
            st[k] = (uint8_t)(i + k / 8);
        struct ss_sample s = {.pid = 100,
                              .tid = 100 + (uint32_t)i,
                              .cpu = 1,
                              .time_ns = 1000u * (uint64_t)i,
                              .stack_len = stack,
                              .stack_req = stack,
                              .stack = st};
        s.regs[SS_REG_SP] = 0x7ffff0010000;
        s.regs[SS_REG_IP] = 0x400123;
        if (i % 2 == 0) {
            ss_snap_record_read(w, 0x7f0000000100, st, 24, 0);
            ss_snap_record_read(w, 0x10, NULL, 8, -14);
        }
        if (ss_snap_write_sample(w, &s, NULL, &err)) goto fail;
    }
    free(st);
    struct ss_capture_stats cs = {.seen = 10, .emitted = 9, .dropped = 1, .copy_partial = 2};
    struct ss_snap_counter c[6];
    if (ss_snap_write_counters(w, 5000, c, ss_snap_capture_counters(&cs, c), &err)) goto fail;
    if (bundle && ss_snap_write_bundle(w, "/proc/self/exe", "snapfile_mkseed",
                                       SS_SNAP_BUNDLE_MAPPED, NULL, 0, &err) < 0)
        goto fail;
    if (!trailer) {
        if (ss_snap_flush(w, &err)) goto fail;
        ss_snap_abandon(w);
        return 0;
    }
    if (ss_snap_close(w, &err)) goto fail;
    return 0;
fail:
    fprintf(stderr, "snapfile_mkseed: %s\n", err.msg);
    return 1;
}

/* Version 5: frames (named, unnamed, Lua, kernel) and stacks of two threads. */
static int seed_stacks(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/stacks.snap", dir);
    struct ss_snap_header h;
    ss_snap_header_init(&h);
    strcpy(h.tool_version, "seed");
    h.flags = SS_SNAP_HDR_NOSTACK;
    struct ss_err err = {0};
    struct ss_snap_writer *w;
    if (ss_snap_create(&w, path, &h, &err)) goto fail;
    struct ss_frame f[4] = {
        {.kind = SS_FRAME_NATIVE,
         .build_id_len = 4,
         .build_id = {1, 2, 3, 4},
         .addr = 0x401234,
         .offset = 0x1234,
         .name = "ns::leaf",
         .module = "/usr/bin/app",
         .sym_offset = 4,
         .system_name = "_ZN2ns4leafEv"},
        {.kind = SS_FRAME_NATIVE, .addr = 0x7f0000001000, .offset = 0x1000, .module = "/lib/x.so"},
        {.kind = SS_FRAME_LUA,
         .addr = 0x41000,
         .name = "M.run",
         .module = "app.lua",
         .line = 12,
         .first_line = 10},
        {.kind = SS_FRAME_KERNEL, .addr = 0xffffffff81000000, .name = "do_syscall_64"}};
    for (int i = 0; i < 6; i++) {
        struct ss_stack st = {.pid = 100,
                              .tid = 100 + (uint32_t)(i % 2),
                              .time_ns = 1000u * i,
                              .nframes = (uint32_t)(1 + i % 4),
                              .frames = f};
        strcpy(st.comm, "app");
        if (ss_snap_write_stack(w, &st, 0, &err)) goto fail;
    }
    if (ss_snap_close(w, &err)) goto fail;
    return 0;
fail:
    fprintf(stderr, "snapfile_mkseed: %s\n", err.msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: snapfile_mkseed DIR\n");
        return 2;
    }
    int rc = seed(argv[1], "small.snap", 3, 64, false, true);
    rc |= seed(argv[1], "compressed.snap", 2, 1024, false, true);
    rc |= seed(argv[1], "notrailer.snap", 1, 32, false, false);
    rc |= seed(argv[1], "bundle.snap", 1, 16, true, true);
    rc |= seed_stacks(argv[1]);
    return rc;
}
