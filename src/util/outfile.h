/* util/outfile.h: creating an output file safely. Outputs hold data about
 * other processes (stacks, memory, paths): they are created mode 0600 and
 * never written through a symbolic link or into a file with other hard
 * links, whoever may have prepared the path (docs/security.md). */
#ifndef SS_UTIL_OUTFILE_H
#define SS_UTIL_OUTFILE_H

#include <stdbool.h>

#include "stacksnap/ss.h"

/* Open path for writing: create it (O_EXCL|O_NOFOLLOW, 0600), or take over
 * an existing regular file (same inode reopened without following links,
 * single link, owner = us, mode 0600, truncated). A symlink (even dangling)
 * is refused; so is anything else that is not a regular file, unless
 * allow_special (then a FIFO or character device such as /dev/null is
 * opened as it is). what names the file in messages ("capture",
 * "output"). Returns the fd or a negative errno (err says why). */
int ss_open_output(const char *path, const char *what, bool allow_special, struct ss_err *err);

#endif
