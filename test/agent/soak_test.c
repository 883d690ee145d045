/* test/agent/soak_test.c: the agent's 3-minute soak under process churn
 * (issue 19: "runs for days"). `stacksnap agent -F 99`, system-wide, beside
 * the shell loop of short processes (luajit, sh, ls, true), each
 * run through a symlink of its own name so that its samples are told apart
 * from the rest of the machine's; the LuaJIT ones live long enough to be
 * sampled with Lua frames. The test pulls 14 s profiles back to back (as a
 * store scrapes) and reads /metrics and the agent's /proc status every
 * 15 s. It asserts the agent's own behaviour: its private memory stays flat
 * after the first minute, the state of exited processes is freed (the
 * processes gauge stays small while hundreds come and go, and the exit
 * markers keep up), and the churned processes' stacks are whole (walked to
 * the entry of the program or of the dynamic loader) in their profiles,
 * with Lua frames. The share of truncated stacks of the whole machine is
 * logged, not judged: it follows the other processes that run beside the
 * test (docs/agent.md, "Soak"). Normal build only: the memory bars mean
 * nothing under ASan's quarantine. */
#include <criterion/criterion.h>
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "agent_util.h"
#include "profile.pb-c.h"

#define SOAK_S 180
#define STEP_S 15

/* The churned processes' samples in the profiles, by how their walk ended. */
struct churn_count {
    double samples, whole, lua, lj_samples, lj_whole;
    char examples[4][256]; /* the first stacks that were not whole */
    int nex;
};

static const char *label_str(const Perftools__Profiles__Profile *p,
                             const Perftools__Profiles__Sample *sm, const char *key)
{
    for (size_t i = 0; i < sm->n_label; i++)
        if (!strcmp(p->string_table[sm->label[i]->key], key))
            return p->string_table[sm->label[i]->str];
    return "";
}

/* The function of a location (the outermost of its inlined lines), NULL
 * when it has none. */
static const Perftools__Profiles__Function *frame_fn(const Perftools__Profiles__Profile *p,
                                                     uint64_t loc_id)
{
    for (size_t i = 0; i < p->n_location; i++) {
        const Perftools__Profiles__Location *l = p->location[i];
        if (l->id != loc_id || !l->n_line) continue;
        for (size_t j = 0; j < p->n_function; j++)
            if (p->function[j]->id == l->line[l->n_line - 1]->function_id) return p->function[j];
    }
    return NULL;
}

static const char *frame_name(const Perftools__Profiles__Profile *p, uint64_t loc_id)
{
    const Perftools__Profiles__Function *f = frame_fn(p, loc_id);
    return f ? p->string_table[f->name] : "?";
}

/* The file offset of an ELF file's entry point, -1 when unreadable. */
static int64_t entry_offset(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    Elf64_Ehdr eh;
    int64_t off = -1;
    if (fd >= 0 && pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) &&
        !memcmp(eh.e_ident, ELFMAG, SELFMAG) && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
        eh.e_phentsize == sizeof(Elf64_Phdr))
        for (unsigned i = 0; i < eh.e_phnum && off < 0; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != sizeof(ph))
                break;
            if (ph.p_type == PT_LOAD && eh.e_entry >= ph.p_vaddr &&
                eh.e_entry < ph.p_vaddr + ph.p_filesz)
                off = (int64_t)(eh.e_entry - ph.p_vaddr + ph.p_offset);
        }
    if (fd >= 0) close(fd);
    return off;
}

/* A whole stack ends at an entry point: the program's (`_start`, which
 * calls __libc_start_main), or the dynamic loader's while it loads the
 * program, or the first instruction of a process that just exec'd. The
 * root frame's file offset is within 64 bytes after its file's entry.
 * Anything else is a walk that stopped short. */
static bool whole(const Perftools__Profiles__Profile *p, uint64_t loc_id)
{
    const Perftools__Profiles__Location *l = NULL;
    for (size_t i = 0; i < p->n_location && !l; i++)
        if (p->location[i]->id == loc_id) l = p->location[i];
    const Perftools__Profiles__Mapping *m = NULL;
    for (size_t i = 0; l && l->mapping_id && i < p->n_mapping && !m; i++)
        if (p->mapping[i]->id == l->mapping_id) m = p->mapping[i];
    if (!m || l->address < m->memory_start) return false;
    int64_t entry = entry_offset(p->string_table[m->filename]);
    uint64_t off = l->address - m->memory_start + m->file_offset;
    return entry >= 0 && off >= (uint64_t)entry && off < (uint64_t)entry + 64;
}

