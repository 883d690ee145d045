/* test/fuzz/lj_fuzz.c: libFuzzer target for the LuaJIT walker over arbitrary
 * memory. The input (lj_input.h) gives the VM range, the sample's registers,
 * the native frame list and the target's memory; ss_lj_leaf_cfa, then
 * ss_lj_trace_cfa for every frame the input marks as trace code (trace
 * lookup, validation and decoding: trace.c, trace_load.c, guards.c for
 * builds without SnapShot.mcofs) and ss_lj_splice run over it with a fresh
 * runtime (layout chosen and verified from the bytes), then once more after
 * some bytes changed (warm caches over torn state, the trace cache too).
 * Every Lua frame produced is checked: a name, NUL-terminated strings, and
 * the output never exceeds its capacity. Seeds come from live LuaJIT
 * processes (lj_mkseed.c); see docs/security.md for long runs. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lj_input.h"
#include "memory/memory.h"
#include "stacksnap/ss_lj_luajit.h"

struct region {
    uint64_t addr;
    uint32_t len;
    uint8_t *bytes; /* a private copy: the second pass changes it */
};

struct fmem {
    struct region r[LJF_MAX_REGIONS];
    unsigned n;
};

struct tframe {
    uint32_t k;   /* native frame index */
    uint64_t cfa; /* its CFA as the input gives it */
    bool exact;
    uint32_t known;
    uint64_t time_ns;
    uint64_t regs[SS_NREGS];
};

static volatile size_t sink;

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int debug = -1;

static int fuzz_readv(void *ctx, struct ss_iov *iov, int n)
{
    struct fmem *fm = ctx;
    for (int i = 0; i < n; i++) {
        iov[i].err = -EFAULT;
        for (unsigned k = 0; k < fm->n; k++) {
            const struct region *r = &fm->r[k];
            uint64_t off = iov[i].addr - r->addr;
            if (iov[i].addr >= r->addr && off < r->len && iov[i].len <= r->len - off) {
                memcpy(iov[i].dst, r->bytes + off, iov[i].len);
                iov[i].err = 0;
                break;
            }
        }
        if (debug > 0)
            fprintf(stderr, "  read 0x%llx +%zu: %d\n", (unsigned long long)iov[i].addr, iov[i].len,
                    iov[i].err);
    }
    return 0;
}

static const struct ss_target_ops fuzz_target = {.readv = fuzz_readv};

/* LJ_FUZZ_DEBUG=1 prints each splice (to see what a seed reaches) */

