/* memory/target_live.c: the live target backend: process_vm_readv with many
 * iovecs per call; a failing element is marked and the rest re-issued. */
#include <errno.h>
#include <limits.h>
#include <sys/uio.h>

#include "memory/memory.h"

static int live_readv(void *ctx, struct ss_iov *iov, int n)
{
    enum { CHUNK = 256 };
    pid_t pid = ((struct ss_target_live *)ctx)->pid;
    struct iovec l[CHUNK], r[CHUNK];
    int i = 0;
    while (i < n) {
        int k = n - i < CHUNK ? n - i : CHUNK;
        for (int j = 0; j < k; j++) {
            l[j].iov_base = iov[i + j].dst;
            l[j].iov_len = iov[i + j].len;
            r[j].iov_base = (void *)(uintptr_t)iov[i + j].addr;
            r[j].iov_len = iov[i + j].len;
        }
        ssize_t got = process_vm_readv(pid, l, k, r, k, 0);
        if (got < 0) {
            int e = errno;
            if (e == ESRCH || e == EPERM || e == ENOMEM) {
                for (int j = i; j < n; j++)
                    iov[j].err = -e;
                return e == ESRCH ? -ESRCH : 0;
            }
            iov[i].err = -e; /* EFAULT: the first element is unreadable */
            i++;
            continue;
        }
        size_t left = (size_t)got;
        int j = i;
        while (j < i + k && left >= iov[j].len) {
            iov[j].err = 0;
            left -= iov[j].len;
            j++;
        }
        if (j < i + k) {
            iov[j].err = -EFAULT; /* partial or unreadable: stop there, go on after */
            j++;
        }
        i = j;
    }
    return 0;
}

const struct ss_target_ops ss_target_live = {.readv = live_readv};
