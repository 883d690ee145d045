/* util/safeopen.c: see safeopen.h. */
#include "util/safeopen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int ss_reopen_regular(int path_fd)
{
    if (path_fd < 0) return path_fd;
    struct stat st;
    int rc;
    if (fstat(path_fd, &st) < 0) {
        rc = -errno;
    } else if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
    } else {
        char self[64];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", path_fd);
        rc = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (rc < 0) rc = -errno;
    }
    close(path_fd);
    return rc;
}

int ss_open_regular(const char *path)
{
    int pfd = open(path, O_PATH | O_CLOEXEC);
    return ss_reopen_regular(pfd < 0 ? -errno : pfd);
}