static void count_churn(const char *path, struct churn_count *c)
{
    Perftools__Profiles__Profile *p = cli_load_pprof(path);
    cr_assert(p, "%s: unreadable or not a profile", path);
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *sm = p->sample[i];
        const char *comm = label_str(p, sm, "comm");
        if (strncmp(comm, AG_CHURN_PREFIX, strlen(AG_CHURN_PREFIX)) || !sm->n_location_id) continue;
        double n = (double)sm->value[0];
        bool lj = !strcmp(comm, AG_CHURN_PREFIX "luajit"), lua = false;
        uint64_t root = sm->location_id[sm->n_location_id - 1];
        for (size_t j = 0; j < sm->n_location_id && !lua; j++) { /* the loop's chunk */
            const Perftools__Profiles__Function *f = frame_fn(p, sm->location_id[j]);
            lua = f && !strcmp(p->string_table[f->filename], "(command line)");
        }
        c->samples += n;
        c->lj_samples += lj ? n : 0;
        c->lua += lua ? n : 0;
        if (whole(p, root)) {
            c->whole += n;
            c->lj_whole += lj ? n : 0;
        } else if (c->nex < 4) {
            snprintf(c->examples[c->nex++], sizeof(c->examples[0]), "%s: %s ... %s", comm,
                     frame_name(p, root), frame_name(p, sm->location_id[0]));
        }
    }
    perftools__profiles__profile__free_unpacked(p, NULL);
}

/* kB of a field of /proc/PID/status, -1 when absent */
static double status_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    double v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, field, n) && line[n] == ':') v = strtod(line + n + 1, NULL);
    if (f) fclose(f);
    return v;
}

