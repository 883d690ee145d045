/* capture/offcpu.c: --off-cpu (bpf/offcpu.h): attach the sched_switch and
 * sys_exit programs instead of the perf events, and detach them. Ring
 * buffer variant only. */
#include <errno.h>
#include <string.h>

#include "capture/capture_int.h"
#include "snapshot.skel.h"

int ss_capture_offcpu_start(struct ss_capture *c, struct ss_err *err)
{
    struct bpf_program *p[2] = {c->skel->progs.offcpu_switch, c->skel->progs.offcpu_exit};
    const char *what[2] = {"tp_btf/sched_switch", "tp_btf/sys_exit"};
    libbpf_print_fn_t old = libbpf_set_print(ss_capture_libbpf_silent);
    int r = 0;

    for (int i = 0; i < 2 && !r; i++) {
        c->off_links[i] = bpf_program__attach(p[i]);
        if (!c->off_links[i]) {
            r = -errno;
            ss_err_set(err, r, "attach %s (off-CPU): %s", what[i], strerror(-r));
        }
    }
    libbpf_set_print(old);
    if (r) ss_capture_offcpu_stop(c);
    return r;
}

void ss_capture_offcpu_stop(struct ss_capture *c)
{
    for (int i = 0; i < 2; i++) {
        bpf_link__destroy(c->off_links[i]);
        c->off_links[i] = NULL;
    }
}
