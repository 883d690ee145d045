/* test/fuzz/elf_fuzz.c: libFuzzer target for hostile ELF files as mapped
 * modules. Each input is an ELF image:
 *  1. ss_lj_detect_image (LuaJIT detection: symbols, .eh_frame "zPR" FDE,
 *     call cross-check, .rodata strings);
 *  2. an offline unwinder gets one process that maps the image the way the
 *     loader would (one mapping per PT_LOAD, from the image's own program
 *     headers) plus a stack, the file served through a memfd like a
 *     capture's bundle; then a fixed stack snapshot (return addresses into
 *     the executable mappings, frame pointers, zeros) is unwound from
 *     several ips, one inside the LuaJIT VM range when detection found one.
 *     That runs process/ (biases, file ranges, RELRO), elf/ (.eh_frame_hdr,
 *     .debug_frame, symbols, debuglink, MiniDebugInfo), the rule cache and
 *     libunwind over the image's CFI, symbolization and the LuaJIT splice.
 * Debug files are looked up under a root that does not exist. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elf/elf.h"
#include "process/process.h"
#include "stacksnap/ss_lj_luajit.h"
#include "stacksnap/unwind.h"

#define BASE 0x7f1200000000ull
#define STACK_LO 0x7ffd00000000ull
#define STACK_LEN 0x10000ull
#define SNAP_LEN 4096u
#define MAX_MAPS 10
#define PATH "/ss-fuzz-nonexistent/libtarget.so"

static volatile size_t sink;

struct fctx {
    int fd;
};

static int resolve(void *ctx, const struct ss_map_desc *m)
{
    struct fctx *f = ctx;
    if (strcmp(m->path, PATH)) return -ENOENT;
    int fd = dup(f->fd);
    return fd < 0 ? -errno : fd;
}

/* Mappings as the loader would make them from the image's PT_LOADs. */
static size_t make_maps(const uint8_t *img, size_t size, struct ss_map_desc *maps)
{
    size_t n = 0;
    uint8_t *copy = malloc(size);
    struct ss_elf *e = copy ? ss_elf_open_image(memcpy(copy, img, size), size, 1, "probe") : NULL;
    if (!e) free(copy);
    uint64_t next = BASE;
    for (unsigned i = 0; e && i < e->nload && n < MAX_MAPS - 1; i++) {
        const struct ss_elf_seg *s = &e->load[i];
        uint64_t lo = s->vaddr & ~0xfffull, hi = (s->vaddr + s->memsz + 0xfff) & ~0xfffull;
        if (s->memsz > (64u << 20) || s->vaddr > (1ull << 40) || hi <= lo) continue;
        if (BASE + lo < next) continue; /* overlaps the previous one: keep sorted */
        maps[n] = (struct ss_map_desc){
            .start = BASE + lo,
            .end = BASE + hi,
            .offset = s->offset & ~0xfffull,
            .inode = 77,
            .dev_major = 8,
            .dev_minor = 1,
            .prot = ((s->flags & 4) ? SS_MAP_R : 0) | ((s->flags & 2) ? SS_MAP_W : 0) |
                    ((s->flags & 1) ? SS_MAP_X : 0),
            .path = PATH,
        };
        next = maps[n].end;
        n++;
    }
    if (e) ss_elf_close_image(e);
    if (n == 0) /* no usable program headers: the whole file, executable */
        maps[n++] = (struct ss_map_desc){.start = BASE,
                                         .end = BASE + ((size + 0xfff) & ~0xfffull),
                                         .inode = 77,
                                         .dev_major = 8,
                                         .dev_minor = 1,
                                         .prot = SS_MAP_R | SS_MAP_X,
                                         .path = PATH};
    maps[n++] = (struct ss_map_desc){.start = STACK_LO,
                                     .end = STACK_LO + STACK_LEN,
                                     .prot = SS_MAP_R | SS_MAP_W,
                                     .path = "[stack]"};
    return n;
}

