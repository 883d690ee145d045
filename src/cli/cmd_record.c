/* cli/cmd_record.c: `stacksnap record` — capture, unwind live, write every -o.
 *
 * Per sample: unwind (target reads go to the capture writer's hook), write
 * a process record when the unwinder's view of that process is new or its
 * mappings changed, then the sample (+ its reads), then account the stack in
 * the report outputs. SIGINT/SIGTERM end the loop; the outputs are always
 * completed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/outputs.h"
#include "cli/topview.h"
#include "process/process.h"
#include "process/procid.h"
#include "snapfile/snapout.h"
#include "stacksnap/capture.h"
#include "stacksnap/snapfile.h"
#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"
#include "util/caps.h"

static volatile sig_atomic_t g_stop; /* cli/ owns process-wide state */

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

struct rec {
    const struct ss_cli *c;
    struct ss_capture *cap;
    struct ss_unwinder *u;
    struct ss_outputs out;
    struct ss_snapout *snap;     /* NULL without a .snap output */
    struct ss_topview *view;     /* `top`: the live view instead of outputs */
    int failed;                  /* an output failed: stop */
    struct ss_snap_header clock; /* start times and host: the capture's and OTLP's */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A LuaJIT module of a process changed state (found, layout chosen, turned
 * off): -v says so, the capture records it (info shows it). */
static void on_lj(void *ctx, uint32_t pid, const struct ss_lj_status *st)
{
    struct rec *r = ctx;
    char found[512], lay[512], id[48] = "none";
    ss_lj_found_text(st->info, found, sizeof(found));
    if (st->rt) ss_lj_layout_text(st->rt, lay, sizeof(lay));
    for (unsigned i = 0; i < st->build_id_len && i < 20; i++)
        snprintf(id + 2 * i, sizeof(id) - 2 * i, "%02x", st->build_id[i]);
    if (r->c->verbose) {
        if (st->news & SS_LJS_FOUND)
            fprintf(stderr, "stacksnap: pid %u: %s in %s (build-id %s, bias 0x%llx): %s\n", pid,
                    st->rt ? "LuaJIT runtime" : "LuaJIT's API but no usable VM", st->path, id,
                    (unsigned long long)st->bias, found);
        if (st->rt && (st->news & (SS_LJS_LAYOUT | SS_LJS_DIAG)))
            fprintf(stderr, "stacksnap: pid %u: LuaJIT in %s: %s\n", pid, st->path, lay);
    }
    struct ss_err err = {0};
    if (r->snap && ss_snapout_ljrt(r->snap, pid, st, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        r->failed = 1;
    }
}

/* The capture wrote a process record: the outputs label the process with
 * what replay reads from it. */
static void on_process(void *ctx, const struct ss_snap_process *p)
{
    struct rec *r = ctx;
    if (ss_outputs_process(&r->out, p)) r->failed = 1;
}

/* Without a capture: the same labels, read when the process's first stack
 * is accounted. */
static void label_process(struct rec *r, uint32_t pid)
{
    char exe[4096], cgroup[4096];
    ss_proc_exe(pid, exe, sizeof(exe));
    ss_proc_cgroup(pid, cgroup, sizeof(cgroup));
    struct ss_snap_process p = {.pid = pid, .exe = exe, .cgroup = cgroup};
    on_process(r, &p);
}

/* pid's plan of windows to the capture, when the walkers have a new one:
 * after each walk, and as ss_unwinder_opts.plan_ready in the middle of the
 * walk that verified a LuaJIT state first (the samples from then on have
 * their windows; those before, walked late, read memory live). */
static void give_plan(void *ctx, uint32_t pid)
{
    struct rec *r = ctx;
    struct ss_win_plan plan;
    struct ss_err err = {0};
    if (ss_unwinder_take_plan(r->u, pid, &plan) &&
        ss_capture_set_plan(r->cap, (pid_t)pid, &plan, &err) < 0 && r->c->verbose)
        fprintf(stderr, "stacksnap: %s\n", err.msg);
}

static void on_sample(void *ctx, const struct ss_sample *s)
{
    struct rec *r = ctx;
    struct ss_stack st;
    ss_unwinder_intake(r->u, s);
    int rc = ss_unwind(r->u, s, &st);
    if (rc < 0) { /* process gone before we could look at it */
        r->out.errors++;
        /* Not in the capture either: replay may still know the process (live
         * dropped it when it exited) and would add a stack live did not. */
        if (r->snap) ss_snapout_skip(r->snap);
        return;
    }
    struct ss_err err = {0};
    if (r->snap && ss_snapout_walked(r->snap, r->u, s, &st, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        r->failed = 1;
    }
    ss_unwinder_lj_news(r->u, s->pid, on_lj, r);
    if (!r->snap && !ss_outputs_knows(&r->out, st.pid)) label_process(r, st.pid);
    if (ss_outputs_add(&r->out, &st) < 0) r->failed = 1;
    if (r->view) ss_topview_add(r->view, &st);
    give_plan(r, s->pid); /* a LuaJIT runtime verified, or its needs changed */
}

/* A fork, exec or exit, in order with the samples: the unwinder's views
 * follow it, the capture records it. Without -a or a command, children are
 * not sampled: their forks need no view. */
/* The kernel's record of a mapping or an exec: for the processes gone
 * before their first sample is walked. */
static void on_map_event(void *ctx, const struct ss_map_event *ev)
{
    struct rec *r = ctx;
    ss_unwinder_map_event(r->u, ev);
    /* a file the command or its children map executable: checked for LuaJIT
     * now (once a file), mostly before their first samples need it (not
     * with -a: every process's libraries) */
    if (!r->c->all && ev->kind == SS_MAP_EV_MMAP && (ev->prot & PROT_EXEC) && ev->path &&
        ev->path[0] == '/') {
        struct ss_err err = {0};
        ss_unwinder_prepare_file(r->u, ev->path, ev->inode, ev->dev_major, ev->dev_minor, &err);
    }
}

static void on_proc_event(void *ctx, const struct ss_proc_event *ev)
{
    struct rec *r = ctx;
    if (ev->kind == SS_PROC_FORK && !r->c->all && !r->c->command) return;
    ss_unwinder_proc_event(r->u, ev);
    struct ss_err err = {0};
    if (r->snap && ss_snapout_proc_event(r->snap, ev, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        r->failed = 1;
    }
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ss_unwinder_debug_fn: a debuginfod fetch ended with a file, now used for
 * the samples that follow: recorded at this point of the capture, and the
 * frames aggregated so far renamed (replay does both at the same point). */
static void on_debug(void *ctx, const uint8_t *id, size_t len, const char *path)
{
    struct rec *r = ctx;
    struct ss_err err = {0};
    if (r->snap && ss_snapout_debugfile(r->snap, id, len, path, mono_ns(), &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        r->failed = 1;
    }
    if (ss_outputs_rename(&r->out, r->u, id, len)) r->failed = 1;
    if (r->c->verbose) fprintf(stderr, "stacksnap: debuginfod: %s\n", path);
}

double ss_cli_debuginfod_timeout(void)
{
    const char *urls = getenv("DEBUGINFOD_URLS"), *t = getenv("DEBUGINFOD_TIMEOUT");
    if (!urls || !*urls) return 0;
    return t && atof(t) > 0 ? atof(t) : 30;
}

/* DEBUGINFOD_URLS set: fetch missing debug files in the background.
 * Returns the timeout, 0 when off. */
static double start_debuginfod(struct rec *r)
{
    double timeout = ss_cli_debuginfod_timeout();
    if (!timeout) return 0;
    struct ss_err err = {0};
    if (ss_unwinder_debuginfod(r->u, timeout, &err) < 0) {
        fprintf(stderr, "stacksnap: warning: %s (no debuginfod)\n", err.msg);
        return 0;
    }
    return timeout;
}

/* Start COMMAND stopped at a pipe read, so it is selected before it runs.
 * quiet (top): its stdin/stdout/stderr are /dev/null, the screen is ours. */
static pid_t spawn(char **argv, int *release_fd, int quiet)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return -e;
    }
    if (pid == 0) {
        char b;
        close(p[1]);
        if (read(p[0], &b, 1) != 1) _exit(127); /* the profiler gave up before starting us */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        int nul = quiet ? open("/dev/null", O_RDWR) : -1;
        if (nul >= 0) {
            dup2(nul, 0), dup2(nul, 1), dup2(nul, 2);
            if (nul > 2) close(nul);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "stacksnap: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(p[0]);
    *release_fd = p[1];
    return pid;
}

/* Are the selected targets still around? */
static int targets_alive(const struct rec *r, pid_t child, int *child_status)
{
    const struct ss_cli *c = r->c;
    if (c->all) return 1;
    if (child > 0) {
        int st;
        pid_t w = waitpid(child, &st, WNOHANG);
        if (w == child) {
            *child_status = st;
            return 0;
        }
        return 1;
    }
    for (int i = 0; i < c->npids; i++)
        if (kill(c->pids[i], 0) == 0 || errno == EPERM) return 1;
    return 0;
}

static void progress(const struct rec *r, double t0, int final)
{
    struct ss_capture_stats cs;
    ss_capture_stats(r->cap, &cs);
    double el = now_s() - t0;
    if (!final) {
        fprintf(stderr,
                "\r\033[K[stacksnap] %.1fs  %llu samples  %.0f/s  %llu drops  %llu unwind errors",
                el, (unsigned long long)r->out.samples, el > 0 ? (double)r->out.samples / el : 0.0,
                (unsigned long long)cs.dropped, (unsigned long long)r->out.errors);
        return;
    }
    fputs("stacksnap: ", stderr);
    ss_outputs_summary(&r->out, stderr);
    fprintf(stderr, ", %llu drops, %llu unwind errors, %.1fs\n", (unsigned long long)cs.dropped,
            (unsigned long long)r->out.errors, el);
    if (r->c->off_cpu)
        ss_outputs_offcpu_summary(stderr, cs.off_blocks, cs.off_short, cs.off_unmatched,
                                  r->c->off_cpu_min_us ? r->c->off_cpu_min_us : 100);
    if (cs.copy_failed || cs.skipped || r->c->verbose)
        fprintf(stderr,
                "stacksnap: stack copies: %llu failed, %llu cut at the end of the stack (%llu "
                "past pages not present); %llu samples without user registers; %llu process "
                "markers; %llu samples in an exec given its entry's stack\n",
                (unsigned long long)cs.copy_failed, (unsigned long long)cs.copy_partial,
                (unsigned long long)cs.copy_holes, (unsigned long long)cs.skipped,
                (unsigned long long)cs.markers, (unsigned long long)cs.exec_stacks);
    if (cs.map_lost || r->c->verbose)
        fprintf(stderr, "stacksnap: side band: %llu mapping and exec records, %llu lost\n",
                (unsigned long long)cs.map_events, (unsigned long long)cs.map_lost);
    if (r->c->verbose && r->u) {
        struct ss_unwinder_stats us;
        ss_unwinder_stats(r->u, &us);
        ss_outputs_native_steps(stderr, &us, false);
    }
}

static int print_prog_info(struct ss_capture *cap, FILE *f)
{
    struct ss_bpf_prog_info pi;
    struct ss_err err = {0};
    if (ss_capture_prog_info(cap, &pi, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return 1;
    }
    char verified[48] = "verified count n/a (kernel before 5.16)";
    if (pi.verified_insns) snprintf(verified, sizeof(verified), "%u verified", pi.verified_insns);
    fprintf(f, "stacksnap: BPF program %s (%s): %u xlated instructions, %s, %u bytes JITed\n",
            pi.name, ss_capture_is_compat(cap) ? "compat, perf buffer" : "ring buffer",
            pi.xlated_insns, verified, pi.jited_bytes);
    return 0;
}

/* -v: the whole log of a program the kernel rejected. */
static void print_verifier_log(void *arg, const char *prog, const char *log)
{
    (void)arg;
    fprintf(stderr, "stacksnap: verifier log of BPF program %s:\n%s%s", prog, log,
            *log && log[strlen(log) - 1] == '\n' ? "" : "\n");
}

/* Open the capture with the CLI's settings; says on stderr which program
 * is in use when it is compat without --compat, and why. */
static int open_capture(const struct ss_cli *c, struct ss_capture_opts *o, struct ss_capture **cap)
{
    struct ss_err err = {0};
    o->freq_hz = c->freq;
    o->stack_size = c->stack_size;
    o->compat = c->compat;
    o->no_windows = c->no_lua_window;
    o->kernel = c->kernel;
    o->off_cpu = c->off_cpu;
    o->off_cpu_min_us = c->off_cpu_min_us;
    if (c->verbose) o->verifier_log = print_verifier_log;
    if (ss_capture_open(cap, o, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return 1;
    }
    const char *why = ss_capture_fallback_reason(*cap);
    if (*why) fprintf(stderr, "stacksnap: using the compat BPF program: %s\n", why);
    why = ss_capture_markers_reason(*cap);
    if (*why)
        fprintf(stderr,
                "stacksnap: warning: no fork/exec/exit markers (%s): children are unwound "
                "with the maps /proc shows when their samples are read\n",
                why);
    return 0;
}

int ss_cmd_bpf_info(const struct ss_cli *c)
{
    struct ss_capture *cap;
    struct ss_capture_opts o = {0};
    if (open_capture(c, &o, &cap)) return 1;
    int rc = print_prog_info(cap, stdout);
    ss_capture_close(cap);
    return rc;
}

static void warn_stderr(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "stacksnap: %s\n", msg);
}

/* The .snap output; 0 or an exit status after printing. */
static int open_snap(struct rec *r, const char *path)
{
    const struct ss_cli *c = r->c;
    char cmd[1024] = "";
    for (char **a = c->command; a && *a; a++)
        snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%s%s", a == c->command ? "" : " ",
                 *a);
    struct ss_snapout_opts so = {.path = path,
                                 .stack_size = c->stack_size,
                                 .freq_hz = c->freq,
                                 .bundle = c->bundle,
                                 .kernel = c->kernel,
                                 .off_cpu = c->off_cpu,
                                 .no_stack_bytes = c->no_stack_bytes,
                                 .command = cmd,
                                 .clock = &r->clock,
                                 .warn = warn_stderr,
                                 .on_process = on_process,
                                 .process_ctx = r};
    struct ss_err err = {0};
    if (ss_snapout_open(&r->snap, &so, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return ss_cli_open_status(err.code);
    }
    return 0;
}

/* The program COMMAND runs (execvp's search of PATH), checked for LuaJIT
 * before it starts (a failure: its first sample tries again). */
static void prepare_command(struct rec *r, const char *cmd)
{
    struct ss_err err = {0};
    const char *path = getenv("PATH"), *p = strchr(cmd, '/') ? "" /* cmd itself */
                                            : path && *path  ? path
                                                             : "/usr/local/bin:/usr/bin:/bin";
    do {
        size_t n = strcspn(p, ":");
        char f[4096];
        if (snprintf(f, sizeof(f), "%.*s%s%s", (int)n, p, n ? "/" : "", cmd) < (int)sizeof(f) &&
            access(f, X_OK) == 0) {
            ss_unwinder_prepare_file(r->u, f, 0, 0, 0, &err);
            return;
        }
        p += n + (p[n] == ':');
    } while (*p);
}

static int setup(struct rec *r, pid_t *child, int *release_fd)
{
    const struct ss_cli *c = r->c;
    struct ss_err err = {0};
    for (int i = 0; i < c->npids; i++) /* before any output file is created */
        if (kill(c->pids[i], 0) < 0 && errno == ESRCH) {
            fprintf(stderr, "stacksnap: no such process: %d\n", c->pids[i]);
            return 2;
        }
    int rc = ss_outputs_open(&r->out, c, c->freq);
    if (rc) return rc;
    ss_snap_header_init(&r->clock);
    if ((rc = ss_outputs_set_clock(&r->out, &r->clock))) return rc;
    for (int i = 0; i < c->nout; i++)
        if (c->out[i].fmt == SS_REPORT_SNAP && (rc = open_snap(r, c->out[i].path))) return rc;
    struct ss_unwinder_opts uo = {
        .pac_mask = r->clock.pac_mask, .plan_ready = give_plan, .plan_ctx = r};
    if (r->snap) ss_snapout_hook(r->snap, &uo);
    if (ss_unwinder_new(&r->u, &uo, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return 1;
    }
    struct ss_capture_opts co = {.system_wide = c->all,
                                 .follow_children = c->command != NULL,
                                 .proc_event = on_proc_event,
                                 .proc_event_arg = r};
    if (c->all || c->command) { /* processes that come and go: their mappings as made */
        co.map_event = on_map_event;
        co.map_event_arg = r;
    }
    if (open_capture(c, &co, &r->cap)) return 1;
    /* after the programs loaded: their symbols too */
    if (c->kernel && ss_unwinder_kernel_syms(r->u, NULL, &err) < 0) {
        fprintf(stderr, "stacksnap: warning: %s\n", err.msg); /* frames stay unnamed */
        err = (struct ss_err){0};
    }
    if (c->verbose) print_prog_info(r->cap, stderr);
    char miss[64];
    if (c->all && ss_caps_missing(SS_CAPBIT(SS_CAP_SYS_PTRACE), miss, sizeof(miss))[0])
        fprintf(stderr, "stacksnap: warning: missing CAP_SYS_PTRACE: processes of other users "
                        "are sampled without their files and memory (no symbols, no Lua frames)\n");
    for (int i = 0; i < c->npids; i++) {
        if (ss_proc_check_access(c->pids[i], &err) < 0 ||
            ss_capture_add_pid(r->cap, c->pids[i], &err) < 0) {
            fprintf(stderr, "stacksnap: %s\n", err.msg);
            return err.code == -ESRCH ? 2 : 1;
        }
    }
    /* their files and LuaJIT runtimes now, not at the first sample: its
     * plan of windows comes sooner (a failure: the first sample tries) */
    for (int i = 0; i < c->npids && !c->all; i++) {
        err = (struct ss_err){0};
        ss_unwinder_prepare(r->u, (uint32_t)c->pids[i], &err);
    }
    err = (struct ss_err){0};
    if (c->command) {
        prepare_command(r, c->command[0]);
        *child = spawn(c->command, release_fd, !strcmp(c->cmd, "top"));
        if (*child < 0) {
            fprintf(stderr, "stacksnap: cannot start '%s': %s\n", c->command[0],
                    strerror((int)-*child));
            return 1;
        }
        if (ss_capture_add_pid(r->cap, *child, &err) < 0) {
            fprintf(stderr, "stacksnap: %s\n", err.msg);
            return 1;
        }
    }
    if (ss_capture_start(r->cap, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* Stop COMMAND if it is still running: SIGTERM, then SIGKILL after a grace
 * period (some programs ignore SIGTERM while busy). Returns 1 when record
 * ended it, 0 when it had exited by itself (*status is then its status). */
static int finish_child(pid_t child, int release_fd, int *status, const char *name)
{
    if (child <= 0) return 0;
    if (release_fd >= 0) close(release_fd); /* a child still waiting exits 127 */
    if (*status != -1) return 0;
    if (waitpid(child, status, WNOHANG) == child) return 0;
    kill(child, SIGTERM);
    for (int i = 0; i < 200; i++) { /* 2 s */
        if (waitpid(child, status, WNOHANG) == child) return 1;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "stacksnap: %s (pid %d) ignored SIGTERM for 2 s, sending SIGKILL\n", name,
            (int)child);
    kill(child, SIGKILL);
    while (waitpid(child, status, 0) < 0 && errno == EINTR)
        ;
    return 1;
}

int ss_cmd_record(const struct ss_cli *c)
{
    struct rec r = {.c = c};
    pid_t child = 0;
    int release_fd = -1, status = -1;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int rc = setup(&r, &child, &release_fd);
    double dfd_timeout = rc == 0 ? start_debuginfod(&r) : 0;
    double t0 = now_s(), last_progress = t0, last_flush = t0, last_gc = t0;
    if (rc == 0 && release_fd >= 0) {
        if (write(release_fd, "g", 1) != 1) rc = 1;
        close(release_fd);
        release_fd = -1;
    }
    if (rc == 0 && !strcmp(c->cmd, "top") && !(r.view = ss_topview_open(c))) rc = 1;
    int tty = isatty(STDERR_FILENO) && !r.view;
    struct ss_pace pace = {0};
    while (rc == 0 && !g_stop && !r.failed) {
        /* 2 ms while walks read live memory, so that samples are handled
         * while the target still looks as it did (100 ms lost ~75% of Lua
         * frames on a coroutine workload without windows, 2 ms ~4%); up to
         * 32 ms while the walks need nothing but the sample (windows):
         * batches of samples unwound one after the other cost less CPU. */
        int n = ss_capture_poll(r.cap, ss_unwinder_pace(r.u, &pace), on_sample, &r);
        if (n < 0) {
            fprintf(stderr, "stacksnap: polling the capture buffer: %s\n", strerror(-n));
            rc = 1;
            break;
        }
        if (dfd_timeout) ss_unwinder_debug_poll(r.u, on_debug, &r);
        double t = now_s();
        if (c->duration > 0 && t - t0 >= c->duration) break;
        if (!targets_alive(&r, child, &status)) break;
        if (t - last_gc >= 2.0) { /* drop state of processes that exited */
            ss_unwinder_gc(r.u);
            last_gc = t;
        }
        if (r.snap && t - last_flush >= 1.0) {
            struct ss_err err = {0};
            if (ss_snapout_flush(r.snap, &err) < 0) {
                fprintf(stderr, "stacksnap: %s\n", err.msg);
                r.failed = 1;
            }
            last_flush = t;
        }
        if (r.view && ss_topview_tick(r.view, t, r.cap, (unsigned long long)r.out.errors)) break;
        if (tty && t - last_progress >= 0.5) {
            progress(&r, t0, 0);
            last_progress = t;
        }
    }
    if (r.cap) {
        ss_capture_stop(r.cap);
        while (ss_capture_poll(r.cap, 0, on_sample, &r) > 0 && !r.failed)
            ;
    }
    if (r.u && dfd_timeout && !r.failed) { /* names for what was sampled: files still coming */
        if (ss_unwinder_debug_pending(r.u)) ss_unwinder_debug_wait(r.u, dfd_timeout);
        ss_unwinder_debug_poll(r.u, on_debug, &r);
    }
    ss_topview_close(r.view); /* the terminal as it was, before the summary */
    if (tty && r.cap && rc == 0) fputs("\r\033[K", stderr);
    if (r.failed) rc = 1;
    struct ss_err err = {0};
    if (r.snap && ss_snapout_close(r.snap, r.cap, r.u, &err) < 0) {
        fprintf(stderr, "stacksnap: %s\n", err.msg);
        rc = 1;
    }
    if (ss_outputs_close(&r.out)) rc = 1;
    if (r.cap && (rc == 0 || r.out.samples)) progress(&r, t0, 1);
    int ended = finish_child(child, release_fd, &status, c->command ? c->command[0] : "");
    ss_outputs_free(&r.out);
    ss_unwinder_free(r.u);
    ss_capture_close(r.cap);
    /* record returns the command's status when the command ended by itself;
     * when record stopped it (-d, SIGINT/SIGTERM to record, q in top) the run
     * succeeded, also when a terminal's ^C reached the command too and it
     * ended first (luajit exits 1 on SIGINT). */
    if (rc == 0 && child > 0 && !ended && status != -1 && !g_stop)
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return rc;
}
