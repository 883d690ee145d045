/* cli/main.c: `stacksnap` entry point — parse, dispatch, map errors to exit codes
 * (0 success, 1 runtime failure, 2 usage or bad input). */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "stacksnap/version.h"

/* Captures being replayed and ELF files are read through private file
 * mappings: a file another process truncates under us faults the pages
 * past its new end (SIGBUS). That is a file changed while read, said as
 * such, not a crash. */
static void on_sigbus(int sig)
{
    (void)sig;
    static const char msg[] = "stacksnap: a file being read was truncated by another process "
                              "(SIGBUS): its contents are gone; stopping\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)w;
    _exit(1);
}

int main(int argc, char **argv)
{
    struct sigaction bus = {.sa_handler = on_sigbus};
    sigaction(SIGBUS, &bus, NULL);
    /* Blocks of 128 KiB and more always come from mmap and go back when
     * freed. glibc otherwise raises this threshold to the largest block
     * freed so far, so the big short-lived arrays of a symbol table build
     * (candidates, sort keys) end up in the heap, which keeps their pages
     * for good: a long-running agent's RSS then holds its worst build. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    struct ss_cli c;
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        printf("stacksnap %s\n", SS_VERSION);
        printf("otlp: %s\n", ss_report_otlp_built()
                                 ? "built in (opentelemetry.proto.profiles.v1development, 1.11.0)"
                                 : "not built in (no opentelemetry-proto 1.11.0 at build time)");
        return 0;
    }
    int rc = ss_cli_parse(&c, argc, argv);
    if (rc == 1) return 0; /* help */
    if (rc) return rc;
    if (!strcmp(c.cmd, "record"))
        return c.bpf_info && !c.command && !c.npids && !c.all ? ss_cmd_bpf_info(&c)
                                                              : ss_cmd_record(&c);
    if (!strcmp(c.cmd, "agent")) return ss_cmd_agent(&c);
    if (!strcmp(c.cmd, "info") && c.bpf_info) return ss_cmd_bpf_info(&c);
    if (!strcmp(c.cmd, "info")) return ss_cmd_info(&c);
    if (!strcmp(c.cmd, "diff")) return ss_cmd_diff(&c);
    if (!strcmp(c.cmd, "top")) return ss_cmd_top(&c);
    return ss_cmd_replay(&c); /* replay and report */
}
