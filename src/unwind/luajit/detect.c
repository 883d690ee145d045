/* unwind/luajit/detect.c: does an ELF file embed LuaJIT, and where is its VM?
 *
 * Decided by content only (never by file name):
 *  - the file defines the Lua C API (lua_pcall) plus a LuaJIT-only symbol
 *    (luaJIT_setmode or luaopen_jit), in .dynsym or .symtab;
 *  - the VM's machine code is the one FDE under the "zPR" CIE that
 *    buildvm emits (personality lj_err_unwind_dwarf) with the exact
 *    instruction pattern def_cfa_offset 80|96, rbp@-16, rbx@-24, r15@-32,
 *    r14@-40 (vm_x64.dasc, emit_asm_debug); on arm64 (the ELF's machine,
 *    not the build's) lr@-8, fp@-16, x19@-24, x20@-32 under the CIE's
 *    CFA = x29 + 16 (vm_arm64.dasc), the cframe 208 bytes below the CFA;
 *  - the range is cross-checked: a direct call/jmp (arm64: bl/b) in
 *    lua_pcall, lua_call or lua_resume must land inside it (they enter
 *    lj_vm_pcall/call/resume);
 *  - GC64: read-only data holds "\x02le\x04gc64" (the ffi.abi table);
 *  - version: the "LuaJIT 2.x..." string in read-only data;
 *  - layout facts from the code of the VM entries (derive.c; arm64:
 *    derive_a64.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>

#include "elf/elf.h"
#include "stacksnap/ss_lj_luajit.h"
#include "unwind/luajit/derive.h"
#include "unwind/luajit/ehscan.h"
#include "unwind/luajit/layout.h"
#include "unwind/luajit/stfn.h"
#include "util/safeopen.h"

struct det {
    Elf *e;
    const char *path;
    uint64_t sym_pcall, sym_call, sym_resume;
    uint64_t sz_pcall, sz_call, sz_resume; /* symbol sizes (0: unknown) */
    bool has_setmode, has_openjit;
};

static void scan_symtab(struct det *d, Elf_Scn *scn, GElf_Shdr *sh, struct ss_lj_elfinfo *info)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    if (!data || sh->sh_entsize == 0) return;
    size_t n = sh->sh_size / sh->sh_entsize;
    for (size_t i = 0; i < n; i++) {
        GElf_Sym s;
        if (!gelf_getsym(data, (int)i, &s) || s.st_shndx == SHN_UNDEF) continue;
        const char *nm = elf_strptr(d->e, sh->sh_link, s.st_name);
        if (!nm) continue;
        if (ELF64_ST_TYPE(s.st_info) == STT_FUNC && s.st_size)
            ss_lj_stfn_symbol(info, nm, s.st_value, s.st_size);
        if (nm[0] != 'l') continue;
        if (!strcmp(nm, "luaM_metrics")) info->hints |= SS_LJ_HINT_MISC;
        if (!strcmp(nm, "lua_pcall"))
            d->sym_pcall = s.st_value, d->sz_pcall = s.st_size;
        else if (!strcmp(nm, "lua_call"))
            d->sym_call = s.st_value, d->sz_call = s.st_size;
        else if (!strcmp(nm, "lua_resume"))
            d->sym_resume = s.st_value, d->sz_resume = s.st_size;
        else if (!strcmp(nm, "luaJIT_setmode"))
            d->has_setmode = true;
        else if (!strcmp(nm, "luaopen_jit"))
            d->has_openjit = true;
        else if (!strcmp(nm, "lua_setexdata"))
            info->hints |= SS_LJ_HINT_EXDATA;
        else if (!strcmp(nm, "luaopen_string_buffer"))
            info->hints |= SS_LJ_HINT_STRBUF;
        else if (!strcmp(nm, "luaL_register_module"))
            info->hints |= SS_LJ_HINT_TARANTOOL;
    }
}

/* ---- .eh_frame ---- */

/* The FDE body buildvm writes after def_cfa_offset N. */
static const uint8_t vm_fde_regs[] = {0x86, 0x02, 0x83, 0x03, 0x8f, 0x04, 0x8e, 0x05};
/* arm64: the whole body is saved registers (the CIE has def_cfa x29, 16):
 * offset x30 1, x29 2, x19 3, x20 4 (data alignment -8) */
