/* unwind/luajit/diagnostics.c: the diagnostics of a LuaJIT runtime as text, for
 * `record -v` and the capture's LuaJIT runtime records (`info`): what
 * detection and layout derivation made of the file, the layout the run-time
 * self-checks chose (a table row, or derived from the code), and when
 * something failed, which fact and why. */
#include <stdio.h>
#include <string.h>

#include "unwind/luajit/runtime.h"

size_t ss_lj_found_text(const struct ss_lj_elfinfo *in, char *buf, size_t cap)
{
    const struct ss_lj_derived *d = &in->derived;
    char groups[96] = "";
    if (d->have & SS_LJ_D_ENTRY)
        snprintf(groups, sizeof(groups), "VM entries (%u)%s%s%s", d->nentries,
                 d->have & SS_LJ_D_GC ? ", GC checks" : "",
                 d->have & SS_LJ_D_EXIT ? ", exit handler" : "",
                 d->have & SS_LJ_D_JLOOP ? ", BC_JLOOP" : "");
    const char *kind = in->hints & SS_LJ_HINT_MISC        ? ", Tarantool's LuaJIT fork"
                       : in->hints & SS_LJ_HINT_TARANTOOL ? ", Tarantool"
                       : in->hints & SS_LJ_HINT_EXDATA    ? ", OpenResty luajit2"
                                                          : "";
    if (!in->vm_found) {
        int n = snprintf(buf, cap, "%s%s, %s; VM not found: %s",
                         in->version[0] ? in->version : "unknown version", kind,
                         in->gc64 ? "GC64" : "non-GC64",
                         in->derive_why[0] ? in->derive_why : "no reason recorded");
        return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap ? cap - 1 : 0;
    }
    /* arm64 (detect.c): CFA = x29 + 16, the cframe 208 bytes below */
    bool a64 = in->vm_cfa_off == LJ_A64_CFRAME_SIZE;
    int n = snprintf(
        buf, cap,
        "%s%s, %s, %s, VM 0x%llx-0x%llx (%s%u, confirmed by%s%s%s); "
        "facts derived from the code: %s%s%s",
        in->version[0] ? in->version : "unknown version", kind, in->gc64 ? "GC64" : "non-GC64",
        a64 && in->exit_lo ? "arm64, JIT"
        : a64              ? "arm64, no JIT"
        : in->exit_lo      ? "JIT"
                           : "no JIT",
        (unsigned long long)in->vm_lo, (unsigned long long)in->vm_hi,
        a64 ? "CFA x29+16, cframe CFA-" : "CFA rsp+", in->vm_cfa_off,
        in->checks & SS_LJ_CHECK_PCALL ? " lua_pcall" : "",
        in->checks & SS_LJ_CHECK_CALL ? " lua_call" : "",
        in->checks & SS_LJ_CHECK_RESUME ? " lua_resume" : "", groups[0] ? groups : "none",
        in->derive_why[0] ? "; failed: " : "", in->derive_why);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap ? cap - 1 : 0;
}

size_t ss_lj_layout_text(const struct ss_lj_runtime *rt, char *buf, size_t cap)
{
    int n;
    if (rt->lay) {
        bool row = rt->lay != &rt->dlay;
        n = snprintf(buf, cap, "layout %s (%s), %s, %s", rt->lay->name,
                     !rt->lay_derived ? "table row; the facts derived from the code did not verify"
                     : row            ? "derived from the code, equal to this table row"
                                      : "derived from the code, no table row equals it",
                     rt->lay->gc64 ? "GC64" : "non-GC64", rt->lay->nojit ? "no JIT" : "JIT");
    } else if (rt->diag[0]) {
        n = snprintf(buf, cap, "%s", rt->diag);
    } else if (rt->verify_fail) {
        n = snprintf(buf, cap, "no layout yet: %u global states did not verify (last: %s)",
                     rt->verify_fail, rt->last_reject);
    } else {
        n = snprintf(buf, cap, "no layout yet (no global state seen)");
    }
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap ? cap - 1 : 0;
}
