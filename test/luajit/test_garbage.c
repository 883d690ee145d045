/* test/luajit/test_garbage.c: the walker over garbage memory ends (error or
 * truncated list), never crashes or loops. The "target" is this process:
 * buffers of random words sprinkled with pointers back into the buffers,
 * type bytes and tags that pass the first checks, so walks go deep. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ljtest.h"
#include "unwind/luajit/layout.h"
#include "unwind/luajit/runtime.h"
#include "unwind/luajit/frames.h"

#define WORDS 4096

/* The target is this process, walked with Debian's luajit's facts. */
static void own_target(struct ss_lj_elfinfo *info, struct ss_target_live *tl, struct ss_mem *mem)
{
    struct ss_err err = {0};
    cr_assert_eq(ss_lj_detect_file("/usr/bin/luajit", info, &err), 0, "%s", err.msg);
    *tl = (struct ss_target_live){.pid = getpid()};
    ss_mem_init(mem, NULL, &ss_target_live, tl);
}

Test(luajit_garbage, random_memory_never_crashes)
{
    struct ss_lj_elfinfo info;
    struct ss_err err = {0};
    struct ss_target_live tl;
    struct ss_mem mem;
    own_target(&info, &tl, &mem);
    uint64_t *buf = malloc(WORDS * 8);
    uint64_t regs[SS_NREGS];
    unsigned lua = 0;
    srand(12345);
    for (int iter = 0; iter < 3000; iter++) {
        struct ss_lj_runtime *rt;
        /* VM range = an address range we control as "ip" */
        cr_assert_eq(ss_lj_runtime_new(&rt, &info, 0, (uint32_t)getpid(), &err), 0);
        uint64_t b = (uint64_t)(uintptr_t)buf;
        for (int i = 0; i < WORDS; i++) {
            uint64_t r = ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 10) ^ (uint64_t)rand();
            switch (rand() % 6) {
            case 0:
                buf[i] = b + (r % (WORDS * 8));
                break; /* pointer inside */
            case 1:
                buf[i] = (b + (r % (WORDS * 8))) & ~7ull;
                break; /* aligned pointer */
            case 2:
                buf[i] = (0x1fff7ull << 47) | ((b + (r % (WORDS * 8))) & ~7ull);
                break;
            case 3:
                buf[i] = (r & ~0xffull) | (uint64_t)(rand() % 10);
                break; /* type byte */
            case 4:
                buf[i] = r % 64;
                break;
            default:
                buf[i] = r;
                break;
            }
        }
        /* G candidates around the buffer: make mainthref consistent now and
         * then so that layout checks pass and walks proceed */
        if (iter % 3 == 0) {
            uint64_t G = b + 8 * 512;
            buf[512 + 192 / 8] = G - 96;                   /* mainthref */
            ((uint8_t *)buf)[(512 * 8) - 96 + 9] = 6;      /* main thread gct */
            buf[(512 * 8 - 96 + 16) / 8] = G;              /* main->glref */
            memset((uint8_t *)buf + 512 * 8 + 120, 0, 32); /* strempty */
            ((uint8_t *)buf)[512 * 8 + 120 + 9] = 4;
            buf[(512 * 8 + 184) / 8] = (uint64_t)-1; /* vmstate */
            /* an L pointing at it */
            ((uint8_t *)buf)[1024 * 8 + 9] = 6;
            buf[1024 + 2] = G;
            buf[1024 + 56 / 8] = b;                  /* L->stack */
            buf[1024 + 88 / 8] = WORDS / 2;          /* L->stacksize */
            buf[1024 + 80 / 8] = b + 8 * (1024 - 2); /* L->cframe == cframe */
        }
        memset(regs, 0, sizeof(regs));
        regs[SS_REG_IP] = info.vm_lo + 16;
        regs[SS_REG_SP] = b + 8 * (1024 - 2); /* cframe: SAVE_L at +16 -> buf[1024] */
        regs[SS_REG_DX] = b + 8 * (rand() % (WORDS / 2));
        regs[SS_REG_BX] = b + 4 * (rand() % (WORDS * 2));
        regs[SS_REG_R14] = rand() % 2 ? b + 8 * 512 + 3968 : 0;
        struct ss_lj_native nat[3] = {
            {.ip = regs[SS_REG_IP], .cfa = regs[SS_REG_SP] + 80},
            {.ip = info.vm_lo + 100, .cfa = b + 8 * (rand() % WORDS)},
            {.ip = 0x1234, .cfa = 0},
        };
        /* per-sample snapshot: the buffer itself */
        ss_mem_set_snapshot(&mem, b, (const uint8_t *)buf, WORDS * 8, 0);
        struct ss_lj_item items[600];
        struct ss_lj_out out = {.items = items, .cap = 600};
        int rc = ss_lj_splice(&rt, 1, &mem, regs, nat, 3, &out);
        cr_assert(rc == 0 || rc == -ENOSPC);
        cr_assert(out.n <= out.cap);
        lua += out.lua_frames;
        for (uint32_t k = 0; k < out.n; k++)
            if (out.items[k].native < 0) cr_assert_not_null(out.items[k].lua.name);
        ss_lj_runtime_free(rt);
    }
    cr_log_info("garbage walks produced %u Lua frames in total", lua);
    free(buf);
}

