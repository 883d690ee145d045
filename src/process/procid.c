/* process/procid.c: see procid.h. */
#include "process/procid.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void ss_proc_exe(uint32_t pid, char *buf, size_t len)
{
    char link[64];
    snprintf(link, sizeof(link), "/proc/%u/exe", pid);
    ssize_t n = len ? readlink(link, buf, len - 1) : -1;
    if (len) buf[n > 0 ? n : 0] = 0;
}

void ss_proc_cgroup(uint32_t pid, char *buf, size_t len)
{
    char path[64], line[4096];
    buf[0] = 0;
    snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
    FILE *f = fopen(path, "re");
    if (!f) return;
    while (fgets(line, sizeof(line), f)) { /* cgroup v2: "0::/PATH" */
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "0::", 3) && line[3]) {
            if (strlen(line + 3) < len) snprintf(buf, len, "%s", line + 3);
            break;
        }
    }
    fclose(f);
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool ss_cgroup_container_id(const char *path, char id[SS_CONTAINER_ID_LEN + 1])
{
    const char *found = NULL;
    for (const char *s = path; *s;) {
        size_t n = 0;
        while (is_hex(s[n]))
            n++;
        if (!n) {
            s++;
            continue;
        }
        /* framed: a component start or a runtime's "-" / ":" before, and a
         * component end or ".scope" after */
        char before = s == path ? '/' : s[-1], after = s[n];
        bool fb = before == '/' || before == '-' || before == ':';
        bool fa = !after || after == '/' || !strncmp(s + n, ".scope", 6);
        if (n == SS_CONTAINER_ID_LEN && fb && fa) found = s; /* innermost wins */
        s += n;
    }
    id[0] = 0;
    if (!found) return false;
    memcpy(id, found, SS_CONTAINER_ID_LEN);
    id[SS_CONTAINER_ID_LEN] = 0;
    return true;
}

const char *ss_cgroup_label(const char *path, char id[SS_CONTAINER_ID_LEN + 1])
{
    return ss_cgroup_container_id(path, id) ? id : path;
}