static const uint8_t vm_fde_a64[] = {0x9e, 0x01, 0x9d, 0x02, 0x93, 0x03, 0x94, 0x04};

struct vmscan {
    struct ss_lj_elfinfo *info;
    unsigned matches;
    bool a64; /* the ELF is arm64's */
};

/* An FDE under a "zPR" CIE (personality lj_err_unwind_dwarf) with the VM's
 * CFA pattern: def_cfa_offset 80|96, then the saved registers. */
static bool vm_fde(void *ctx, uint64_t begin, uint64_t range, const char *aug, const uint8_t *p,
                   const uint8_t *e)
{
    struct vmscan *v = ctx;
    if (v->a64) {
        if (!strcmp(aug, "zPR") && p + sizeof(vm_fde_a64) <= e &&
            !memcmp(p, vm_fde_a64, sizeof(vm_fde_a64))) {
            v->matches++;
            v->info->vm_lo = begin;
            v->info->vm_hi = begin + range;
            v->info->vm_cfa_off = LJ_A64_CFRAME_SIZE; /* cframe = CFA - 208 */
        }
        return false;
    }
    if (strcmp(aug, "zPR") || p + 2 + sizeof(vm_fde_regs) > e || p[0] != 0x0e) return false;
    p++;
    uint64_t cfa = ss_elf_uleb(&p, e);
    if ((cfa == 80 || cfa == 96) && p + sizeof(vm_fde_regs) <= e &&
        !memcmp(p, vm_fde_regs, sizeof(vm_fde_regs))) {
        v->matches++;
        v->info->vm_lo = begin;
        v->info->vm_hi = begin + range;
        v->info->vm_cfa_off = (uint32_t)cfa;
    }
    return false;
}

/* The VM range, when exactly one FDE has the VM's pattern. */
static void scan_eh_frame(const uint8_t *buf, size_t len, uint64_t sh_addr, bool a64,
                          struct ss_lj_elfinfo *info)
{
    struct vmscan v = {.info = info, .a64 = a64};
    ss_eh_each_fde(buf, len, sh_addr, vm_fde, &v);
    if (v.matches != 1) info->vm_lo = info->vm_hi = info->vm_cfa_off = 0;
}

const uint8_t *ss_lj_vaddr_bytes(Elf *e, uint64_t va, size_t len)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || sh.sh_type != SHT_PROGBITS)
            continue;
        if (va < sh.sh_addr || va + len > sh.sh_addr + sh.sh_size) continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf || d->d_size < sh.sh_size) return NULL;
        return (const uint8_t *)d->d_buf + (va - sh.sh_addr);
    }
    return NULL;
}

/* Does the function at va contain a call/jmp rel32 into [lo, hi)? The scan is
 * a byte scan of its first 512 bytes: a cross-check, not a disassembly.
 * arm64: a bl or b (imm26) among its first 128 instructions. */
static bool calls_into(Elf *e, uint64_t va, uint64_t lo, uint64_t hi, bool a64)
{
    if (!va) return false;
    size_t n = 512;
    const uint8_t *b = NULL;
    while (n >= 64 && !(b = ss_lj_vaddr_bytes(e, va, n)))
        n /= 2;
    if (!b) return false;
    for (size_t i = 0; a64 && i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, b + i, 4);
        if ((w & 0x7c000000u) != 0x14000000u) continue; /* b 0x14..., bl 0x94... */
        int64_t off = (int64_t)((int32_t)(w << 6) >> 6) * 4;
        uint64_t tgt = va + i + (uint64_t)off;
        if (tgt >= lo && tgt < hi) return true;
    }
    for (size_t i = 0; !a64 && i + 5 <= n; i++) {
        if (b[i] != 0xe8 && b[i] != 0xe9) continue;
        int32_t rel;
        memcpy(&rel, b + i + 1, 4);
        uint64_t tgt = va + i + 5 + (int64_t)rel;
        if (tgt >= lo && tgt < hi) return true;
    }
    return false;
}

