/* snapfile/ljcodec.c: the payload of the LuaJIT detection record (type 12,
 * docs/capture-format.md): a file's struct ss_lj_elfinfo as live computed
 * it, so replay does not disassemble the VM again.
 *
 * u32 detver, bid build_id, u64 fsize; when detver is SS_LJ_DETECT_VERSION
 * (1): u8 bits (1 is_luajit, 2 vm_found, 4 gc64), u64 vm_lo, u64 vm_hi,
 * u32 vm_cfa_off, u32 hints, u32 checks, str version, u32 nstfn (<= 8),
 * nstfn x (u64 lo, u64 hi, u32 state), u64 exit_ret, u64 exit_lo,
 * u64 exit_body, then the derived facts: u32 have, i32 g2disp, i32 g2j,
 * u32 L_glref, L_base, L_top, L_cframe, L_status, G_vmstate, G_cur_L,
 * G_jit_base, G_gc_total, J_trace, T_mcode, cf_size, cf_L, cf_pc, cf_prev,
 * cf_nres, nentries; since detver 2, str derive_why (the first detection or
 * derivation step that failed). Another detver's fields are not decoded. */
#include <errno.h>

#include "snapfile/format.h"

/* The derived facts after have, g2disp and g2j, in payload order. */
#define NDERIVED 17
static uint32_t *derived_field(struct ss_lj_derived *d, unsigned i)
{
    uint32_t *f[NDERIVED] = {
        &d->L_glref, &d->L_base,     &d->L_top,      &d->L_cframe, &d->L_status, &d->G_vmstate,
        &d->G_cur_L, &d->G_jit_base, &d->G_gc_total, &d->J_trace,  &d->T_mcode,  &d->cf_size,
        &d->cf_L,    &d->cf_pc,      &d->cf_prev,    &d->cf_nres,  &d->nentries};
    return f[i];
}

void snap_enc_ljdet(struct snap_buf *b, const struct ss_snap_ljdet *x)
{
    const struct ss_lj_elfinfo *in = &x->info;
    snap_put_u32(b, x->detver);
    snap_put_u8(b, x->build_id_len);
    snap_put(b, x->build_id, x->build_id_len);
    snap_put_u64(b, x->fsize);
    if (x->detver != SS_LJ_DETECT_VERSION) return;
    snap_put_u8(b,
                (uint8_t)((in->is_luajit ? 1 : 0) | (in->vm_found ? 2 : 0) | (in->gc64 ? 4 : 0)));
    snap_put_u64(b, in->vm_lo);
    snap_put_u64(b, in->vm_hi);
    snap_put_u32(b, in->vm_cfa_off);
    snap_put_u32(b, in->hints);
    snap_put_u32(b, in->checks);
    snap_put_strn(b, in->version, sizeof(in->version) - 1);
    uint32_t n = in->nstfn <= SS_LJ_STFN_MAX ? in->nstfn : SS_LJ_STFN_MAX;
    snap_put_u32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        snap_put_u64(b, in->stfn[i].lo);
        snap_put_u64(b, in->stfn[i].hi);
        snap_put_u32(b, in->stfn[i].state);
    }
    snap_put_u64(b, in->exit_ret);
    snap_put_u64(b, in->exit_lo);
    snap_put_u64(b, in->exit_body);
    struct ss_lj_derived d = in->derived;
    snap_put_u32(b, d.have);
    snap_put_u32(b, (uint32_t)d.g2disp);
    snap_put_u32(b, (uint32_t)d.g2j);
    for (unsigned i = 0; i < NDERIVED; i++)
        snap_put_u32(b, *derived_field(&d, i));
    snap_put_strn(b, in->derive_why, sizeof(in->derive_why) - 1);
}

/* ---- LuaJIT runtime (13): u32 pid, u32 flags, bid build_id, u64 bias,
 * str path, str found, str layout ---- */
