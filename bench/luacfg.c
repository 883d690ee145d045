/* bench/luacfg.c: settings of the in-kernel LuaJIT walker, taken from the
 * profiler's own per-build layout table (src/unwind/luajit/layout.c).
 *
 * The layout is chosen the way the profiler chooses it: detection of the
 * executable by content (VM range, GC64), then the layout self-checks on
 * the live global_State, G = DISPATCH (r14 of a sample) - G2DISP. The
 * offsets the walker needs go into its cfg map. User space also resolves
 * the prototypes the walker reports (first line, chunk name), as an
 * in-kernel profiler's user side does. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "bench.h"
#include "memory/memory.h"
#include "stacksnap/ss_lj_luajit.h"
#include "unwind/luajit/layout.h"

static int detect(pid_t pid, struct ss_lj_elfinfo *info, uint64_t *bias, char *msg, size_t len)
{
    char exe[256];
    struct ss_err err = {0};
    int r = bn_exe_bias(pid, exe, sizeof(exe), bias);
    if (r) {
        snprintf(msg, len, "pid %d: executable mapping not found", (int)pid);
        return r;
    }
    r = ss_lj_detect_file(exe, info, &err);
    if (r < 0 || !info->is_luajit || !info->vm_found) {
        snprintf(msg, len, "%s: %s", exe, r < 0 ? err.msg : "no LuaJIT VM found");
        return r < 0 ? r : -ENOENT;
    }
    if (!info->gc64) {
        snprintf(msg, len, "%s: not GC64 (the bench walker is GC64 only)", exe);
        return -ENOTSUP;
    }
    return 0;
}

int bn_lua_cfg(pid_t pid, const uint64_t *r14, size_t nr14, struct bench_lua_cfg *cfg,
               char *layout_name, size_t namelen, char *msg, size_t len)
{
    struct ss_lj_elfinfo info;
    uint64_t bias;
    int r = detect(pid, &info, &bias, msg, len);
    if (r) return r;
    struct ss_target_live live = {.pid = pid};
    struct ss_mem m;
    ss_mem_init(&m, NULL, &ss_target_live, &live);
    const struct lj_layout *lay = NULL;
    struct lj_layout dlay;
    bool derived;
    uint64_t G = 0;
    char why[256] = "no sample with a DISPATCH register";
    /* candidate G2DISP: the one derived from the code (index -1), then the rows' */
    for (size_t i = 0; i < nr14 && !lay; i++)
        for (int k = -1; k < (int)ss_lj_nlayouts && !lay; k++) {
            int32_t g2disp;
            if (k < 0) {
                if (!(info.derived.have & SS_LJ_D_ENTRY)) continue;
                g2disp = info.derived.g2disp;
            } else {
                if (ss_lj_layouts[k].gc64 != info.gc64) continue;
                g2disp = ss_lj_layouts[k].g2disp;
            }
            G = r14[i] - (uint64_t)(int64_t)g2disp;
            if (ss_lj_layout_verify(&info, &m, G, r14[i], &dlay, &lay, &derived, why, sizeof(why)))
                lay = NULL;
        }
    if (!lay) {
        snprintf(msg, len, "pid %d: no LuaJIT layout verified: %s", (int)pid, why);
        return -ENOENT;
    }
    memset(cfg, 0, sizeof(*cfg));
    cfg->vm_lo = bias + info.vm_lo;
    cfg->vm_hi = bias + info.vm_hi;
    cfg->G = G;
    cfg->g2disp = lay->g2disp;
    cfg->G_cur_L = lay->G_cur_L;
    cfg->G_vmstate = lay->G_vmstate;
    cfg->G_jit_base = lay->G_jit_base;
    cfg->L_glref = lay->L_glref;
    cfg->L_base = lay->L_base;
    cfg->L_stack = lay->L_stack;
    cfg->L_stacksize = lay->L_stacksize;
    cfg->fn_ffid = lay->fn_ffid;
    cfg->fn_pc = lay->fn_pc;
    cfg->pt_size = lay->pt_size;
    snprintf(layout_name, namelen, "%s", lay->name);
    return 0;
}

int bn_lua_cfg_vm(pid_t pid, struct bench_lua_cfg *cfg)
{
    struct ss_lj_elfinfo info;
    uint64_t bias;
    char msg[256];
    int r = detect(pid, &info, &bias, msg, sizeof(msg));
    if (r) return r;
    cfg->vm_lo = bias + info.vm_lo;
    cfg->vm_hi = bias + info.vm_hi;
    cfg->G = 0; /* another process: only DISPATCH (r14) finds G */
    return 0;
}

static int rd(pid_t pid, uint64_t addr, void *dst, size_t len)
{
    struct iovec l = {dst, len}, rem = {(void *)addr, len};
    return process_vm_readv(pid, &l, 1, &rem, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

int bn_lua_proto(pid_t pid, const char *layout_name, uint64_t pt, int32_t *first, char *chunk,
                 size_t len)
{
    const struct lj_layout *lay = NULL;
    for (unsigned k = 0; k < ss_lj_nlayouts; k++)
        if (!strcmp(ss_lj_layouts[k].name, layout_name)) lay = &ss_lj_layouts[k];
    if (!lay || len < 2) return -EINVAL;
    uint8_t p[128], s[32 + 256];
    if (rd(pid, pt, p, lay->pt_size) || p[lay->gct] != LJ_GCT_PROTO) return -EINVAL;
    *first = (int32_t)lj_u32(p + lay->pt_firstline);
    uint64_t str = lj_ref(lay, p + lay->pt_chunkname);
    if (rd(pid, str, s, lay->str_data) || s[lay->gct] != LJ_GCT_STR) return -EINVAL;
    uint32_t n = lj_u32(s + lay->str_len);
    if (n > 255) n = 255;
    if (rd(pid, str + lay->str_data, s, n)) return -EINVAL;
    size_t skip = n && (s[0] == '@' || s[0] == '=');
    size_t cl = n - skip < len - 1 ? n - skip : len - 1;
    memcpy(chunk, s + skip, cl);
    chunk[cl] = 0;
    return 0;
}
