/* cli/opts.c: parse `stacksnap record|agent|top|replay|report|diff|info` arguments. */
#include "cli/opts.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stacksnap/ss.h"

static const char *usage_text =
    "usage:\n"
    "  stacksnap record [-p PID[,PID...] | -a | -- COMMAND [ARGS...]] [-F HZ] [-d SECONDS]\n"
    "                   [--stack-size BYTES] [-o FILE]... [--format FMT] [--bundle] [--kernel]\n"
    "                   [--compat] [--off-cpu [--off-cpu-min-us N]] [--no-lua-window]\n"
    "                   [--no-stack-bytes] [-v]\n"
    "  stacksnap agent  [-a | -p PID[,PID...]] [-F HZ] [--listen ADDR:PORT | --listen unix:PATH]\n"
    "                   [--web-config FILE] [--auth-token-file FILE] [--healthz-open]\n"
    "                   [--off-cpu]\n"
    "                   [--capture-dir DIR [--capture-max-bytes N] [--capture-segment SECONDS]]\n"
    "                   [--push URL] [--otlp URL [--otlp-header K=V]...] [--push-every SECONDS]\n"
    "                   [--push-ca FILE] [--push-auth-file FILE] [--max-seconds N]\n"
    "  stacksnap top    [-p PID[,PID...] | -a | -- COMMAND [ARGS...]] [-F HZ]\n"
    "  stacksnap replay CAPTURE.snap [-o FILE]... [--format FMT] [--symfs DIR]\n"
    "  stacksnap report CAPTURE.snap [--top N]\n"
    "  stacksnap diff   BEFORE AFTER [-o FILE]...      (inputs: .snap, .folded or .pb.gz)\n"
    "  stacksnap info   CAPTURE.snap | --bpf\n"
    "\n"
    "Outputs (-o may repeat; the format follows the extension):\n"
    "  .snap capture   .folded folded stacks   .pb.gz pprof   .svg flame graph\n"
    "  .txt perf-script text   .otlp OTLP profiles (ExportProfilesServiceRequest)\n"
    "  -  folded stacks on stdout (default when no -o)\n"
    "  diff writes .svg (differential flame graph), .txt (table of functions by change)\n"
    "  and .folded (STACK BEFORE AFTER); -o - (the default) writes the table to stdout\n"
    "\n"
    "Options:\n"
    "  -p PID[,PID...]    profile these processes\n"
    "  -a                 profile every process\n"
    "  -F HZ              sampling frequency (default 99)\n"
    "  -d SECONDS         stop after this long (default: until the targets exit or ^C)\n"
    "  --stack-size N     bytes of user stack copied per sample (default 16384, max 65528)\n"
    "  --format FMT       folded|pprof|svg|txt|otlp|snap: override the extension of every -o\n"
    "  --bundle           put the unwind/symbol data of mapped files into the capture\n"
    "  --kernel           include kernel frames\n"
    "  --compat           use the perf-buffer BPF program for old kernels\n"
    "  --off-cpu          sample where threads block, weighted by the time off the CPU\n"
    "                     (folded counts in microseconds) instead of CPU samples\n"
    "  --off-cpu-min-us N shorter waits give no sample (default 100)\n"
    "  --no-lua-window    copy registers and stack only (no Lua state at sample time)\n"
    "  --no-stack-bytes   the capture keeps the unwound frames only, no target memory\n"
    "                     (stack bytes, windows, reads): replays the same, can be shared\n"
    "  --symfs DIR        look for ELF files under DIR when replaying\n"
    "  --top N            rows of the top table (default 20)\n"
    "  -v                 verbose: BPF program size and per-process diagnostics\n"
    "\n"
    "Agent (runs until SIGTERM/SIGINT; default -a and -F 19):\n"
    "  --listen ADDR      HTTP address (default 127.0.0.1:7470; unix:PATH for a socket):\n"
    "                     /debug/pprof/profile?seconds=N[&pid=P], /metrics, /healthz\n"
    "  --max-seconds N    longest profile request (default 300)\n"
    "  --web-config FILE  TLS and basic auth: the Prometheus exporter-toolkit web\n"
    "                     configuration (tls_server_config, basic_auth_users)\n"
    "  --auth-token-file FILE  requests must carry Authorization: Bearer <the file's token>\n"
    "  --healthz-open     /healthz answers without credentials\n"
    "  --capture-dir DIR  rolling capture segments (.snap) in DIR\n"
    "  --capture-max-bytes N  delete the oldest segments past N bytes (default 256 MiB)\n"
    "  --capture-segment S    start a new segment every S seconds (default 600)\n"
    "  --push URL         push pprof to a Grafana Pyroscope server (URL/ingest)\n"
    "  --otlp URL         push OTLP profiles (OTLP/HTTP protobuf, gzip) to "
    "URL/v1development/profiles\n"
    "  --otlp-header K=V  an HTTP header of every OTLP push (repeatable)\n"
    "  --push-every S     seconds per pushed profile (default 15)\n"
    "  --push-ca FILE     CA certificates that verify the push server (default: the system's)\n"
    "  --push-auth-file FILE  the Authorization header value of the pushes\n"
    "\n"
    "Examples:\n"
    "  stacksnap record -F 499 -d 10 -p 1234 -o cpu.svg -o cpu.pb.gz\n"
    "  stacksnap record -o run.snap -o run.folded -- luajit app.lua\n"
    "  stacksnap replay run.snap -o run.svg\n"
    "  stacksnap report run.snap --top 30\n"
    "  stacksnap agent --listen 0.0.0.0:7470 --capture-dir /var/lib/stacksnap\n"
    "  stacksnap top -p 1234\n"
    "  stacksnap diff before.snap after.snap -o diff.svg -o -\n"
    "\n"
    "Exit status: 0 success, 1 runtime failure, 2 usage or bad input.\n";