void snap_enc_ljrt(struct snap_buf *b, const struct ss_snap_ljrt *x)
{
    snap_put_u32(b, x->pid);
    snap_put_u32(b, x->flags);
    snap_put_u8(b, x->build_id_len);
    snap_put(b, x->build_id, x->build_id_len);
    snap_put_u64(b, x->bias);
    snap_put_str(b, x->path ? x->path : "");
    snap_put_str(b, x->found ? x->found : "");
    snap_put_str(b, x->layout ? x->layout : "");
}

int snap_dec_ljrt(struct snap_cur *c, struct ss_snap_ljrt *x, const char **why)
{
    memset(x, 0, sizeof(*x));
    x->pid = snap_get_u32(c);
    x->flags = snap_get_u32(c);
    x->build_id_len = snap_get_u8(c);
    const uint8_t *id = x->build_id_len <= SS_SNAP_BUILD_ID_MAX && x->build_id_len
                            ? snap_get(c, x->build_id_len)
                            : NULL;
    if (id) memcpy(x->build_id, id, x->build_id_len);
    if (x->build_id_len > SS_SNAP_BUILD_ID_MAX) c->bad = true;
    x->bias = snap_get_u64(c);
    x->path = snap_get_str(c);
    x->found = snap_get_str(c);
    x->layout = snap_get_str(c);
    if (c->bad || (x->flags & ~15u)) {
        *why = "LuaJIT runtime record: bad fields";
        return -EBADMSG;
    }
    return 0;
}

int snap_dec_ljdet(struct snap_cur *c, struct ss_snap_ljdet *x, const char **why)
{
    struct ss_lj_elfinfo *in = &x->info;
    memset(x, 0, sizeof(*x));
    x->detver = snap_get_u32(c);
    x->build_id_len = snap_get_u8(c);
    const uint8_t *id = x->build_id_len && x->build_id_len <= SS_SNAP_BUILD_ID_MAX
                            ? snap_get(c, x->build_id_len)
                            : NULL;
    if (id) memcpy(x->build_id, id, x->build_id_len);
    x->fsize = snap_get_u64(c);
    if (!id || c->bad) {
        *why = "LuaJIT detection record: build-id missing";
        return -EBADMSG;
    }
    if (x->detver != SS_LJ_DETECT_VERSION) return 0; /* another version's fields: not ours */
    uint8_t bits = snap_get_u8(c);
    in->is_luajit = bits & 1;
    in->vm_found = bits & 2;
    in->gc64 = bits & 4;
    in->vm_lo = snap_get_u64(c);
    in->vm_hi = snap_get_u64(c);
    in->vm_cfa_off = snap_get_u32(c);
    in->hints = snap_get_u32(c);
    in->checks = snap_get_u32(c);
    snap_get_str_into(c, in->version, sizeof(in->version));
    in->nstfn = snap_get_u32(c);
    if (in->nstfn > SS_LJ_STFN_MAX) c->bad = true;
    for (uint32_t i = 0; !c->bad && i < in->nstfn; i++) {
        in->stfn[i].lo = snap_get_u64(c);
        in->stfn[i].hi = snap_get_u64(c);
        in->stfn[i].state = snap_get_u32(c);
    }
    in->exit_ret = snap_get_u64(c);
    in->exit_lo = snap_get_u64(c);
    in->exit_body = snap_get_u64(c);
    struct ss_lj_derived *d = &in->derived;
    d->have = snap_get_u32(c);
    d->g2disp = (int32_t)snap_get_u32(c);
    d->g2j = (int32_t)snap_get_u32(c);
    for (unsigned i = 0; i < NDERIVED; i++)
        *derived_field(d, i) = snap_get_u32(c);
    snap_get_str_into(c, in->derive_why, sizeof(in->derive_why));
    if (c->bad || (bits & ~7u)) {
        *why = "LuaJIT detection record: bad fields";
        return -EBADMSG;
    }
    return 0;
}
