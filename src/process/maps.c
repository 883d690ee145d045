/* process/maps.c: reading /proc files and parsing /proc/PID/maps lines
 * ("start-end perms offset major:minor inode   path"). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
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

/* A hexadecimal number ending at stop (a run of spaces when stop is ' '). */
static bool hex_field(char **p, char stop, unsigned long long *v)
{
    char *e;
    if (!isxdigit((unsigned char)**p)) return false; /* no sign, space or 0x */
    *v = strtoull(*p, &e, 16);
    if (*e != stop) return false;
    do
        e++;
    while (stop == ' ' && *e == ' ');
    *p = e;
    return true;
}

/* One line, field by field: sscanf's format parsing took 4.4-5.5 us a line
 * on the loaded 2-core machine (a 67-line maps of cc1), this 2.0-2.3, and
 * the agent reads the maps of every new process it samples. */
static int parse_line(char *line, struct ss_map_desc *m)
{
    unsigned long long start, end, off, maj, min, ino;
    char *p = line;
    if (!hex_field(&p, '-', &start) || !hex_field(&p, ' ', &end)) return -EINVAL;
    char *perms = p;
    while (*p && *p != ' ')
        p++;
    if (p - perms < 4) return -EINVAL;
    while (*p == ' ')
        p++;
    if (!hex_field(&p, ' ', &off) || !hex_field(&p, ':', &maj) || !hex_field(&p, ' ', &min) ||
        maj > UINT32_MAX || min > UINT32_MAX)
        return -EINVAL;
    if (*p < '0' || *p > '9') return -EINVAL;
    ino = strtoull(p, &p, 10);
    if (*p && *p != ' ') return -EINVAL;
    if (end <= start) return -EINVAL;
    memset(m, 0, sizeof(*m));
    m->start = start;
    m->end = end;
    m->offset = off;
    m->dev_major = (unsigned)maj;
    m->dev_minor = (unsigned)min;
    m->inode = ino;
    m->prot = (perms[0] == 'r' ? SS_MAP_R : 0) | (perms[1] == 'w' ? SS_MAP_W : 0) |
              (perms[2] == 'x' ? SS_MAP_X : 0) | (perms[3] == 's' ? SS_MAP_SHARED : 0);
    while (*p == ' ')
        p++;
    m->path = p;
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
