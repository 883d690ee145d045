/* bench/truth.c: what a correct stack of each bench workload is.
 *
 * Every profiler is judged by the same rules on the addresses it reports:
 *  - "root": the chain reaches the program's main() (found by symbol, or in
 *    a stripped executable from _start's `lea main(%rip), %rdi`), and for
 *    the C workload every frame above main is one of its own functions;
 *  - "full" (C workload): exactly bn_leaf, bn_d40 x37, bn_run, main;
 *  - Lua: the Lua frames, leaf first, are leaf (first line 1), rec x19
 *    (line 2) and the main chunk (line 0) of bench/workload.lua. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static const char *const fn_names[3] = {"bn_leaf", "bn_d40", "bn_run"};

/* Executable mappings of pid's exe: bias, [lo, hi). */
static int exe_maps(struct bn_truth *t, uint64_t *start0)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)t->pid);
    FILE *f = fopen(path, "r");
    if (!f) return -errno;
    *start0 = 0;
    t->exe_lo = UINT64_MAX;
    t->exe_hi = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long lo, hi, off;
        int pos = 0;
        if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &lo, &hi, &off, &pos) < 3 || !pos)
            continue;
        char *p = line + pos;
        p[strcspn(p, "\n")] = 0;
        if (strcmp(p, t->exe)) continue;
        if (off == 0 && !*start0) *start0 = lo;
        if (lo < t->exe_lo) t->exe_lo = lo;
        if (hi > t->exe_hi) t->exe_hi = hi;
    }
    fclose(f);
    return *start0 ? 0 : -ENOENT;
}

/* File bytes at virtual address va (within one PT_LOAD). */
static int read_va(Elf *e, int fd, uint64_t va, uint8_t *buf, size_t len)
{
    size_t n;
    if (elf_getphdrnum(e, &n)) return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD) continue;
        if (va < ph.p_vaddr || va + len > ph.p_vaddr + ph.p_filesz) continue;
        return pread(fd, buf, len, (off_t)(ph.p_offset + va - ph.p_vaddr)) == (ssize_t)len ? 0
                                                                                           : -EIO;
    }
    return -ENOENT;
}

/* main from _start: lea disp32(%rip), %rdi (PIE) or mov $imm32, %rdi. */
static uint64_t main_from_start(Elf *e, int fd, uint64_t entry)
{
    uint8_t b[64];
    if (read_va(e, fd, entry, b, sizeof(b))) return 0;
    for (size_t i = 0; i + 7 <= sizeof(b); i++) {
        if (b[i] == 0x48 && b[i + 1] == 0x8d && b[i + 2] == 0x3d) {
            int32_t d;
            memcpy(&d, b + i + 3, 4);
            return entry + i + 7 + (int64_t)d;
        }
        if (b[i] == 0x48 && b[i + 1] == 0xc7 && b[i + 2] == 0xc7) {
            uint32_t v;
            memcpy(&v, b + i + 3, 4);
            return v;
        }
    }
    return 0;
}

static uint64_t first_load_vaddr(Elf *e)
{
    size_t nph = 0;
    elf_getphdrnum(e, &nph);
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) return ph.p_vaddr & ~0xfffull;
    }
    return 0;
}

int bn_exe_bias(pid_t pid, char *exe, size_t len, uint64_t *bias)
{
    struct bn_truth t = {.pid = pid};
    char link[64];
    snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, t.exe, sizeof(t.exe) - 1);
    if (n <= 0) return -errno;
    t.exe[n] = 0;
    uint64_t start0;
    int r = exe_maps(&t, &start0);
    if (r) return r;
    elf_version(EV_CURRENT);
    int fd = open(t.exe, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    *bias = start0 - (e ? first_load_vaddr(e) : 0);
    if (e) elf_end(e);
    close(fd);
    snprintf(exe, len, "%s", t.exe);
    return 0;
}

