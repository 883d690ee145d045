/* test/reliability/hostile_test.c: hostile targets and output files.
 *
 * A target (rl_hostile_target) maps a library and then replaces the file
 * at that path by another ELF file, a symlink to it, or a FIFO, or ships a
 * .gnu_debuglink whose candidates are a FIFO and a symlink. `record -p`
 * must finish on time (never block opening a FIFO) and never show the
 * other file's symbols (rl_beta_*): files are opened through
 * /proc/PID/map_files (root) or /proc/PID/root + path with an inode check
 * (least privilege, no map_files), never by the path the target shows.
 *
 * Outputs: every format is created mode 0600 whatever the umask; a symlink
 * (or a file with another hard link) at an output path is refused and its
 * target left untouched. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rl.h"

#define NOBODY 65534
#define CAPS "-all,+bpf,+perfmon,+sys_ptrace"

static void die_with_parent(void *ctx)
{
    (void)ctx;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* Run one target mode; record it as root or (least) as nobody with the
 * three capabilities. */
static void hostile(const char *mode, bool least)
{
    char dir[256];
    rl_tmpdir(dir, sizeof(dir), "hostile");
    const char *lib = !strcmp(mode, "debuglink") ? SS_BINARY_DIR "/librl_alpha_dl.so"
                                                 : SS_BINARY_DIR "/librl_alpha.so";
    char *targv[] = {SS_BINARY_DIR "/rl_hostile_target", (char *)mode, dir, (char *)lib,
                     SS_BINARY_DIR "/librl_beta.so",     NULL};
    struct rl_proc t;
    cr_assert_eq(rl_start(&t, dir, "target", targv, die_with_parent, NULL), 0);
    char *ready = NULL;
    for (int i = 0; i < 200 && !(ready && strstr(ready, "ready")); i++) {
        free(ready);
        usleep(20000);
        ready = rl_slurp(t.out_path, NULL);
    }
    cr_assert(ready && strstr(ready, "ready"), "%s: target did not start", mode);
    free(ready);

    char outdir[300], out[400], pid[16];
    snprintf(outdir, sizeof(outdir), "%s/out", dir);
    cr_assert_eq(mkdir(outdir, 0700), 0);
    if (least) cr_assert_eq(chown(outdir, NOBODY, NOBODY), 0);
    snprintf(out, sizeof(out), "%s/h.folded", outdir);
    snprintf(pid, sizeof(pid), "%d", (int)t.pid);
    char *rec_root[] = {RL_STACKSNAP, "record", "-p", pid, "-F", "499", "-d", "2", "-o", out, NULL};
    char *rec_least[] = {"setpriv",
                         "--reuid=65534",
                         "--regid=65534",
                         "--clear-groups",
                         "--inh-caps=" CAPS,
                         "--ambient-caps=" CAPS,
                         "--bounding-set=" CAPS,
                         RL_STACKSNAP,
                         "record",
                         "-p",
                         pid,
                         "-F",
                         "499",
                         "-d",
                         "2",
                         "-o",
                         out,
                         NULL};
    double t0 = rl_now();
    int rc = rl_run(outdir, "record", least ? rec_least : rec_root, 40);
    double el = rl_now() - t0;
    char errp[500];
    snprintf(errp, sizeof(errp), "%s/record.err", outdir);
    char *err = rl_slurp(errp, NULL);
    char *folded = rl_slurp(out, NULL);
    cr_log_info("hostile %s (%s): record exit %d in %.1fs; %s", mode, least ? "least" : "root", rc,
                el, err ? err : "");
    cr_expect_eq(rc, 0, "%s (%s): record exit %d after %.1fs (-1: hung): %s", mode,
                 least ? "least privilege" : "root", rc, el, err ? err : "");
    cr_expect(folded && !strstr(folded, "rl_beta"),
              "%s: the profile names the file the target put at its path:\n%.1500s", mode,
              folded ? folded : "");
    if (!least) /* map_files: the mapped file itself */
        cr_expect(folded && strstr(folded, "rl_alpha_spin"),
                  "%s: mapped library not read:\n%.1500s", mode, folded ? folded : "");
    free(folded);
    free(err);
    kill(t.pid, SIGKILL);
    rl_wait(&t, 10);
    rl_rmtree(dir);
}

