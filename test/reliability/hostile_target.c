/* test/reliability/hostile_target.c: a target that tries to trick the
 * profiler through the files it maps (test/reliability/hostile_test.c).
 *
 *   rl_hostile_target MODE DIR LIB OTHER_LIB
 *
 * Copies LIB to DIR/libtarget.so, maps it (dlopen) and then, by MODE:
 *   swap-elf      renames a copy of OTHER_LIB over DIR/libtarget.so
 *   swap-symlink  replaces DIR/libtarget.so by a symlink to OTHER_LIB
 *   swap-fifo     replaces DIR/libtarget.so by a FIFO (opening it blocks)
 *   debuglink     LIB is stripped and names a .gnu_debuglink "evil.debug":
 *                 DIR/evil.debug is a FIFO, DIR/.debug/evil.debug a symlink
 *                 to OTHER_LIB
 * prints "ready" and spins in the mapped library's function forever. A
 * profiler that opens files by the paths the target shows would read
 * OTHER_LIB (its symbols are rl_beta_*) or hang on the FIFO. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int copy(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    if (in < 0 || out < 0) return -1;
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n) return -1;
    close(in);
    close(out);
    return n < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: rl_hostile_target MODE DIR LIB OTHER_LIB\n");
        return 2;
    }
    const char *mode = argv[1], *dir = argv[2];
    char path[4096], tmp[4096], dbg[4096];
    snprintf(path, sizeof(path), "%s/libtarget.so", dir);
    snprintf(tmp, sizeof(tmp), "%s/libtarget.so.new", dir);
    if (copy(argv[3], path)) {
        perror("copy");
        return 1;
    }
    void *h = dlopen(path, RTLD_NOW);
    void (*spin)(unsigned long) = h ? (void (*)(unsigned long))dlsym(h, "rl_alpha_spin") : NULL;
    if (!spin) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return 1;
    }
    int rc = 0;
    if (!strcmp(mode, "swap-elf")) {
        rc = copy(argv[4], tmp) || rename(tmp, path);
    } else if (!strcmp(mode, "swap-symlink")) {
        rc = unlink(path) || symlink(argv[4], path);
    } else if (!strcmp(mode, "swap-fifo")) {
        rc = unlink(path) || mkfifo(path, 0666) || chmod(path, 0666);
    } else if (!strcmp(mode, "debuglink")) {
        snprintf(dbg, sizeof(dbg), "%s/evil.debug", dir);
        rc = mkfifo(dbg, 0666) || chmod(dbg, 0666);
        snprintf(dbg, sizeof(dbg), "%s/.debug", dir);
        rc = rc || mkdir(dbg, 0755);
        snprintf(dbg, sizeof(dbg), "%s/.debug/evil.debug", dir);
        rc = rc || symlink(argv[4], dbg);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    if (rc) {
        perror(mode);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    for (;;)
        spin(1000000);
}