/* ---- guards.c: exit stubs and snapshot placement (no SnapShot.mcofs) ---- */

/* An exit stub group as lj_asm_x86.h asm_exitstub_gen writes it (the part
 * guards.c checks: 32 stubs, then "push hi"). */
static void stub_group(uint8_t *g, unsigned group)
{
    unsigned lo = (group * 32) & 0xff;
    memset(g, 0xcc, 160);
    g[0] = 0x6a, g[1] = (uint8_t)lo;
    for (unsigned i = 1; i < 32; i++) {
        g[4 * i - 2] = 0xeb, g[4 * i - 1] = (uint8_t)(4 * (32 - i) - 2);
        g[4 * i] = 0x6a, g[4 * i + 1] = (uint8_t)(lo + i);
    }
    g[126] = 0x6a, g[127] = (uint8_t)((group * 32) >> 8);
}

Test(luajit_garbage, guards_found_in_random_code)
{
    enum { SZ = 8192, NG = 10, NSNAP = 320 };
    /* one block, so that rel32 branches reach the stubs (as in an mcode area) */
    uint8_t *mc = malloc(SZ + NG * 160), *stubs = mc + SZ;
    struct ss_target_live tl = {.pid = getpid()};
    struct ss_mem mem;
    ss_mem_init(&mem, NULL, &ss_target_live, &tl);
    for (unsigned g = 0; g < NG; g++)
        stub_group(stubs + 160 * g, g);
    stubs[160 * 7 + 50] ^= 1; /* group 7 is damaged: its exits are not stubs */
    srand(777);
    for (int round = 0; round < 200; round++) {
        for (unsigned i = 0; i < SZ; i++)
            mc[i] = (uint8_t)rand();
        /* plant guards every ~100 bytes with nondecreasing exit numbers */
        struct ss_lj_guard want[128];
        unsigned nw = 0, exitno = 0;
        uint64_t base = (uint64_t)(uintptr_t)mc;
        for (uint32_t o = 16; o + 6 < SZ && nw < 64; o += 60 + (uint32_t)(rand() % 80)) {
            exitno += (unsigned)(rand() % 4);
            if (exitno >= NG * 32) break;
            bool jmp = rand() % 8 == 0;
            uint32_t len = jmp ? 5 : 6;
            uint64_t t = (uint64_t)(uintptr_t)(stubs + 160 * (exitno / 32) + 4 * (exitno % 32));
            int32_t rel = (int32_t)(t - (base + o + len));
            if (jmp)
                mc[o] = 0xe9;
            else
                mc[o] = 0x0f, mc[o + 1] = (uint8_t)(0x80 | (rand() % 16));
            memcpy(mc + o + len - 4, &rel, 4);
            if (exitno / 32 != 7 && exitno < NSNAP) want[nw++] = (struct ss_lj_guard){o, exitno};
        }
        struct ss_lj_guard got[4096];
        int n = ss_lj_guards(&mem, base, mc, SZ, NSNAP, got, 4096);
        cr_assert_eq(n, (int)nw, "round %d: %d guards found, %u planted", round, n, nw);
        for (unsigned i = 0; i < nw; i++)
            cr_assert(got[i].ofs == want[i].ofs && got[i].exitno == want[i].exitno,
                      "guard %u: %u->%u, planted %u->%u", i, got[i].ofs, got[i].exitno, want[i].ofs,
                      want[i].exitno);
        /* placement over random IR: starts from 0, nondecreasing, inside */
        uint32_t nins = SS_IR_BIAS + 1 + (uint32_t)(rand() % 2000), refs[NSNAP], starts[NSNAP];
        uint8_t *ir = malloc((size_t)(nins - SS_IR_BIAS) * 8);
        for (size_t i = 0; i < (size_t)(nins - SS_IR_BIAS) * 8; i++)
            ir[i] = (uint8_t)rand();
        uint32_t nsnap = 1 + (uint32_t)(rand() % NSNAP);
        for (uint32_t k = 0; k < nsnap; k++)
            refs[k] = rand() % 3 ? SS_IR_BIAS + (uint32_t)(rand() % (nins - SS_IR_BIAS + 8))
                                 : (uint32_t)rand() & 0xffff;
        ss_lj_guard_starts(&ss_lj_layouts[0], got, (uint32_t)n, mc, SZ, ir, nins,
                           (uint32_t)rand() % (SZ + 64), refs, nsnap, starts);
        for (uint32_t k = 0; k < nsnap; k++) {
            cr_assert(starts[k] <= SZ, "start %u of snapshot %u outside %u", starts[k], k, SZ);
            cr_assert(k ? starts[k] >= starts[k - 1] : starts[0] == 0, "starts not ordered");
        }
        free(ir);
    }
    free(mc);
}

