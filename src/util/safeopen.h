/* util/safeopen.h: opening files whose paths come from targets or capture
 * files (mapped files, debug links, bundle sources, replay candidates).
 * Such a path may name a FIFO (open blocks forever), a device (open has
 * side effects: a watchdog, a tty) or anything else: the file is first
 * opened with O_PATH (opens nothing), checked to be a regular file, and
 * only then reopened for reading through /proc/self/fd. */
#ifndef SS_UTIL_SAFEOPEN_H
#define SS_UTIL_SAFEOPEN_H

/* Reopen an O_PATH descriptor (always consumed) for reading if it is a
 * regular file. Returns the new fd or a negative errno (-EINVAL: not a
 * regular file). */
int ss_reopen_regular(int path_fd);

/* open(path) for reading, regular files only (see above). */
int ss_open_regular(const char *path);

#endif