/* vm_exit_handler (vm_x64.dasc and vm_x86.dasc, x64): push r13 .. r8, rdi,
 * rsi, rbp; lea rbp, [rsp+88]; push rbp, rbx, rdx, rcx, rax; sub rsp, 128
 * (room for the FPRs); later mov rsi, rsp (ExitState *) and call
 * lj_trace_exit. The return address of that call is what a native walk
 * sees in the handler's frame; from the end of the sub to the call, the
 * handler's own rsp is where that call leaves it. */
static void exit_handler(Elf *e, struct ss_lj_elfinfo *info)
{
    static const uint8_t pro[] = {0x41, 0x55, 0x41, 0x54, 0x41, 0x53, 0x41, 0x52, 0x41,
                                  0x51, 0x41, 0x50, 0x57, 0x56, 0x55, 0x48, 0x8d, 0x6c,
                                  0x24, 0x58, 0x55, 0x53, 0x52, 0x51, 0x50};
    static const uint8_t sub[] = {0x48, 0x81, 0xec, 0x80, 0x00, 0x00, 0x00};
    uint64_t lo = info->vm_lo, hi = info->vm_hi;
    if (hi <= lo || hi - lo > (1u << 20)) return;
    const uint8_t *b = ss_lj_vaddr_bytes(e, lo, hi - lo), *p;
    if (!b || !(p = memmem(b, hi - lo, pro, sizeof(pro)))) return;
    const uint8_t *end = p + 512 < b + (hi - lo) ? p + 512 : b + (hi - lo);
    const uint8_t *sb = memmem(p, (size_t)(end - p), sub, sizeof(sub));
    const uint8_t *mv = memmem(p, (size_t)(end - p), "\x48\x89\xe6", 3); /* mov rsi, rsp */
    for (const uint8_t *q = mv; q && q + 5 <= end; q++)
        if (*q == 0xe8) {
            info->exit_ret = lo + (uint64_t)(q - b) + 5;
            info->exit_lo = lo + (uint64_t)(p - b);
            if (sb && sb < mv) info->exit_body = lo + (uint64_t)(sb - b) + sizeof(sub);
            return;
        }
}

static void scan_rodata(Elf *e, struct ss_lj_elfinfo *info)
{
    static const char gc64[] = "\x02le\x04gc64";
    /* buildvm's library definitions: length-prefixed names in order */
    static const char lj52a[] = "\x08rawequal\x06rawlen";
    static const char lj52b[] = "\x0cgetuservalue\x0csetuservalue";
    Elf_Scn *scn = NULL;
    size_t shstrndx;
    if (elf_getshdrstrndx(e, &shstrndx)) return;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) ||
            (sh.sh_flags & (SHF_EXECINSTR | SHF_WRITE)))
            continue;
        const char *nm = elf_strptr(e, shstrndx, sh.sh_name);
        if (!nm || strncmp(nm, ".rodata", 7)) continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf) continue;
        if (memmem(d->d_buf, d->d_size, gc64, sizeof(gc64) - 1)) info->gc64 = true;
        if (memmem(d->d_buf, d->d_size, lj52a, sizeof(lj52a) - 1) &&
            memmem(d->d_buf, d->d_size, lj52b, sizeof(lj52b) - 1))
            info->hints |= SS_LJ_HINT_LJ52;
        const char *v = memmem(d->d_buf, d->d_size, "LuaJIT 2.", 9);
        if (v && !info->version[0]) {
            const char *end = (const char *)d->d_buf + d->d_size;
            size_t i = 0;
            /* "LuaJIT " then the version token up to a blank or NUL */
            while (v + i < end && i < sizeof(info->version) - 1 &&
                   ((unsigned char)v[i] > ' ' || i == 6))
                i++;
            memcpy(info->version, v, i);
            info->version[i] = 0;
        }
    }
}