/* ---- runtime.c: the prototype cache and reused memory ---- */

/* A prototype freed and one of the same shape allocated at its address,
 * with its chunk name's string at the old string's address too, has the
 * old header to the byte (rl_torn named frames from older generations so).
 * The cache must tell them apart by the string. The "target" is this
 * process: a GC64 prototype header and a GCstr in buffers. */
Test(luajit_garbage, reused_prototype_is_read_again)
{
    struct ss_lj_elfinfo info;
    struct ss_err err = {0};
    struct ss_target_live tl;
    struct ss_mem mem;
    own_target(&info, &tl, &mem);
    struct ss_lj_runtime *rt;
    cr_assert_eq(ss_lj_runtime_new(&rt, &info, 0, (uint32_t)getpid(), &err), 0);
    const struct lj_layout *lay = NULL;
    for (unsigned i = 0; i < ss_lj_nlayouts && !lay; i++)
        if (ss_lj_layouts[i].gc64) lay = &ss_lj_layouts[i];
    cr_assert_not_null(lay);
    rt->lay = lay;
    /* (the walker reads a chunk name's first 280 bytes at once: room for
     * all of them, or the read may cross into an unmapped page) */
    static uint64_t pt[64], str[64];
    uint8_t *p = (uint8_t *)pt, *s = (uint8_t *)str;
    memset(pt, 0, sizeof(pt));
    p[lay->gct] = LJ_GCT_PROTO;
    *(uint32_t *)(p + lay->pt_sizebc) = 2;
    *(uint32_t *)(p + lay->pt_sizept) = lay->pt_size + 8;
    *(uint64_t *)(p + lay->pt_chunkname) = (uint64_t)(uintptr_t)s;
    *(uint32_t *)(p + lay->pt_firstline) = 1;
    memset(str, 0, sizeof(str));
    s[lay->gct] = LJ_GCT_STR;
    *(uint32_t *)(s + lay->str_len) = 6;
    memcpy(s + lay->str_data, "=gen17", 7);
    uint64_t a = (uint64_t)(uintptr_t)p;

    struct lj_proto *first = ss_lj_proto(rt, &mem, a, NULL);
    cr_assert_not_null(first);
    cr_assert_str_eq(first->chunk, "gen17");
    cr_assert_str_eq(ss_lj_proto(rt, &mem, a, NULL)->chunk, "gen17"); /* a hit */
    memcpy(s + lay->str_data, "=gen18", 7); /* the new generation's name, same place */
    s[lay->str_len - 4] ^= 0x5a;            /* and its hash */
    struct lj_proto *again = ss_lj_proto(rt, &mem, a, NULL);
    cr_assert_not_null(again);
    cr_expect_str_eq(again->chunk, "gen18");
    struct ss_lj_stats st;
    ss_lj_runtime_stats(rt, &st);
    cr_expect_eq(st.proto_hits, 1);
    cr_expect_eq(st.proto_renamed, 1);
    ss_lj_runtime_free(rt);
}
