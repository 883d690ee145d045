/* cli/cmd_info.c: `stacksnap info CAPTURE` — what a capture holds: header,
 * processes and their mappings, bundled files, samples, counters, sizes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "stacksnap/snapfile.h"
#include "stacksnap/unwind.h"

struct info {
    uint64_t samples, stack_bytes, reads, partial, kernel, rewalks, ksyms, kstacks;
    uint64_t stacks, frames;            /* --no-stack-bytes: stack records, distinct frames */
    uint64_t markers[SS_PROC_EXIT + 1]; /* process markers by kind */
    uint64_t first_ns, last_ns;
    const char *path;
};

static void print_header(const struct ss_snap_header *h, const char *path)
{
    time_t t = (time_t)(h->start_real_ns / 1000000000ull);
    char when[64];
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
    printf("capture      %s (format version %u)\n", path, h->version);
    printf("arch: %s\n", ss_snap_arch(h));
    printf("recorded     %s on %s (kernel %s) by stacksnap %s\n", when, h->hostname,
           h->kernel_release, h->tool_version);
    printf("settings     %s, %u Hz, %u-byte stack snapshots%s%s%s\n", h->arch, h->freq_hz,
           h->stack_size, (h->flags & SS_SNAP_HDR_BUNDLE) ? ", bundled files" : "",
           (h->flags & SS_SNAP_HDR_KERNEL) ? ", kernel frames" : "",
           (h->flags & SS_SNAP_HDR_OFFCPU) ? ", off-CPU (weighted by time)" : "");
    if (h->command && h->command[0]) printf("command      %s\n", h->command);
    if (h->pac_mask) /* pointer authentication: the signature bits stripped from return addresses */
        printf("pac mask     0x%016llx\n", (unsigned long long)h->pac_mask);
    if (h->flags & SS_SNAP_HDR_NOSTACK)
        printf("contents     unwound frames only (--no-stack-bytes): no target memory (no "
               "registers, stack bytes, memory windows or target-memory reads)\n");
    else
        printf("contents     registers, stack bytes, memory windows and target-memory reads of "
               "the recorded processes (target memory: it can hold secrets)\n");
}

static void print_process(const struct ss_snap_process *p)
{
    static const char *why[] = {"new", "exec", "maps changed"};
    size_t files = 0, with_id = 0;
    for (uint32_t i = 0; i < p->nmaps; i++)
        if (p->maps[i].path[0] == '/') {
            files++;
            with_id += p->maps[i].build_id_len > 0;
        }
    printf("process      %u %s (%s): %s, %u mappings, %zu file-backed (%zu with build-id)\n",
           p->pid, p->comm, p->exe, p->reason < 3 ? why[p->reason] : "?", p->nmaps, files, with_id);
}

/* A LuaJIT module of a process as live saw it (record type 13): found,
 * where, what detection and derivation made of it, the layout. */
static void print_ljrt(const struct ss_snap_ljrt *x)
{
    char id[48] = "none";
    for (unsigned i = 0; i < x->build_id_len && i < 20; i++)
        snprintf(id + 2 * i, sizeof(id) - 2 * i, "%02x", x->build_id[i]);
    printf("luajit       pid %u: %s in %s (build-id %s, bias 0x%" PRIx64 "): %s\n", x->pid,
           x->flags & SS_SNAP_LJRT_VM ? "LuaJIT runtime" : "LuaJIT's API but no usable VM", x->path,
           id, x->bias, x->found);
    if (x->layout[0]) printf("luajit       pid %u: %s: %s\n", x->pid, x->path, x->layout);
}

static void print_counters(const struct ss_snap_counters *k)
{
    for (uint32_t i = 0; i < k->n; i++)
        if (k->items[i].value)
            printf("counter      %-28s %" PRIu64 "\n", k->items[i].name, k->items[i].value);
}