Test(hostile, swapped_elf)
{
    hostile("swap-elf", false);
    hostile("swap-elf", true);
}

Test(hostile, swapped_symlink)
{
    hostile("swap-symlink", false);
    hostile("swap-symlink", true);
}

Test(hostile, swapped_fifo)
{
    hostile("swap-fifo", false);
    hostile("swap-fifo", true);
}

Test(hostile, debuglink_fifo_and_symlink)
{
    hostile("debuglink", false);
    hostile("debuglink", true);
}

/* ---- output files ---- */

static const char *const formats[] = {"snap", "folded", "svg", "pb.gz", "txt"};
#define NFMT (sizeof(formats) / sizeof(formats[0]))

static int record_to(const char *dir, char *const outs[], size_t nouts)
{
    char *argv[32] = {RL_STACKSNAP, "record", "-F", "99", "-d", "1"};
    size_t n = 6;
    for (size_t i = 0; i < nouts; i++) {
        argv[n++] = "-o";
        argv[n++] = outs[i];
    }
    argv[n++] = "--";
    argv[n++] = "sh";
    argv[n++] = "-c";
    argv[n++] = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done";
    argv[n] = NULL;
    return rl_run(dir, "rec", argv, 60);
}

Test(hostile, outputs_private_never_through_links, .timeout = 120)
{
    char dir[256];
    rl_tmpdir(dir, sizeof(dir), "outs");
    char paths[NFMT][400];
    char *outs[NFMT];
    for (size_t i = 0; i < NFMT; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/new.%s", dir, formats[i]);
        outs[i] = paths[i];
    }
    mode_t old = umask(022);
    int rc = record_to(dir, outs, NFMT);
    cr_assert_eq(rc, 0, "record with every output format failed");
    for (size_t i = 0; i < NFMT; i++) {
        struct stat st;
        cr_assert_eq(stat(paths[i], &st), 0, "%s not written", paths[i]);
        cr_expect_eq(st.st_mode & 07777, 0600, "%s: mode %o, not 0600", paths[i],
                     st.st_mode & 07777);
    }
    /* an existing world-readable output is taken over as 0600 */
    chmod(paths[1], 0644);
    cr_assert_eq(record_to(dir, outs + 1, 1), 0);
    struct stat st;
    cr_assert_eq(stat(paths[1], &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0600, "rewritten output: mode %o", st.st_mode & 07777);

    /* a symlink or a second hard link at the output path: refused */
    char victim[400];
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    for (size_t i = 0; i < NFMT; i++) {
        for (int kind = 0; kind < 2; kind++) {
            FILE *v = fopen(victim, "w");
            fputs("precious\n", v);
            fclose(v);
            chmod(victim, 0644);
            char lpath[400];
            snprintf(lpath, sizeof(lpath), "%s/link.%s", dir, formats[i]);
            unlink(lpath);
            cr_assert_eq(kind ? link(victim, lpath) : symlink(victim, lpath), 0);
            char *o[] = {lpath};
            int r = record_to(dir, o, 1);
            char *after = rl_slurp(victim, NULL);
            cr_expect_neq(r, 0, "record wrote .%s through a %s", formats[i],
                          kind ? "hard link" : "symlink");
            cr_expect(after && !strcmp(after, "precious\n"),
                      ".%s output through a %s changed its target", formats[i],
                      kind ? "hard link" : "symlink");
            cr_expect_eq(stat(victim, &st), 0);
            cr_expect_eq(st.st_mode & 07777, 0644, ".%s output changed the mode of the %s target",
                         formats[i], kind ? "hard link" : "symlink");
            char ep[500];
            snprintf(ep, sizeof(ep), "%s/rec.err", dir);
            char *err = rl_slurp(ep, NULL);
            cr_expect(err && strstr(err, kind ? "hard links" : "symbolic link"),
                      "no word about the link: %s", err ? err : "");
            free(err);
            free(after);
            unlink(lpath);
        }
    }
    umask(old);
    rl_rmtree(dir);
}