int bn_truth_init(struct bn_truth *t, pid_t pid, bool native, char *msg, size_t len)
{
    char link[64];
    memset(t, 0, sizeof(*t));
    t->pid = pid;
    t->native = native;
    t->lua_first[0] = 1;
    for (int i = 1; i < BN_LUA_DEPTH - 1; i++)
        t->lua_first[i] = 2;
    t->lua_first[BN_LUA_DEPTH - 1] = 0;
    t->lua_chunk = "workload.lua";
    snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, t->exe, sizeof(t->exe) - 1);
    if (n <= 0) {
        snprintf(msg, len, "%s: %s", link, strerror(errno));
        return -errno;
    }
    t->exe[n] = 0;
    uint64_t start0;
    int r = exe_maps(t, &start0);
    if (r) {
        snprintf(msg, len, "/proc/%d/maps: no mapping of %s", (int)pid, t->exe);
        return r;
    }
    elf_version(EV_CURRENT);
    int fd = open(t->exe, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(msg, len, "%s: %s", t->exe, strerror(errno));
        return -errno;
    }
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    GElf_Ehdr eh;
    if (!e || !gelf_getehdr(e, &eh)) {
        snprintf(msg, len, "%s: not ELF", t->exe);
        if (e) elf_end(e);
        close(fd);
        return -EINVAL;
    }
    /* bias: the mapping of file offset 0 holds the first PT_LOAD */
    t->bias = start0 - first_load_vaddr(e);
    /* symbols: main and the C workload's functions; every function start
     * bounds main's end when main has no size */
    uint64_t main_lo = 0, main_sz = 0, next = UINT64_MAX;
    uint64_t *all = NULL;
    size_t nall = 0, cap = 0;
    Elf_Scn *s = NULL;
    while ((s = elf_nextscn(e, s))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(s, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
            continue;
        Elf_Data *d = elf_getdata(s, NULL);
        size_t cnt = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
        for (size_t i = 0; d && i < cnt; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
                !sym.st_value)
                continue;
            const char *nm = elf_strptr(e, sh.sh_link, sym.st_name);
            if (!nm) continue;
            if (!strcmp(nm, "main")) {
                main_lo = sym.st_value;
                main_sz = sym.st_size;
            }
            for (int k = 0; k < 3; k++)
                if (!strcmp(nm, fn_names[k])) {
                    t->fn_lo[k] = t->bias + sym.st_value;
                    t->fn_hi[k] = t->fn_lo[k] + sym.st_size;
                }
            if (nall == cap) {
                uint64_t *na = realloc(all, (cap = cap ? 2 * cap : 1024) * sizeof(*all));
                if (!na) break;
                all = na;
            }
            all[nall++] = sym.st_value;
        }
    }
    if (!main_lo) main_lo = main_from_start(e, fd, eh.e_entry);
    for (size_t i = 0; i < nall; i++)
        if (main_lo && all[i] > main_lo && all[i] < next) next = all[i];
    free(all);
    elf_end(e);
    close(fd);
    if (!main_lo) {
        snprintf(msg, len, "%s: main() not found (no symbol, _start not understood)", t->exe);
        return -ENOENT;
    }
    if (!main_sz) {
        uint64_t hi = main_lo + 0x1000;
        if (next < hi) hi = next;
        if (eh.e_entry > main_lo && eh.e_entry < hi) hi = eh.e_entry;
        main_sz = hi - main_lo;
    }
    t->main_lo = t->bias + main_lo;
    t->main_hi = t->main_lo + main_sz;
    if (native && (!t->fn_lo[0] || !t->fn_lo[1] || !t->fn_lo[2])) {
        snprintf(msg, len, "%s: bn_leaf/bn_d40/bn_run not found", t->exe);
        return -ENOENT;
    }
    return 0;
}

static int which_fn(const struct bn_truth *t, uint64_t ip)
{
    for (int k = 0; k < 3; k++)
        if (ip >= t->fn_lo[k] && ip < t->fn_hi[k]) return k;
    return -1;
}

bool bn_truth_root(const struct bn_truth *t, const uint64_t *ips, size_t n, bool *full)
{
    size_t m = n;
    *full = false;
    for (size_t i = 0; i < n; i++)
        if (ips[i] >= t->main_lo && ips[i] < t->main_hi) {
            m = i;
            break;
        }
    if (m == n) return false;
    if (!t->native) return true;
    for (size_t i = 0; i < m; i++)
        if (which_fn(t, ips[i]) < 0) return false;
    if (m != 39) return true;
    bool ok = which_fn(t, ips[0]) == 0 && which_fn(t, ips[38]) == 2;
    for (size_t i = 1; ok && i < 38; i++)
        ok = which_fn(t, ips[i]) == 1;
    *full = ok;
    return true;
}

bool bn_truth_lua(const struct bn_truth *t, const int32_t *first, const char *const *chunk,
                  size_t n)
{
    if (n != BN_LUA_DEPTH) return false;
    size_t sl = strlen(t->lua_chunk);
    for (size_t i = 0; i < n; i++) {
        if (first[i] != t->lua_first[i] || !chunk[i]) return false;
        size_t cl = strlen(chunk[i]);
        if (cl < sl || strcmp(chunk[i] + cl - sl, t->lua_chunk)) return false;
    }
    return true;
}
