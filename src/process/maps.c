/* process/maps.c: reading /proc files and parsing /proc/PID/maps lines
 * ("start-end perms offset major:minor inode   path"). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "process/process.h"

int ss_read_proc_file(const char *path, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        if (cap - n < 4096) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                close(fd);
                return -ENOMEM;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0) {
            if (errno == EINTR) continue;
            int e = -errno;
            free(buf);
            close(fd);
            return e;
        }
        if (r == 0) break;
        n += r;
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return 0;
}

static int parse_line(char *line, struct ss_map_desc *m)
{
    char perms[8] = {0};
    unsigned long long start, end, off, ino;
    unsigned maj, min;
    int pos = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj, &min,
               &ino, &pos) < 7)
        return -EINVAL;
    if (end <= start) return -EINVAL;
    memset(m, 0, sizeof(*m));
    m->start = start;
    m->end = end;
    m->offset = off;
    m->dev_major = maj;
    m->dev_minor = min;
    m->inode = ino;
    m->prot = (perms[0] == 'r' ? SS_MAP_R : 0) | (perms[1] == 'w' ? SS_MAP_W : 0) |
              (perms[2] == 'x' ? SS_MAP_X : 0) | (perms[3] == 's' ? SS_MAP_SHARED : 0);
    char *path = line + pos;
    while (*path == ' ')
        path++;
    m->path = path;
    return 0;
}

int ss_maps_parse(char *text, struct ss_map_desc **out, size_t *n)
{
    size_t cap = 64, cnt = 0;
    struct ss_map_desc *v = malloc(cap * sizeof(*v));
    if (!v) return -ENOMEM;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (cnt == cap) {
            struct ss_map_desc *nv = realloc(v, 2 * cap * sizeof(*v));
            if (!nv) {
                free(v);
                return -ENOMEM;
            }
            v = nv;
            cap *= 2;
        }
        if (parse_line(line, &v[cnt]) == 0) cnt++;
    }
    *out = v;
    *n = cnt;
    return 0;
}
