/* capture/perf_events.c: the cpu-clock perf event on every online CPU with the
 * snapshot program attached (start/stop), and the fork tracepoint that
 * follows children. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include "capture/capture_int.h"
#include "util/caps.h"

/* Online CPUs from /sys/devices/system/cpu/online ("0-3,5"). */
int ss_capture_online_cpus(bool *on, int max, struct ss_err *err)
{
    const char *path = "/sys/devices/system/cpu/online";
    FILE *f = fopen(path, "re");
    int n = 0, a, b;
    char sep;

    if (!f) {
        int r = -errno;
        ss_err_set(err, r, "%s: %s", path, strerror(-r));
        return r;
    }
    while (fscanf(f, "%d", &a) == 1) {
        b = a;
        sep = (char)fgetc(f);
        if (sep == '-') {
            if (fscanf(f, "%d", &b) != 1) break;
            sep = (char)fgetc(f);
        }
        for (int i = a; i <= b && i < max; i++, n++)
            on[i] = true;
        if (sep != ',') break;
    }
    fclose(f);
    if (!n) ss_err_set(err, -EINVAL, "%s: no CPU listed", path);
    return n ? n : -EINVAL;
}

static int open_one(const struct ss_capture *c, int cpu, struct ss_err *err)
{
    struct perf_event_attr a = {
        .type = PERF_TYPE_SOFTWARE,
        .size = sizeof(a),
        .config = PERF_COUNT_SW_CPU_CLOCK,
        .sample_freq = c->o.freq_hz,
        .freq = 1,
        .disabled = 1, /* libbpf enables it once the program is attached */
    };
    int fd = syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

    if (fd < 0) {
        int r = -errno;
        char miss[64] = "";
        if (r == -EACCES || r == -EPERM)
            ss_caps_missing(SS_CAPBIT(SS_CAP_PERFMON), miss, sizeof(miss));
        ss_err_set(err, r, "perf_event_open cpu %d: %s%s%s%s", cpu, strerror(-r),
                   r == -EINVAL ? " (frequency above kernel.perf_event_max_sample_rate?)" : "",
                   miss[0] ? ": missing " : "", miss);
        return r;
    }
    return fd;
}

int ss_capture_start(struct ss_capture *c, struct ss_err *err)
{
    int max = libbpf_num_possible_cpus(), r;
    bool *on;

    if (c->o.off_cpu) return c->off_links[0] ? 0 : ss_capture_offcpu_start(c, err);
    if (c->nperf) return 0;
    if (max <= 0) {
        r = max ? max : -EINVAL;
        ss_err_set(err, r, "number of possible CPUs: %s", strerror(-r));
        return r;
    }
    on = calloc(max, sizeof(*on));
    c->perf_fds = calloc(max, sizeof(*c->perf_fds));
    c->perf_links = calloc(max, sizeof(*c->perf_links));
    if (!on || !c->perf_fds || !c->perf_links) {
        free(on);
        ss_err_set(err, -ENOMEM, "capture: out of memory");
        return -ENOMEM;
    }
    r = ss_capture_online_cpus(on, max, err);
    libbpf_print_fn_t old = libbpf_set_print(ss_capture_libbpf_silent);
    for (int cpu = 0; r >= 0 && cpu < max; cpu++) {
        if (!on[cpu]) continue;
        int fd = open_one(c, cpu, err);
        if (fd < 0) {
            r = fd;
            break;
        }
        c->perf_fds[c->nperf] = fd;
        c->perf_links[c->nperf++] = bpf_program__attach_perf_event(c->prog, fd);
        if (!c->perf_links[c->nperf - 1]) {
            r = -errno;
            c->perf_links[c->nperf - 1] = NULL;
            ss_err_set(err, r, "attach BPF program to perf event on cpu %d: %s", cpu, strerror(-r));
        }
    }
    libbpf_set_print(old);
    free(on);
    if (r < 0) {
        ss_capture_stop(c);
        return r;
    }
    return 0;
}

void ss_capture_stop(struct ss_capture *c)
{
    if (c->skel) ss_capture_offcpu_stop(c);
    for (int i = 0; i < c->nperf; i++) {
        bpf_link__destroy(c->perf_links[i]);
        close(c->perf_fds[i]);
    }
    c->nperf = 0;
    free(c->perf_fds);
    free(c->perf_links);
    c->perf_fds = NULL;
    c->perf_links = NULL;
}

/* The compat variant's classic tracepoint needs tracefs for its id; mount
 * it where it belongs if nobody did (as perf does). */
void ss_capture_ensure_tracefs(void)
{
    struct stat st;
    if (stat("/sys/kernel/tracing/events", &st) == 0 ||
        stat("/sys/kernel/debug/tracing/events", &st) == 0)
        return;
    mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL);
}

int ss_capture_follow_attach(struct ss_capture *c, struct ss_err *err)
{
    const char *name = "tp_btf/sched_process_fork";
    libbpf_print_fn_t old;

    if (c->compat) {
        ss_capture_ensure_tracefs();
        name = "tracepoint task/task_newtask";
    }
    old = libbpf_set_print(ss_capture_libbpf_silent);
    c->follow_link = bpf_program__attach(c->follow_prog);
    libbpf_set_print(old);
    if (!c->follow_link) {
        int r = -errno;
        ss_err_set(err, r, "attach %s (follow children): %s", name, strerror(-r));
        return r;
    }
    return 0;
}