Test(agent_soak, three_minutes_of_churn, .timeout = SOAK_S + 120)
{
    char *lj = cli_which("luajit");
    cr_assert(lj, "luajit not installed (Debian luajit; scripts/dev installs it)");
    struct ag_proc ag;
    const char *args[] = {"-F", "99", NULL};
    cr_assert(ag_start(&ag, "agent-soak", args) == 0, "the agent did not start");
    char *dir = cli_tmpdir("soak"), *pb = cli_path(dir, "p.pb.gz");
    pid_t churn = ag_churn_named(lj, SOAK_S, dir);
    cr_assert(churn > 0);
    struct churn_count cc = {0};

    double anon_1min = 0, anon_max = 0, live_max = 0, n = 0, trunc = 0, errs = 0, seen = 0;
    double exits = 0, lua = 0;
    char *body = NULL;
    for (int t = STEP_S; t <= SOAK_S; t += STEP_S) {
        double t0 = cli_now();
        char *code = NULL; /* the next STEP_S - 1 seconds' profile, as a store scrapes */
        ag_sh(&code, STEP_S + 20,
              "curl -s --max-time %d -o '%s' -w '%%{http_code}' "
              "'http://127.0.0.1:%d/debug/pprof/profile?seconds=%d'",
              STEP_S + 15, pb, ag.port, STEP_S - 1);
        cr_assert(code && atoi(code) == 200, "profile request: %s (%s)", code ? code : "",
                  ag.errpath);
        free(code);
        count_churn(pb, &cc);
        if (cli_now() - t0 < STEP_S) cli_sleep(STEP_S - (cli_now() - t0));
        cr_assert_eq(ag_http(ag.port, "GET", "/metrics", &body, 10), 200, "%s", ag.errpath);
        double anon = status_kib(ag.pid, "RssAnon") / 1024,
               rss = status_kib(ag.pid, "VmRSS") / 1024;
        double live = ag_metric(body, "stacksnap_processes");
        n = ag_metric(body, "stacksnap_samples_total");
        trunc = ag_metric(body, "stacksnap_truncated_samples_total");
        errs = ag_metric(body, "stacksnap_unwind_errors_total");
        seen = ag_metric(body, "stacksnap_processes_seen_total");
        exits = ag_metric(body, "stacksnap_process_events_total{kind=\"exit\"}");
        lua = ag_metric(body, "stacksnap_lua_samples_total");
        cr_log_info("soak %3d s: RSS %.1f MiB (anon %.1f), %.0f processes with state, %.0f seen, "
                    "%.0f exit markers, %.0f samples, %.1f%% truncated, %.0f unwind errors, "
                    "%.0f with Lua; churn: %.0f samples, %.1f%% whole (luajit %.0f, %.1f%%), "
                    "%.0f with its Lua frames",
                    t, rss, anon, live, seen, exits, n, n > 0 ? 100 * trunc / n : 0, errs, lua,
                    cc.samples, cc.samples > 0 ? 100 * cc.whole / cc.samples : 0, cc.lj_samples,
                    cc.lj_samples > 0 ? 100 * cc.lj_whole / cc.lj_samples : 0, cc.lua);
        if (t == 60) anon_1min = anon;
        if (t > 60 && anon > anon_max) anon_max = anon;
        if (live > live_max) live_max = live;
        free(body);
        body = NULL;
    }
    cr_assert_eq(cli_wait(churn, 30), 0);
    /* Bars from this machine (2 cores shared with other developers' builds,
     * ~1000 processes exiting a second): private memory 23.9 MiB at one
     * minute, 24.8 at most after; 19-31 processes with state while 7400 came
     * and went; the churn's stacks below. */
    cr_expect(anon_max <= anon_1min * 1.15 + 4,
              "private memory grew after the first minute: %.1f -> %.1f MiB", anon_1min, anon_max);
    cr_expect(seen >= 300, "only %.0f processes seen in %d s of churn", seen, SOAK_S);
    cr_expect(exits >= 1000, "only %.0f exit markers in %d s of churn", exits, SOAK_S);
    cr_expect(live_max <= 300, "up to %.0f processes with state: exited ones are not freed",
              live_max);
    cr_expect(lua > 100, "only %.0f samples with Lua frames", lua);
    cr_expect(cc.lua >= 100, "only %.0f samples of the churn's luajit with its Lua frame", cc.lua);
    /* Whole: measured 83-85% of the churn's luajit samples, 79% of all its
     * samples (docs/agent.md, "Soak"), until 2026-12-02; 74-76% of the
     * luajit ones since, of more samples: a luajit gone before the agent
     * walked its sample (~30 ms of life, polls every 10 ms) was an unwind
     * error, not in the profile; it is walked now with the mappings perf's
     * side band reported, and a sample in a C helper its trace called
     * (`lj_vm_modi`) ends there: nothing of the process can be read to step
     * out of the trace (one in its JIT code itself stays an error). Samples
     * inside execve once the kernel switched the memory map are whole now
     * (the stack copied at the exec's entry). */
    cr_expect(cc.lj_whole >= 0.65 * cc.lj_samples,
              "%.0f of %.0f samples of the churn's luajit whole; not whole: %s | %s | %s | %s",
              cc.lj_whole, cc.lj_samples, cc.examples[0], cc.examples[1], cc.examples[2],
              cc.examples[3]);
    cr_expect(cc.whole >= 0.65 * cc.samples,
              "%.0f of %.0f samples of the churned processes whole; not whole: %s | %s | %s | %s",
              cc.whole, cc.samples, cc.examples[0], cc.examples[1], cc.examples[2], cc.examples[3]);
    /* The machine's truncated share and unwind errors are logged, not
     * judged: both follow the other processes on the machine (compilers,
     * VMs, valgrind tools without unwind tables: 21-55% truncated from one
     * day to the next with the same binary), and the errors are samples of
     * processes that exec'd and exited before their first sample was read
     * (no view to unwind with), as many as the churn's speed makes. */
    cr_log_info("machine: %.0f of %.0f samples truncated, %.0f unwind errors", trunc, n, errs);
    cr_expect_eq(ag_stop(&ag, 10), 0, "%s", ag.log);
    ag_proc_free(&ag);
    cli_rmtree(dir);
    free(pb);
    free(dir);
    free(lj);
}