void ss_cli_usage(const char *cmd)
{
    (void)cmd;
    fputs(usage_text, stdout);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "stacksnap: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'stacksnap --help'.\n");
    return 2;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v > max || s[0] == '-') return -1;
    *out = v;
    return 0;
}

static int parse_pids(struct ss_cli *c, const char *arg)
{
    char *dup = strdup(arg), *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned long v;
        if (parse_uint(tok, 0x7fffffff, &v) || v == 0) {
            rc = usage_error("invalid pid '%s'", tok);
            break;
        }
        if (c->npids == SS_MAX_PIDS) {
            rc = usage_error("too many pids (max 256): %s", arg);
            break;
        }
        c->pids[c->npids++] = (pid_t)v;
    }
    free(dup);
    return rc;
}

enum {
    OPT_STACK = 256,
    OPT_FORMAT,
    OPT_BUNDLE,
    OPT_KERNEL,
    OPT_COMPAT,
    OPT_NO_LUA_WINDOW,
    OPT_SYMFS,
    OPT_TOP,
    OPT_BPF,
    OPT_OFF_CPU,
    OPT_OFF_CPU_MIN,
    OPT_NO_STACK_BYTES,
    OPT_LISTEN,
    OPT_CAPTURE_DIR,
    OPT_CAPTURE_MAX,
    OPT_CAPTURE_SEGMENT,
    OPT_PUSH,
    OPT_PUSH_EVERY,
    OPT_MAX_SECONDS,
    OPT_OTLP,
    OPT_OTLP_HEADER,
    OPT_WEB_CONFIG,
    OPT_AUTH_TOKEN_FILE,
    OPT_HEALTHZ_OPEN,
    OPT_PUSH_CA,
    OPT_PUSH_AUTH_FILE, /* the last agent option (parse checks the range) */
};

