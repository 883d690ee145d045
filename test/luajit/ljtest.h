/* test/luajit/ljtest.h: helpers of the LuaJIT tests: spawn workloads, find
 * a module's load bias, create runtimes, sample a live process with
 * perf_event_open (user registers + user stack, no BPF needed). */
#ifndef LJTEST_H
#define LJTEST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "memory/memory.h"
#include "stacksnap/ss.h"
#include "stacksnap/ss_lj_luajit.h"

pid_t ljt_spawn(char *const argv[], const char *ld_library_path);
void ljt_kill(pid_t pid);
/* ${SS_CACHE:-/var/cache/stacksnap}/sub into buf. */
const char *ljt_cache(const char *sub, char *buf, size_t cap);
/* The Debian 13 root (made and cached by test/roots/mkroot.sh; asserts). */
#define LJT_TRIXIE_PKGS                                                                            \
    "luajit,libluajit-5.1-2,nginx,libnginx-mod-http-lua,lua-resty-core,lua-cjson"
void ljt_trixie_root(char *buf, size_t cap);
/* Run argv the way a container does: own mount + pid namespaces (unshare),
 * chrooted into root, with the host folder bind mounted at /mnt inside.
 * Returns the host pid of the process running argv (pid 1 inside), -1 on
 * failure; *outer is the unshare process to wait for / ljt_kill. */
pid_t ljt_spawn_root(const char *root, const char *bind, char *const argv[], pid_t *outer);
/* Path of the mapped file in pid whose name ends with suffix (or contains
 * it), as seen from here (else under the process's root), and its load
 * bias. 0 or -ENOENT. */
int ljt_find_module(pid_t pid, const char *needle, char *path, size_t cap, uint64_t *bias);
/* Detect + runtime for the module matching needle in pid. */
int ljt_runtime(pid_t pid, const char *needle, struct ss_lj_runtime **rt,
                struct ss_lj_elfinfo *info);

struct ljt_sample {
    uint32_t pid, tid;
    uint64_t regs[SS_NREGS];
    const uint8_t *stack;
    uint32_t stack_len;
};
struct ljt_perf;
int ljt_perf_open(struct ljt_perf **out, pid_t pid, unsigned freq, unsigned stack_bytes);
/* Deliver pending samples; returns the number delivered. */
int ljt_perf_drain(struct ljt_perf *p, void (*fn)(void *ctx, const struct ljt_sample *s),
                   void *ctx);
void ljt_perf_close(struct ljt_perf *p);
int ljt_perf_fd(const struct ljt_perf *p);

/* Lua frames of a splice result, root first, "name (chunk:line)" joined by
 * ';'. Native items print as "[native]". */
void ljt_folded(const struct ss_lj_out *out, char *buf, size_t cap);

/* A test that repeats another one's code paths on one more build: normal
 * build only (the ASan run's share of the suite time). */
#if defined(__SANITIZE_ADDRESS__)
#define LJT_NOT_ASAN .disabled = true
#else
#define LJT_NOT_ASAN .disabled = false
#endif

#endif
