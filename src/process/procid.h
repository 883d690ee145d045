/* process/procid: a process's identity beyond its mappings — the exe path,
 * the cgroup (v2) it is in, and the container id a cgroup path names
 * (docker, containerd, podman, systemd scope forms). The capture's process
 * records hold exe and cgroup; OTLP's process.executable.path and
 * container.id and pprof's exe/cgroup labels come from them. */
#ifndef SS_PROCESS_PROCID_H
#define SS_PROCESS_PROCID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SS_CONTAINER_ID_LEN 64

/* The target of /proc/PID/exe into buf; "" when the process is gone. */
void ss_proc_exe(uint32_t pid, char *buf, size_t len);
/* pid's cgroup v2 path ("0::PATH" of /proc/PID/cgroup) into buf; "" when the
 * process is gone, has no v2 entry or the path does not fit. */
void ss_proc_cgroup(uint32_t pid, char *buf, size_t len);
/* The container id in a cgroup path: the innermost run of exactly 64
 * lowercase hex digits that is a whole path component or one framed by a
 * runtime's prefix and suffix ("/docker/ID", "/system.slice/docker-ID.scope",
 * "cri-containerd-ID.scope", "libpod-ID.scope", "crio-ID.scope", kubepods'
 * ".../ID"). id gets it NUL-terminated; false (id "") when there is none. */
bool ss_cgroup_container_id(const char *path, char id[SS_CONTAINER_ID_LEN + 1]);
/* The label of a cgroup path (pprof's cgroup, the report's container):
 * its container id when it names one, else the path. */
const char *ss_cgroup_label(const char *path, char id[SS_CONTAINER_ID_LEN + 1]);

#endif