/* Options only `agent` takes; 0 when ch is not one of them, 2 on a bad value. */
static int parse_agent_opt(struct ss_cli *c, int ch, const char *arg)
{
    unsigned long v;
    unsigned long long ll;
    char *end;
    switch (ch) {
    case OPT_LISTEN:
        if (!*arg) return usage_error("empty --listen address%s", "");
        c->listen = arg;
        return 1;
    case OPT_CAPTURE_DIR:
        c->capture_dir = arg;
        return 1;
    case OPT_WEB_CONFIG:
    case OPT_AUTH_TOKEN_FILE:
    case OPT_PUSH_CA:
    case OPT_PUSH_AUTH_FILE:
        if (!*arg)
            return usage_error("an empty file name for a --web-config, --auth-token-file, "
                               "--push-ca or --push-auth-file%s",
                               "");
        *(ch == OPT_WEB_CONFIG        ? &c->web_config
          : ch == OPT_AUTH_TOKEN_FILE ? &c->auth_token_file
          : ch == OPT_PUSH_CA         ? &c->push_ca
                                      : &c->push_auth_file) = arg;
        return 1;
    case OPT_HEALTHZ_OPEN:
        c->healthz_open = true;
        return 1;
    case OPT_CAPTURE_MAX:
        errno = 0;
        ll = strtoull(arg, &end, 10);
        if (errno || end == arg || *end || arg[0] == '-' || ll < (1ull << 20))
            return usage_error("invalid --capture-max-bytes '%s' (bytes, at least 1048576)", arg);
        c->capture_max_bytes = ll;
        return 1;
    case OPT_PUSH:
        if (strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8))
            return usage_error("invalid --push URL '%s' (http:// or https://)", arg);
        c->push_url = arg;
        return 1;
    case OPT_OTLP:
        if (strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8))
            return usage_error("invalid --otlp URL '%s' (http:// or https://)", arg);
        c->otlp_url = arg;
        return 1;
    case OPT_OTLP_HEADER:
        if (c->n_otlp_headers == SS_MAX_OTLP_HEADERS)
            return usage_error("too many --otlp-header (max 16): %s", arg);
        if (!strchr(arg, '=') || arg[0] == '=')
            return usage_error("invalid --otlp-header '%s' (NAME=VALUE)", arg);
        c->otlp_headers[c->n_otlp_headers++] = arg;
        return 1;
    }
    static const struct {
        int ch;
        const char *msg;
        size_t off;
    } secs[] = {
        {OPT_CAPTURE_SEGMENT, "invalid --capture-segment '%s' (1..86400 seconds)",
         offsetof(struct ss_cli, capture_segment)},
        {OPT_PUSH_EVERY, "invalid --push-every '%s' (1..86400 seconds)",
         offsetof(struct ss_cli, push_every)},
        {OPT_MAX_SECONDS, "invalid --max-seconds '%s' (1..86400)",
         offsetof(struct ss_cli, max_seconds)},
    };
    for (size_t i = 0; i < sizeof(secs) / sizeof(secs[0]); i++) {
        if (secs[i].ch != ch) continue;
        if (parse_uint(arg, 86400, &v) || v == 0) return usage_error(secs[i].msg, arg);
        *(unsigned *)((char *)c + secs[i].off) = (unsigned)v;
        return 1;
    }
    return 0;
}

