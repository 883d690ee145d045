/* test/native/procid_test.c: the container id of cgroup paths as docker,
 * containerd, CRI-O, podman and systemd name them, and none where a path
 * only looks like one; this process's own exe and cgroup. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "process/procid.h"

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static void has(const char *path, const char *want)
{
    char id[SS_CONTAINER_ID_LEN + 1];
    bool ok = ss_cgroup_container_id(path, id);
    if (want) {
        cr_assert(ok, "no id in %s", path);
        cr_assert_str_eq(id, want, "%s", path);
        cr_assert_str_eq(ss_cgroup_label(path, id), want);
    } else {
        cr_assert(!ok, "id %s in %s", id, path);
        cr_assert_str_eq(ss_cgroup_label(path, id), path);
    }
}

Test(procid, container_forms)
{
    has("/docker/" ID, ID);
    has("/system.slice/docker-" ID ".scope", ID);
    has("/system.slice/containerd.service/kubepods-besteffort-pod1.slice:cri-containerd:" ID, ID);
    has("/kubepods.slice/kubepods-pod1.slice/cri-containerd-" ID ".scope", ID);
    has("/kubepods/besteffort/pod12ab/" ID, ID);
    has("/machine.slice/libpod-" ID ".scope/container", ID);
    has("/kubepods.slice/crio-" ID ".scope", ID);
    has("/docker/" ID "/docker/" ID2, ID2); /* nested: the innermost */
    has("/", NULL);
    has("/user.slice/user-0.slice/session-1.scope", NULL);
    has("/x/" ID "0", NULL);         /* 65 digits */
    has("/x/" ID "g", NULL);         /* not framed */
    has("/x/abc" ID ".scope", NULL); /* 67 digits */
}

Test(procid, self)
{
    char exe[PATH_MAX], cg[4096];
    ss_proc_exe((uint32_t)getpid(), exe, sizeof(exe));
    char *real = realpath("/proc/self/exe", NULL);
    cr_assert_str_eq(exe, real);
    free(real);
    ss_proc_cgroup((uint32_t)getpid(), cg, sizeof(cg));
    cr_assert(cg[0] == '/', "cgroup %s", cg);
    ss_proc_exe(0x7ffffff0u, exe, sizeof(exe));
    cr_assert_str_eq(exe, "");
    ss_proc_cgroup(0x7ffffff0u, cg, sizeof(cg));
    cr_assert_str_eq(cg, "");
}
