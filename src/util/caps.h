/* util/caps.h: the Linux capabilities this process has, so that a failure
 * caused by a missing one says which (docs/security.md lists what each
 * part of stacksnap needs). */
#ifndef SS_UTIL_CAPS_H
#define SS_UTIL_CAPS_H

#include <stddef.h>
#include <stdint.h>

enum {
    SS_CAP_SYS_PTRACE = 19,
    SS_CAP_SYS_ADMIN = 21,
    SS_CAP_SYS_RESOURCE = 24,
    SS_CAP_PERFMON = 38,
    SS_CAP_BPF = 39,
};
#define SS_CAPBIT(c) (1ull << (c))

/* Effective capability set (CapEff of /proc/self/status); all bits set when
 * it cannot be read (then nothing is reported missing). */
uint64_t ss_caps_effective(void);

/* Names of the capabilities of need that are not effective, as
 * "CAP_BPF, CAP_PERFMON" in buf ("" when none is missing). CAP_SYS_ADMIN
 * stands in for CAP_BPF and CAP_PERFMON (kernels before 5.8). Returns buf. */
const char *ss_caps_missing(uint64_t need, char *buf, size_t n);

#endif
