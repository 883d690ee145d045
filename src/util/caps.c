/* util/caps.c: see caps.h. */
#include "util/caps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t ss_caps_effective(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return ~0ull;
    char line[256];
    uint64_t eff = ~0ull;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "CapEff:", 7)) {
            eff = strtoull(line + 7, NULL, 16);
            break;
        }
    fclose(f);
    return eff;
}

static const char *cap_name(int c)
{
    switch (c) {
    case SS_CAP_SYS_PTRACE:
        return "CAP_SYS_PTRACE";
    case SS_CAP_SYS_ADMIN:
        return "CAP_SYS_ADMIN";
    case SS_CAP_SYS_RESOURCE:
        return "CAP_SYS_RESOURCE";
    case SS_CAP_PERFMON:
        return "CAP_PERFMON";
    case SS_CAP_BPF:
        return "CAP_BPF";
    }
    return "CAP_?";
}

const char *ss_caps_missing(uint64_t need, char *buf, size_t n)
{
    uint64_t eff = ss_caps_effective();
    if (eff & SS_CAPBIT(SS_CAP_SYS_ADMIN)) eff |= SS_CAPBIT(SS_CAP_BPF) | SS_CAPBIT(SS_CAP_PERFMON);
    size_t used = 0;
    if (n) buf[0] = 0;
    for (int c = 0; c < 64; c++)
        if ((need & SS_CAPBIT(c)) && !(eff & SS_CAPBIT(c)) && used < n)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", cap_name(c));
    return buf;
}
