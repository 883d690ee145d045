/* agent/metrics.c: GET /metrics — the Prometheus text exposition format
 * (version 0.0.4): counters and gauges named stacksnap_*, from the stats
 * snapshot the main thread refreshes, plus the agent's own CPU and RSS. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/agent_int.h"

static void metric(FILE *f, const char *name, const char *type, const char *help, double v)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

static double self_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    unsigned long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &rss) != 2) rss = 0;
        fclose(f);
    }
    return (double)rss * (double)sysconf(_SC_PAGESIZE);
}

char *ag_metrics_text(struct ss_agent *a, size_t *len)
{
    pthread_mutex_lock(&a->mu);
    struct ag_stats s = a->st;
    struct ag_http_stats h = a->hs;
    unsigned nprof = a->nprofiles;
    pthread_mutex_unlock(&a->mu);
    struct ag_send_stats p = {0};
    if (a->push) ag_push_stats(a->push, &p);
    struct ag_otlp_stats ot = {0};
    if (a->otlp) ag_otlp_stats(a->otlp, &ot);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;

    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
#define C(n, help, v) metric(f, "stacksnap_" n, "counter", help, (double)(v))
#define G(n, help, v) metric(f, "stacksnap_" n, "gauge", help, (double)(v))
    C("samples_total", "Samples unwound.", s.samples);
    C("lua_samples_total", "Samples with at least one Lua frame.", s.lua);
    C("lua_frames_unproven_total",
      "Lua frames left out because the walk could not prove them on the stack.", s.lua_unproven);
    C("truncated_samples_total",
      "Samples whose walk did not reach the stack's root, or whose Lua chain ends at a "
      "[truncated] root.",
      s.truncated);
    C("trace_cut_samples_total",
      "Samples whose walk ended at LuaJIT trace code the Lua walk could not claim (truncated "
      "there).",
      s.trace_cut);
    C("scan_stale_samples_total",
      "Samples whose stack scan over code without CFI refused return addresses as stale.",
      s.scan_stale);
    C("nocfi_samples_total",
      "Samples whose walk stepped over code without CFI (a validated stack scan or frame "
      "pointer).",
      s.nocfi);
    C("nocfi_root_samples_total", "Samples that reached the stack's root through code without CFI.",
      s.nocfi_root);
    C("unwind_errors_total", "Samples that could not be unwound (process gone or unreadable).",
      s.errors);
    C("dropped_samples_total", "Samples lost because the BPF buffer was full.", s.cap.dropped);
    C("stack_copy_failed_total", "Samples without any stack bytes.", s.cap.copy_failed);
    C("exec_stack_samples_total",
      "Samples inside an exec given the stack copied at its entry (of the failed copies).",
      s.cap.exec_stacks);
    C("map_events_total", "Mapping and exec records read from perf's side band (system-wide).",
      s.cap.map_events);
    C("map_events_lost_total", "Side band records the kernel could not write (buffer full).",
      s.cap.map_lost);
    C("window_copy_failed_total", "Memory windows whose copy failed at sample time.",
      s.cap.win_failed);
    if (a->o.off_cpu) { /* bpf/offcpu.h's counters */
        C("offcpu_waits_total", "Times a thread of a selected process blocked (--off-cpu).",
          s.cap.off_blocks);
        C("offcpu_short_waits_total",
          "Waits that ended within the off-CPU threshold (100 us): no sample.", s.cap.off_short);
        C("offcpu_unmatched_waits_total",
          "Waits outside a system call, or whose thread moved on before it returned: no sample.",
          s.cap.off_unmatched);
        C("offcpu_samples_total", "Off-CPU samples written to the BPF buffer.", s.cap.emitted);
    }
    fprintf(f, "# HELP stacksnap_process_events_total Process forks, execs and exits seen in the "
               "sample stream.\n# TYPE stacksnap_process_events_total counter\n");
    for (uint32_t k = SS_PROC_FORK; k <= SS_PROC_EXIT; k++)
        fprintf(f, "stacksnap_process_events_total{kind=\"%s\"} %llu\n", ss_proc_event_str(k),
                (unsigned long long)s.markers[k]);
    G("processes", "Processes the unwinder has state for now.", s.unw.live);
    C("processes_seen_total", "Processes the unwinder has seen.", s.processes_seen);
    G("luajit_runtimes", "LuaJIT runtimes found in those processes.", s.unw.lj_runtimes);
    G("elf_files", "ELF files open for unwinding and symbols.", s.unw.files);
    C("debuginfo_fetches_total",
      "Debug files fetched by build-id from debuginfod servers (DEBUGINFOD_URLS).",
      s.debug_fetched);
    C("debuginfo_fetch_failures_total",
      "debuginfod fetches that ended without a debug file (not found, timed out).", s.debug_failed);
    G("debuginfo_fetches_pending", "debuginfod fetches queued or running.", s.unw.debug_pending);
    C("http_requests_total", "HTTP requests received.", h.requests);
    C("http_connections_total", "HTTP connections accepted (also those closed at once at a limit).",
      __atomic_load_n(&a->hs.conns_total, __ATOMIC_RELAXED));
    G("http_connections", "HTTP connections open now.",
      __atomic_load_n(&a->hs.conns_open, __ATOMIC_RELAXED));
    uint64_t ce[AG_CE_N];
    ag_ce_totals(a, ce);
    fprintf(f, "# HELP stacksnap_http_client_errors_total Client errors by reason: 4xx answers "
               "and connections libmicrohttpd closed (malformed, oversize, incomplete, limit, "
               "tls...).\n# TYPE stacksnap_http_client_errors_total counter\n");
    for (int r = 0; r < AG_CE_N; r++)
        fprintf(f, "stacksnap_http_client_errors_total{reason=\"%s\"} %llu\n", ag_ce_name(r),
                (unsigned long long)ce[r]);
    C("http_server_errors_total", "HTTP requests answered with a 5xx status.", h.errors_5xx);
    C("profile_requests_total", "Profile requests accepted.", h.profiles);
    C("profile_requests_rejected_total", "Profile requests refused: too many at once.", h.too_many);
    C("profile_requests_abandoned_total", "Profile requests whose client hung up.", h.abandoned);
    G("profile_requests_in_flight", "Profile requests being served.", nprof);
    if (p.enabled) {
        C("push_sent_total", "Profiles pushed.", p.sent);
        C("push_failures_total", "Push attempts that failed (retried with backoff).",
          p.failed_tries);
        C("push_rejected_total", "Profiles the server refused with a 4xx status (not retried).",
          p.rejected);
        C("push_dropped_total", "Profiles dropped: the queue was full or the agent stopped.",
          p.dropped);
        G("push_queued", "Profiles waiting to be pushed.", p.queued);
    }
    if (ot.q.enabled) {
        C("otlp_sent_total", "OTLP export requests accepted (2xx).", ot.q.sent);
        C("otlp_failures_total", "OTLP export attempts that failed (retried with backoff).",
          ot.q.failed_tries);
        C("otlp_rejected_total", "OTLP export requests refused (not retryable; not retried).",
          ot.q.rejected);
        C("otlp_dropped_total",
          "OTLP export requests dropped: the queue was full or the agent "
          "stopped.",
          ot.q.dropped);
        C("otlp_partial_success_total", "OTLP answers with a partial_success.", ot.partial);
        C("otlp_rejected_profiles_total", "Profiles a partial_success said were rejected.",
          ot.partial_rejected);
        G("otlp_queued", "OTLP export requests waiting to be sent.", ot.q.queued);
    }
    if (s.capturing || s.segments) {
        C("capture_segments_total", "Capture segments started.", s.segments);
        C("capture_errors_total", "Capture segments that failed to write.", s.segment_errors);
        G("capture_bytes", "Bytes of capture segments on disk.", s.capture_bytes);
    }
    C("cpu_seconds_total", "CPU time of the agent itself (user + system).", cpu);
    G("resident_memory_bytes", "Resident memory of the agent itself.", self_rss());
    G("uptime_seconds", "Seconds since sampling started.", a->t0 > 0 ? ag_now() - a->t0 : 0);
#undef C
#undef G
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}