int ss_cmd_info(const struct ss_cli *c)
{
    struct ss_snap_reader *r;
    struct ss_err err = {0};
    int rc = ss_snap_open(&r, c->capture, &err);
    if (rc < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg[0] ? err.msg : strerror(-rc));
        return rc == -ENOMEM || rc == -EIO ? 1 : 2;
    }
    struct info in = {.path = c->capture};
    struct ss_snap_record rec;
    char line[512];
    while ((rc = ss_snap_next(r, &rec, &err)) == 1) {
        switch (rec.type) {
        case SS_SNAP_HEADER:
            print_header(&rec.header, c->capture);
            break;
        case SS_SNAP_PROCESS:
            print_process(&rec.process);
            break;
        case SS_SNAP_BUNDLE:
            printf("bundle       %s (%" PRIu64 " bytes)\n", rec.bundle.path, rec.bundle.size);
            break;
        case SS_SNAP_PERFMAP:
            printf("perf map     pid %u (%" PRIu64 " bytes)\n", rec.perfmap.pid, rec.perfmap.len);
            break;
        case SS_SNAP_DEBUGFILE:
            printf("debug file   %s (debuginfod, after %" PRIu64 " samples)\n", rec.debugfile.path,
                   (uint64_t)in.samples);
            break;
        case SS_SNAP_KSYMS:
            in.ksyms += rec.ksyms.n;
            break;
        case SS_SNAP_SAMPLE: {
            const struct ss_sample *s = &rec.sample.s;
            in.kstacks += s->nkernel != 0;
            if (!in.samples++) in.first_ns = s->time_ns;
            in.last_ns = s->time_ns;
            in.stack_bytes += s->stack_len;
            in.reads += rec.sample.nreads;
            for (uint32_t k = 0; rec.sample.has_reads && k < rec.sample.nreads; k++) {
                const struct ss_snap_read *rd = &rec.sample.reads[k];
                if (!rd->addr && !rd->len && rd->err == SS_READ_REWALK) {
                    in.rewalks++;
                    break;
                }
            }
            in.partial += (s->flags & SS_SAMPLE_PARTIAL) != 0;
            in.kernel += (s->flags & SS_SAMPLE_KERNEL) != 0;
            break;
        }
        case SS_SNAP_PROCEVENT:
            in.markers[rec.procevent.kind]++;
            break;
        case SS_SNAP_FRAMES:
            in.frames += rec.frames.n;
            break;
        case SS_SNAP_STACK: {
            const struct ss_snap_stack *x = &rec.stack;
            if (!in.samples++) in.first_ns = x->st.time_ns;
            in.last_ns = x->st.time_ns;
            in.stacks++;
            in.kstacks += x->st.nframes && x->st.frames[0].kind == SS_FRAME_KERNEL;
            in.partial += (x->flags & SS_SAMPLE_PARTIAL) != 0;
            in.kernel += (x->flags & SS_SAMPLE_KERNEL) != 0;
            break;
        }
        case SS_SNAP_COUNTERS:
            print_counters(&rec.counters);
            break;
        case SS_SNAP_LJRT:
            print_ljrt(&rec.ljrt);
            break;
        case SS_SNAP_CORRUPT:
        case SS_SNAP_TRUNCATED:
            fprintf(stderr, "stacksnap: %s\n", ss_snap_event_str(r, &rec, line, sizeof(line)));
            break;
        }
    }
    if (rc < 0) fprintf(stderr, "stacksnap: %s: %s\n", c->capture, err.msg);
    struct ss_snap_stats st;
    ss_snap_reader_stats(r, &st);
    double secs = in.samples > 1 ? (double)(in.last_ns - in.first_ns) / 1e9 : 0;
    printf("samples      %" PRIu64 " over %.1f s, %.0f stack bytes and %.1f target reads per "
           "sample, %" PRIu64 " interrupted the kernel\n",
           in.samples, secs, in.samples ? (double)in.stack_bytes / (double)in.samples : 0.0,
           in.samples ? (double)in.reads / (double)in.samples : 0.0, in.kernel);
    printf("size         %" PRIu64 " bytes: samples %" PRIu64 ", reads %" PRIu64
           ", processes %" PRIu64 ", bundles %" PRIu64 " (%.0f bytes per sample on disk)\n",
           st.file_bytes, st.bytes[SS_SNAP_SAMPLE], st.bytes[SS_SNAP_MEMREADS],
           st.bytes[SS_SNAP_PROCESS], st.bytes[SS_SNAP_BUNDLE],
           in.samples ? (double)(st.bytes[SS_SNAP_SAMPLE] + st.bytes[SS_SNAP_MEMREADS] +
                                 st.bytes[SS_SNAP_STACK] + st.bytes[SS_SNAP_FRAMES]) /
                            (double)in.samples
                      : 0.0);
    if (in.stacks)
        printf("stacks       %" PRIu64 " stack records (%.0f bytes each on disk), %" PRIu64
               " distinct frames (%" PRIu64 " bytes)\n",
               in.stacks, (double)st.bytes[SS_SNAP_STACK] / (double)in.stacks, in.frames,
               st.bytes[SS_SNAP_FRAMES]);
    if (in.kstacks || in.ksyms)
        printf("kernel       %" PRIu64 " samples with a kernel stack, %" PRIu64
               " kernel symbols recorded\n",
               in.kstacks, in.ksyms);
    if (in.markers[SS_PROC_FORK] + in.markers[SS_PROC_EXEC] + in.markers[SS_PROC_EXIT])
        printf("markers      %" PRIu64 " forks, %" PRIu64 " execs, %" PRIu64 " exits\n",
               in.markers[SS_PROC_FORK], in.markers[SS_PROC_EXEC], in.markers[SS_PROC_EXIT]);
    if (in.rewalks)
        printf("rewalks      %" PRIu64 " samples walked twice (mappings re-read mid-walk)\n",
               in.rewalks);
    if (st.corrupt || st.trailing_bytes)
        printf("damage       %" PRIu64 " corrupted regions (%" PRIu64 " bytes), %" PRIu64
               " trailing bytes ignored\n",
               st.corrupt, st.corrupt_bytes, st.trailing_bytes);
    ss_snap_close_reader(r);
    return rc < 0 ? 1 : 0;
}