static void check_stack(const struct ss_stack *st)
{
    if (st->nframes > 512 + 64) abort();
    for (uint32_t i = 0; i < st->nframes; i++) {
        const struct ss_frame *f = &st->frames[i];
        if (f->name) sink += strlen(f->name);
        if (f->module) sink += strlen(f->module);
        if (f->build_id_len > 20) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 64 || size > (4u << 20)) return 0;

    /* 1. detection on a private copy (libelf may convert in place) */
    uint8_t *copy = malloc(size);
    if (!copy) return 0;
    memcpy(copy, data, size);
    struct ss_lj_elfinfo info;
    if (ss_lj_detect_image(copy, size, "fuzz", &info, NULL) == 0)
        sink += info.is_luajit + info.vm_found + strlen(info.version);
    free(copy);

    /* 2. the image as a mapped module of an offline process */
    struct fctx f = {.fd = memfd_create("ss-elf-fuzz", MFD_CLOEXEC)};
    if (f.fd < 0) return 0;
    if (write(f.fd, data, size) != (ssize_t)size) {
        close(f.fd);
        return 0;
    }
    struct ss_map_desc maps[MAX_MAPS];
    size_t nmaps = make_maps(data, size, maps);

    struct ss_unwinder *u;
    struct ss_unwinder_opts uo = {.offline = true, .debug_root = "/ss-fuzz-nonexistent"};
    if (ss_unwinder_new(&u, &uo, NULL) < 0) {
        close(f.fd);
        return 0;
    }
    if (ss_unwinder_add_process(u, 1234, "fuzz", maps, nmaps, resolve, &f, NULL) == 0) {
        /* the fixed snapshot: return addresses into each executable mapping,
         * frame pointers further up the stack, zeros */
        static uint64_t snap[SNAP_LEN / 8];
        uint64_t sp = STACK_LO + STACK_LEN - SNAP_LEN - 0x100;
        uint64_t xlo[MAX_MAPS], xlen[MAX_MAPS];
        unsigned nx = 0;
        for (size_t i = 0; i < nmaps; i++)
            if (maps[i].prot & SS_MAP_X) {
                xlo[nx] = maps[i].start;
                xlen[nx++] = maps[i].end - maps[i].start;
            }
        for (unsigned i = 0; i < SNAP_LEN / 8; i++) {
            switch (i % 4) {
            case 0:
                snap[i] = nx ? xlo[i % nx] + (i * 0x47u) % xlen[i % nx] : 0;
                break;
            case 1:
                snap[i] = sp + 8 * (i + 3);
                break;
            case 2:
                snap[i] = nx ? xlo[0] + 0x1000 + i : i;
                break;
            default:
                snap[i] = 0;
            }
        }
        uint64_t ips[6];
        unsigned nip = 0;
        for (unsigned k = 0; k < nx && nip < 4; k++) {
            ips[nip++] = xlo[k] + 0x10 % xlen[k];
            ips[nip++] = xlo[k] + (xlen[k] / 2);
        }
        if (info.vm_found && info.vm_lo < (1ull << 40)) ips[nip++] = BASE + info.vm_lo + 8;
        if (!nip) ips[nip++] = BASE;
        for (unsigned k = 0; k < nip; k++) {
            struct ss_sample s = {.pid = 1234, .tid = 1234, .stack = (const uint8_t *)snap};
            for (int r = 0; r < SS_NREGS; r++)
                s.regs[r] = sp + 64 * r;
            s.regs[SS_REG_IP] = ips[k];
            s.regs[SS_REG_SP] = sp;
            s.regs[SS_REG_BP] = sp + 0x40;
            s.stack_len = s.stack_req = SNAP_LEN;
            struct ss_stack st;
            ss_unwinder_intake(u, &s);
            if (ss_unwind(u, &s, &st) == 0) check_stack(&st);
        }
    }
    ss_unwinder_free(u);
    close(f.fd);
    return 0;
}