/* The verdict for one opened ELF handle (see ss_lj_detect_file). */
static void detect_elf(Elf *e, const char *path, struct ss_lj_elfinfo *info)
{
    struct det d = {.e = e, .path = path};
    Elf_Scn *scn = NULL, *eh = NULL;
    GElf_Ehdr ehdr;
    bool a64 = gelf_getehdr(e, &ehdr) && ehdr.e_machine == EM_AARCH64;
    GElf_Shdr ehsh = {0};
    size_t shstrndx = 0;
    elf_getshdrstrndx(e, &shstrndx);
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh)) continue;
        if (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB) scan_symtab(&d, scn, &sh, info);
        const char *nm = elf_strptr(e, shstrndx, sh.sh_name);
        /* clang's integrated assembler and lld type it SHT_X86_64_UNWIND */
        if (nm && !strcmp(nm, ".eh_frame") &&
            (sh.sh_type == SHT_PROGBITS || sh.sh_type == SHT_X86_64_UNWIND)) {
            eh = scn;
            ehsh = sh;
        }
    }
    info->is_luajit = d.sym_pcall && (d.has_setmode || d.has_openjit);
    if (!info->is_luajit) return;
    scan_rodata(e, info);
    if (eh) {
        Elf_Data *data = elf_getdata(eh, NULL);
        if (data && data->d_buf) scan_eh_frame(data->d_buf, data->d_size, ehsh.sh_addr, a64, info);
    }
    if (!info->vm_hi)
        snprintf(info->derive_why, sizeof(info->derive_why), "%s",
                 eh ? "no single VM FDE (\"zPR\" CIE, the VM's CFA rule) in .eh_frame"
                    : "no .eh_frame");
    if (info->vm_hi) {
        uint64_t lo = info->vm_lo, hi = info->vm_hi;
        if (calls_into(e, d.sym_pcall, lo, hi, a64)) info->checks |= SS_LJ_CHECK_PCALL;
        if (calls_into(e, d.sym_call, lo, hi, a64)) info->checks |= SS_LJ_CHECK_CALL;
        if (calls_into(e, d.sym_resume, lo, hi, a64)) info->checks |= SS_LJ_CHECK_RESUME;
        info->vm_found = info->checks != 0;
        const uint64_t api[] = {d.sym_resume, d.sym_pcall, d.sym_call};
        const uint64_t apisz[] = {d.sz_resume, d.sz_pcall, d.sz_call};
        if (a64) { /* no state-switching functions from code (stfn.c is x86's) */
            if (info->vm_found) ss_lj_derive_a64(e, info, api, apisz, 3);
            return;
        }
        exit_handler(e, info);
        if (info->vm_found)
            ss_lj_derive(e, info, api, apisz, 3);
        else
            snprintf(info->derive_why, sizeof(info->derive_why),
                     "no call from lua_pcall/lua_call/lua_resume into the VM FDE's range");
        Elf_Data *data = eh ? elf_getdata(eh, NULL) : NULL;
        if (info->vm_found && data && data->d_buf)
            ss_lj_stfn_code(e, info, data->d_buf, data->d_size, ehsh.sh_addr);
    }
}

int ss_lj_detect_image(const uint8_t *img, size_t size, const char *name,
                       struct ss_lj_elfinfo *info, struct ss_err *err)
{
    memset(info, 0, sizeof(*info));
    elf_version(EV_CURRENT);
    Elf *e = elf_memory((char *)img, size);
    if (!e || elf_kind(e) != ELF_K_ELF) {
        if (e) elf_end(e);
        ss_err_set(err, -ENOEXEC, "luajit detect: %s is not an ELF file", name);
        return -ENOEXEC;
    }
    detect_elf(e, name, info);
    elf_end(e);
    return 0;
}

int ss_lj_detect_file(const char *path, struct ss_lj_elfinfo *info, struct ss_err *err)
{
    memset(info, 0, sizeof(*info));
    int fd = ss_open_regular(path);
    if (fd < 0) {
        int rc = fd;
        ss_err_set(err, rc, "luajit detect: open %s: %s", path, strerror(-rc));
        return rc;
    }
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF) {
        if (e) elf_end(e);
        close(fd);
        ss_err_set(err, -ENOEXEC, "luajit detect: %s is not an ELF file", path);
        return -ENOEXEC;
    }
    detect_elf(e, path, info);
    elf_end(e);
    close(fd);
    return 0;
}
