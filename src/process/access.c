/* process/access.c: can this process look at a target at all? Profiling a
 * process means opening its files through /proc/PID/root (ptrace read
 * access) and reading its memory with process_vm_readv (ptrace attach
 * access): both are refused for processes of other users without
 * CAP_SYS_PTRACE. Checked once per selected pid, so that a missing
 * capability is an error that names it, not a profile of unsymbolized
 * frames. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "process/process.h"
#include "util/caps.h"

static int denied(pid_t pid, int e, const char *what, struct ss_err *err)
{
    char miss[64];
    ss_caps_missing(SS_CAPBIT(SS_CAP_SYS_PTRACE), miss, sizeof(miss));
    if (e == ESRCH || e == ENOENT) {
        ss_err_set(err, -ESRCH, "no such process: %d", (int)pid);
        return -ESRCH;
    }
    ss_err_set(err, -e, "pid %d: cannot read its %s: %s%s%s", (int)pid, what, strerror(e),
               miss[0] ? ": missing " : "",
               miss[0] ? "CAP_SYS_PTRACE (needed for processes of other users)" : "");
    return -e;
}

int ss_proc_check_access(pid_t pid, struct ss_err *err)
{
    char path[64], *maps = NULL;
    snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
    int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return denied(pid, errno, "files (/proc/PID/root)", err);
    close(fd);
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    int r = ss_read_proc_file(path, &maps, NULL);
    if (r < 0) return denied(pid, -r, "mappings", err);
    unsigned long long lo = 0;
    int ok = sscanf(maps, "%llx-", &lo) == 1;
    free(maps);
    if (!ok) return 0; /* no mappings (exiting, kernel thread): nothing to read */
    char b;
    struct iovec l = {&b, 1}, rv = {(void *)(uintptr_t)lo, 1};
    if (process_vm_readv(pid, &l, 1, &rv, 1, 0) < 0 && errno != EFAULT)
        return denied(pid, errno, "memory (process_vm_readv)", err);
    return 0;
}