static void check_out(const struct ss_lj_out *out, int rc, uint32_t nnat)
{
    if (debug)
        fprintf(stderr, "splice rc %d: %u items, %u Lua frames, %u VM frames (%u failed)\n", rc,
                out->n, out->lua_frames, out->vm_frames, out->vm_failed);
    if (rc != 0 && rc != -ENOSPC && rc != -ENOMEM) abort();
    if (out->n > out->cap || out->lua_frames > out->n || out->vm_frames > nnat) abort();
    for (uint32_t i = 0; i < out->n; i++) {
        const struct ss_lj_item *it = &out->items[i];
        if (it->native >= (int32_t)nnat) abort();
        if (it->native >= 0) continue;
        /* Lua frames, and pseudo frames such as "[GC]" */
        if ((it->lua.kind != SS_FRAME_LUA && it->lua.kind != SS_FRAME_PSEUDO) || !it->lua.name)
            abort();
        sink += strlen(it->lua.name);
        if (it->lua.module) sink += strlen(it->lua.module);
        if (debug)
            fprintf(stderr, "  %s (%s:%u)\n", it->lua.name, it->lua.module ? it->lua.module : "?",
                    it->lua.line);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (debug < 0) debug = getenv("LJ_FUZZ_DEBUG") != NULL;
    if (size < LJF_HDR_SIZE) return 0;
    uint8_t flags = data[0];
    uint32_t nnat = data[1];
    if (nnat > LJF_MAX_NAT) nnat = LJF_MAX_NAT;
    struct ss_lj_elfinfo info = {
        .is_luajit = true,
        .vm_found = true,
        .gc64 = (flags & LJF_GC64) != 0,
        .vm_lo = get64(data + 2),
        .vm_hi = get64(data + 10),
        .vm_cfa_off = (flags & LJF_CFA96) ? 96 : 80,
        .hints = (flags >> LJF_HINT_SHIFT) & 7u,
        .checks = SS_LJ_CHECK_PCALL,
    };
    strcpy(info.version, lj_versions[(flags >> LJF_VER_SHIFT) & 7u]);
    uint64_t regs[SS_NREGS];
    memcpy(regs, data + 18, sizeof(regs));
    size_t off = LJF_HDR_SIZE;

    struct ss_lj_native nat[LJF_MAX_NAT];
    struct tframe tf[LJF_MAX_NAT]; /* ss_lj_trace_cfa arguments of trace frames */
    uint32_t nn = 0, ntf = 0;
    bool check_guards = false;
    while (nn < nnat && size - off >= LJF_NAT_SIZE) {
        const uint8_t *p = data + off;
        uint8_t nfl = p[33];
        size_t need = LJF_NAT_SIZE + (nfl & LJN_EXT ? LJF_EXT_SIZE : 0) +
                      (nfl & LJN_TRACE ? LJF_TRACE_SIZE : 0);
        if (size - off < need) break;
        nat[nn] = (struct ss_lj_native){.ip = get64(p),
                                        .cfa = get64(p + 8),
                                        .rbx = get64(p + 16),
                                        .r14 = get64(p + 24),
                                        .have = p[32] & 3u,
                                        .signal = nfl & LJN_SIGNAL};
        if (nfl & LJN_EXT) {
            nat[nn].have = p[32] & 15u;
            nat[nn].r15 = get64(p + LJF_NAT_SIZE);
            nat[nn].rbp = get64(p + LJF_NAT_SIZE + 8);
        }
        p += LJF_NAT_SIZE + (nfl & LJN_EXT ? LJF_EXT_SIZE : 0);
        if (nfl & LJN_TRACE) {
            struct tframe *t = &tf[ntf++];
            t->k = nn;
            t->cfa = nat[nn].cfa;
            t->exact = p[0] & LJT_EXACT;
            check_guards |= (p[0] & LJT_CHECK_GUARDS) != 0;
            memcpy(&t->known, p + 1, 4);
            t->time_ns = get64(p + 5);
            memcpy(t->regs, p + 13, sizeof(t->regs));
        }
        nn++;
        off += need;
    }

    static struct fmem fm; /* large; reset for every input */
    struct ss_window win[SS_WIN_MAX];
    unsigned nwin = 0;
    fm.n = 0;
    int snap = -1;
    while (fm.n < LJF_MAX_REGIONS && size - off >= 12) {
        struct region *r = &fm.r[fm.n];
        r->addr = get64(data + off);
        uint32_t len;
        memcpy(&len, data + off + 8, 4);
        off += 12;
        bool is_win = len & LJF_WINDOW;
        len &= ~LJF_WINDOW;
        if (len > size - off) len = (uint32_t)(size - off);
        if (is_win && nwin < SS_WIN_MAX) /* the sample's copy: never torn */
            win[nwin++] =
                (struct ss_window){.addr = r->addr, .len = len, .data = data + off, .err = 0};
        r->len = len;
        r->bytes = malloc(len ? len : 1);
        if (!r->bytes) break;
        memcpy(r->bytes, data + off, len);
        off += len;
        uint64_t sp = regs[SS_REG_SP];
        if (snap < 0 && sp >= r->addr && sp - r->addr < len) snap = (int)fm.n;
        fm.n++;
    }

    struct ss_lj_runtime *rt;
    if (ss_lj_runtime_new(&rt, &info, 0, 4242, NULL) == 0) {
        ss_lj_runtime_check_guards(rt, check_guards);
        struct ss_mem mem;
        ss_mem_init(&mem, NULL, &fuzz_target, &fm);
        if (snap >= 0) {
            const struct region *r = &fm.r[snap];
            uint64_t sp = regs[SS_REG_SP];
            ss_mem_set_snapshot(&mem, sp, r->bytes + (sp - r->addr), r->len - (sp - r->addr), 0);
        }
        ss_mem_set_windows(&mem, win, nwin);
        sink += ss_lj_leaf_cfa(rt, &mem, regs);
        static struct ss_lj_item items[600];
        for (int pass = 0; pass < 2; pass++) {
            /* trace frames as unwind/lua.c finds them, leaf first; the
             * second pass comes 0-255 ms of sample time later (the trace
             * table rescan is rate-limited on it) */
            for (uint32_t j = 0; j < ntf; j++) {
                const struct tframe *t = &tf[j];
                uint32_t token = 0;
                uint64_t t_ns = t->time_ns + (pass ? (uint64_t)data[size - 1] * 1000000 : 0);
                uint64_t cfa = ss_lj_trace_cfa(&rt, 1, &mem, nat[t->k].ip, t->exact, t->regs,
                                               t->known, t_ns, &token);
                if (debug)
                    fprintf(stderr, "trace_cfa frame %u ip 0x%llx: cfa 0x%llx token 0x%x\n", t->k,
                            (unsigned long long)nat[t->k].ip, (unsigned long long)cfa, token);
                nat[t->k].cfa = cfa ? cfa : t->cfa;
                nat[t->k].trace = token;
            }
            /* the second pass also has a small output (-ENOSPC path) */
            struct ss_lj_out out = {.items = items, .cap = pass ? 4 + size % 61 : 600};
            int rc = ss_lj_splice(&rt, 1, &mem, regs, nat, nn, &out);
            check_out(&out, rc, nn);
            /* torn state: the target moves on between samples; the caches
             * filled by the first walk must notice, never trust stale bytes.
             * Bit k % 8 of the input's second last byte keeps region k as
             * it was (so that a cached trace can still validate). */
            uint8_t keep = data[size - 2];
            for (unsigned k = 0; k < fm.n; k++)
                if (fm.r[k].len && !(keep >> (k & 7) & 1))
                    fm.r[k].bytes[(k * 7919u + fm.r[k].len / 3) % fm.r[k].len] ^= 0x5a;
        }
        struct ss_lj_stats st;
        ss_lj_runtime_stats(rt, &st);
        sink += strlen(ss_lj_runtime_diag(rt)) + st.walks;
        const char *lay = ss_lj_runtime_layout(rt);
        if (lay) sink += strlen(lay);
        ss_lj_runtime_free(rt);
    }
    for (unsigned k = 0; k < fm.n; k++)
        free(fm.r[k].bytes);
    return 0;
}