int ss_cli_parse(struct ss_cli *c, int argc, char **argv)
{
    memset(c, 0, sizeof(*c));
    c->freq = 99;
    c->stack_size = SS_STACK_DEFAULT;
    c->top = 20;
    if (argc < 2)
        return usage_error("%s",
                           "missing command (record, agent, top, replay, report, diff or info)");
    c->cmd = argv[1];
    if (!strcmp(c->cmd, "-h") || !strcmp(c->cmd, "--help") || !strcmp(c->cmd, "help")) {
        ss_cli_usage(NULL);
        return 1;
    }
    int agent = !strcmp(c->cmd, "agent");
    int top = !strcmp(c->cmd, "top"), diff = !strcmp(c->cmd, "diff");
    int rec = !strcmp(c->cmd, "record") || top; /* top selects targets as record does */
    if (agent) c->freq = 19;                    /* Parca's default */
    if (!rec && !agent && !diff && strcmp(c->cmd, "replay") && strcmp(c->cmd, "report") &&
        strcmp(c->cmd, "info"))
        return usage_error(
            "unknown command '%s' (record, agent, top, replay, report, diff or info)", c->cmd);

    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'},
        {"stack-size", required_argument, 0, OPT_STACK},
        {"format", required_argument, 0, OPT_FORMAT},
        {"bundle", no_argument, 0, OPT_BUNDLE},
        {"kernel", no_argument, 0, OPT_KERNEL},
        {"compat", no_argument, 0, OPT_COMPAT},
        {"no-lua-window", no_argument, 0, OPT_NO_LUA_WINDOW},
        {"no-stack-bytes", no_argument, 0, OPT_NO_STACK_BYTES},
        {"symfs", required_argument, 0, OPT_SYMFS},
        {"top", required_argument, 0, OPT_TOP},
        {"bpf", no_argument, 0, OPT_BPF},
        {"off-cpu", no_argument, 0, OPT_OFF_CPU},
        {"off-cpu-min-us", required_argument, 0, OPT_OFF_CPU_MIN},
        {"output", required_argument, 0, 'o'},
        {"listen", required_argument, 0, OPT_LISTEN},
        {"capture-dir", required_argument, 0, OPT_CAPTURE_DIR},
        {"capture-max-bytes", required_argument, 0, OPT_CAPTURE_MAX},
        {"capture-segment", required_argument, 0, OPT_CAPTURE_SEGMENT},
        {"push", required_argument, 0, OPT_PUSH},
        {"push-every", required_argument, 0, OPT_PUSH_EVERY},
        {"max-seconds", required_argument, 0, OPT_MAX_SECONDS},
        {"otlp", required_argument, 0, OPT_OTLP},
        {"otlp-header", required_argument, 0, OPT_OTLP_HEADER},
        {"web-config", required_argument, 0, OPT_WEB_CONFIG},
        {"auth-token-file", required_argument, 0, OPT_AUTH_TOKEN_FILE},
        {"healthz-open", no_argument, 0, OPT_HEALTHZ_OPEN},
        {"push-ca", required_argument, 0, OPT_PUSH_CA},
        {"push-auth-file", required_argument, 0, OPT_PUSH_AUTH_FILE},
        {0, 0, 0, 0},
    };
    /* "+" stops at the first non-option so "-- COMMAND ARGS" stays intact. */
    optind = 2;
    opterr = 0;
    int ch;
    const char *shortopts = rec ? "+hp:aF:d:o:v" : "hp:aF:d:o:v";
    while ((ch = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        unsigned long v;
        if (ch >= OPT_LISTEN && ch <= OPT_PUSH_AUTH_FILE) {
            if (!agent) {
                const char *name = "?";
                for (const struct option *lo = longopts; lo->name; lo++)
                    if (lo->val == ch) name = lo->name;
                return usage_error("--%s is only valid for agent", name);
            }
            int r = parse_agent_opt(c, ch, optarg);
            if (r != 1) return 2;
            continue;
        }
        switch (ch) {
        case 'h':
            ss_cli_usage(c->cmd);
            return 1;
        case 'p':
            if (!rec && !agent)
                return usage_error("-p is only valid for record, top and agent%s", "");
            if (parse_pids(c, optarg)) return 2;
            break;
        case 'a':
            if (!rec && !agent)
                return usage_error("-a is only valid for record, top and agent%s", "");
            c->all = true;
            break;
        case 'F':
            if (parse_uint(optarg, 100000, &v) || v == 0)
                return usage_error("invalid frequency '%s' (1..100000 Hz)", optarg);
            c->freq = (unsigned)v;
            break;
        case 'd': {
            char *end;
            c->duration = strtod(optarg, &end);
            if (end == optarg || *end || !(c->duration > 0) || c->duration > 1e7)
                return usage_error("invalid duration '%s' (seconds > 0)", optarg);
            break;
        }
        case OPT_STACK:
            if (parse_uint(optarg, SS_STACK_MAX, &v) || v < 64)
                return usage_error("invalid stack size '%s' (64..65528 bytes)", optarg);
            c->stack_size = (unsigned)(v & ~7ul);
            break;
        case 'o':
            if (c->nout == SS_MAX_OUTPUTS)
                return usage_error("too many outputs (max 16): %s", optarg);
            c->out[c->nout].path = optarg;
            c->out[c->nout].fmt = ss_report_format_of_path(optarg);
            if (c->out[c->nout].fmt == SS_REPORT_NONE && !c->format)
                return usage_error("cannot tell the format of '%s' from its extension "
                                   "(.snap .folded .pb.gz .svg .txt .otlp, or --format)",
                                   optarg);
            c->nout++;
            break;
        case OPT_FORMAT:
            if (ss_report_format_of_name(optarg) == SS_REPORT_NONE)
                return usage_error("unknown format '%s' (folded, pprof, svg, txt, otlp, snap)",
                                   optarg);
            c->format = optarg;
            break;
        case OPT_BUNDLE:
            c->bundle = true;
            break;
        case OPT_KERNEL:
            c->kernel = true;
            break;
        case OPT_COMPAT:
            c->compat = true;
            break;
        case OPT_OFF_CPU:
            c->off_cpu = true;
            break;
        case OPT_OFF_CPU_MIN: {
            char *end;
            errno = 0;
            v = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || v > 60000000ul)
                return usage_error("invalid --off-cpu-min-us '%s' (microseconds, at most 60000000)",
                                   optarg);
            c->off_cpu_min_us = v ? (unsigned)v : 1;
            c->off_cpu_min_set = true;
            break;
        }
        case OPT_NO_LUA_WINDOW:
            c->no_lua_window = true;
            break;
        case OPT_NO_STACK_BYTES:
            if (strcmp(c->cmd, "record"))
                return usage_error("--no-stack-bytes is only valid for record%s", "");
            c->no_stack_bytes = true;
            break;
        case OPT_SYMFS:
            c->symfs = optarg;
            break;
        case OPT_TOP:
            if (parse_uint(optarg, 1000000, &v) || v == 0)
                return usage_error("invalid --top '%s'", optarg);
            c->top = (int)v;
            break;
        case OPT_BPF:
            c->bpf_info = true;
            break;
        case 'v':
            c->verbose = true;
            break;
        case '?':
        default:
            return usage_error("unknown option or missing argument: '%s'", argv[optind - 1]);
        }
    }
    if (c->format)
        for (int i = 0; i < c->nout; i++)
            c->out[i].fmt = ss_report_format_of_name(c->format);
    if (rec) {
        if (optind < argc) /* "-- COMMAND ARGS" (the "--" itself is optional) */
            c->command = &argv[optind];
        int modes = (c->npids > 0) + c->all + (c->command != NULL);
        if (modes == 0 && !c->bpf_info)
            return usage_error("%s needs -p PID, -a or -- COMMAND", c->cmd);
        if (modes > 1) return usage_error("%s", "choose one of -p PID, -a or -- COMMAND");
        if (c->off_cpu_min_set && !c->off_cpu)
            return usage_error("%s", "--off-cpu-min-us needs --off-cpu");
        if (c->off_cpu && c->compat)
            return usage_error("%s", "--off-cpu needs the ring buffer program: not with --compat");
        if (c->no_stack_bytes && c->bundle)
            return usage_error("%s", "--no-stack-bytes keeps no files: not with --bundle");
        if (top && (c->nout || c->bpf_info || c->duration > 0))
            return usage_error("%s", "top takes -p, -a or -- COMMAND and -F only");
        if (c->nout == 0 && !top) {
            c->out[0].path = "-";
            c->out[0].fmt = SS_REPORT_FOLDED;
            c->nout = 1;
        }
    } else if (diff) {
        if (argc - optind != 2)
            return usage_error("%s",
                               "diff needs two inputs: BEFORE AFTER (.snap, .folded or .pb.gz)");
        c->capture = argv[optind];
        c->after = argv[optind + 1];
        for (int i = 0; i < c->nout; i++)
            if (c->out[i].fmt != SS_REPORT_FOLDED && c->out[i].fmt != SS_REPORT_SVG &&
                c->out[i].fmt != SS_REPORT_PERF)
                return usage_error("a diff is written as .svg, .txt, .folded or -: %s",
                                   c->out[i].path);
        if (c->nout == 0) {
            c->out[0].path = "-";
            c->out[0].fmt = SS_REPORT_FOLDED;
            c->nout = 1;
        }
    } else if (agent) {
        if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
        if (c->npids && c->all) return usage_error("%s", "choose one of -p PID or -a");
        if (c->duration > 0)
            return usage_error("%s", "-d is not valid for agent (it runs until SIGTERM/SIGINT)");
        if (c->nout)
            return usage_error("%s", "agent takes no -o (its outputs are HTTP, "
                                     "--push, --otlp and --capture-dir)");
        if (c->capture_max_bytes && !c->capture_dir)
            return usage_error("%s", "--capture-max-bytes needs --capture-dir");
        if (c->capture_segment && !c->capture_dir)
            return usage_error("%s", "--capture-segment needs --capture-dir");
        if (c->push_every && !c->push_url && !c->otlp_url)
            return usage_error("%s", "--push-every needs --push or --otlp");
        if (c->n_otlp_headers && !c->otlp_url)
            return usage_error("%s", "--otlp-header needs --otlp");
        if ((c->push_ca || c->push_auth_file) && !c->push_url && !c->otlp_url)
            return usage_error("%s", "--push-ca and --push-auth-file need --push or --otlp");
        if (c->healthz_open && !c->web_config && !c->auth_token_file)
            return usage_error("%s", "--healthz-open needs --web-config or --auth-token-file");
        if (c->off_cpu_min_set) return usage_error("%s", "--off-cpu-min-us is not valid for agent");
    } else if (!strcmp(c->cmd, "info") && c->bpf_info) {
        if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    } else {
        if (optind >= argc) return usage_error("%s needs a capture file", c->cmd);
        c->capture = argv[optind++];
        if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
        if (!strcmp(c->cmd, "replay") && c->nout == 0) {
            c->out[0].path = "-";
            c->out[0].fmt = SS_REPORT_FOLDED;
            c->nout = 1;
        }
    }
    const char *snap = NULL;
    for (int i = 0; i < c->nout; i++) {
        if (c->out[i].fmt == SS_REPORT_SNAP && strcmp(c->cmd, "record"))
            return usage_error("a capture (.snap) can only be written by record: %s",
                               c->out[i].path);
        if (c->out[i].fmt == SS_REPORT_SNAP && snap)
            return usage_error("one capture (.snap) per record: %s is the second", c->out[i].path);
        if (c->out[i].fmt == SS_REPORT_SNAP) snap = c->out[i].path;
        for (int j = 0; j < i; j++)
            if (!strcmp(c->out[i].path, c->out[j].path))
                return usage_error("-o %s given twice", c->out[i].path);
    }
    if (c->no_stack_bytes && !snap)
        return usage_error("%s", "--no-stack-bytes is about the capture: give -o FILE.snap");
    return 0;
}
