/* util/outfile.c: see outfile.h. */
#include "util/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int refuse_link(const char *path, const char *what, struct ss_err *err)
{
    ss_err_set(err, -ELOOP, "refusing to write %s %s: it is a symbolic link", what, path);
    return -ELOOP;
}

int ss_open_output(const char *path, const char *what, bool allow_special, struct ss_err *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        /* O_CREAT's mode is masked by the umask: never more than 0600, and
         * exactly 0600 whatever the umask */
        if (fchmod(fd, 0600) < 0) {
            int e = errno;
            close(fd);
            ss_err_set(err, -e, "%s %s: cannot open for writing: %s", what, path, strerror(e));
            return -e;
        }
        return fd;
    }
    if (errno != EEXIST && errno != ELOOP) {
        int e = errno;
        ss_err_set(err, -e, "%s %s: cannot open for writing: %s", what, path, strerror(e));
        return -e;
    }
    struct stat ls, fs;
    if (lstat(path, &ls) < 0) {
        int e = errno;
        ss_err_set(err, -e, "%s %s: cannot open for writing: %s", what, path, strerror(e));
        return -e;
    }
    if (S_ISLNK(ls.st_mode)) return refuse_link(path, what, err);
    bool special = S_ISFIFO(ls.st_mode) || S_ISCHR(ls.st_mode);
    if (!S_ISREG(ls.st_mode) && !(allow_special && special)) {
        ss_err_set(err, -EINVAL, "refusing to write %s %s: not a regular file", what, path);
        return -EINVAL;
    }
    /* Existing file: reopen without following links, check it is still the
     * file we looked at, then (regular) take it over: owner, 0600, empty. */
    fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP) return refuse_link(path, what, err);
        ss_err_set(err, -e, "%s %s: cannot open for writing: %s", what, path, strerror(e));
        return -e;
    }
    int rc = 0;
    if (fstat(fd, &fs) < 0 || fs.st_dev != ls.st_dev || fs.st_ino != ls.st_ino ||
        (fs.st_mode & S_IFMT) != (ls.st_mode & S_IFMT)) {
        ss_err_set(err, rc = -EAGAIN, "refusing to write %s %s: it changed while opening", what,
                   path);
    } else if (S_ISREG(fs.st_mode) && fs.st_nlink > 1) {
        ss_err_set(err, rc = -EMLINK, "refusing to write %s %s: it has other hard links", what,
                   path);
    } else if (S_ISREG(fs.st_mode) &&
               ((fs.st_uid != geteuid() && fchown(fd, geteuid(), getegid()) < 0) ||
                fchmod(fd, 0600) < 0 || ftruncate(fd, 0) < 0)) {
        rc = -errno;
        ss_err_set(err, rc, "take over %s %s: %s", what, path, strerror(errno));
    } else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
        rc = -errno;
        ss_err_set(err, rc, "%s %s: cannot open for writing: %s", what, path, strerror(-rc));
    }
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}
