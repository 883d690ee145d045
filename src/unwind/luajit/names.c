/* unwind/luajit/names.c: the text of one walked Lua frame: NAME, chunk,
 * current line, first line.
 *
 * Function names are derived from the caller's bytecode the way
 * lj_debug_funcname/lj_debug_slotname do (local names from varinfo, GGET
 * global names, TGETS field/method names, UGET upvalue names, MOV chains,
 * metamethods), then enriched where the bytecode shows more: the table of a
 * TGETS is named too (`M.run`, `obj:method`). A main chunk is `main`,
 * a function whose name cannot be derived `anonymous`, a fast function its
 * library name (`string.rep`). Names are cached per (prototype, call
 * position) inside the prototype cache entry, which is validated on every
 * use (runtime.c). */
#include <stdio.h>
#include <string.h>

#include "elf/elf.h"
#include "unwind/luajit/layout.h"
#include "unwind/luajit/ljops.h"
#include "unwind/luajit/runtime.h"
#include "unwind/luajit/frames.h"
#include "unwind/luajit/names.h"

/* Opcode modes (lj_bc.h BCDEF, identical in every supported tree):
 * amode 1 = dst, 2 = base, 0 = other; mm = metamethod or "___". */
static const struct {
    uint8_t amode;
    const char *mm;
} bcmode[] = {
    {0, "lt"},       {0, "lt"},       {0, "le"},       {0, "le"},       {0, "eq"},
    {0, "eq"},       {0, "eq"},       {0, "eq"},       {0, "eq"},       {0, "eq"},
    {0, "eq"},       {0, "eq"},       {1, "___"},      {1, "___"},      {0, "___"},
    {0, "___"},      {0, "___"},      {0, "___"},      {1, "___"},      {1, "___"},
    {1, "unm"},      {1, "len"},      {1, "add"},      {1, "sub"},      {1, "mul"},
    {1, "div"},      {1, "mod"},      {1, "add"},      {1, "sub"},      {1, "mul"},
    {1, "div"},      {1, "mod"},      {1, "add"},      {1, "sub"},      {1, "mul"},
    {1, "div"},      {1, "mod"},      {1, "pow"},      {1, "concat"},   {1, "___"},
    {1, "___"},      {1, "___"},      {1, "___"},      {1, "___"},      {2, "___"},
    {1, "___"},      {0, "___"},      {0, "___"},      {0, "___"},      {0, "___"},
    {0, "___"},      {1, "gc"},       {1, "gc"},       {1, "gc"},       {1, "index"},
    {0, "newindex"}, {1, "index"},    {1, "index"},    {1, "index"},    {1, "index"},
    {0, "newindex"}, {0, "newindex"}, {0, "newindex"}, {2, "newindex"}, {0, "newindex"},
    {2, "call"},     {2, "call"},     {2, "call"},     {2, "call"},     {2, "call"},
    {2, "call"},     {2, "___"},      {2, "___"},      {2, "___"},      {0, "___"},
    {0, "___"},      {0, "___"},      {2, "___"},      {2, "___"},      {2, "___"},
    {2, "___"},      {2, "___"},      {2, "___"},      {2, "___"},      {2, "___"},
    {0, "___"},      {0, "___"},      {0, "___"},      {0, "___"},      {0, "___"},
    {0, "___"},      {0, "___"},      {0, "___"},      {0, "___"},      {0, "___"},
    {0, "___"},      {0, "___"},
};
#define BC_MAX ((unsigned)(sizeof(bcmode) / sizeof(bcmode[0]))) /* 97 */

static inline unsigned op_of(uint32_t i)
{
    return i & 0xff;
}
static inline unsigned a_of(uint32_t i)
{
    return (i >> 8) & 0xff;
}
static inline unsigned c_of(uint32_t i)
{
    return (i >> 16) & 0xff;
}
static inline unsigned b_of(uint32_t i)
{
    return i >> 24;
}
static inline unsigned d_of(uint32_t i)
{
    return i >> 16;
}

struct nctx {
    struct ss_lj_runtime *rt;
    struct ss_mem *m;
    const struct lj_proto *p;
};

static uint32_t ins_at(const struct nctx *c, uint32_t pos)
{
    return lj_u32(c->p->blob + c->rt->lay->pt_size + (size_t)pos * 4);
}

/* Blob range of an MRef field of the prototype up to the blob's end. */
static const uint8_t *blob_ptr(const struct nctx *c, uint32_t field, const uint8_t **end)
{
    uint64_t a = lj_ref(c->rt->lay, c->p->blob + field);
    *end = c->p->blob + c->p->sizept;
    if (!a || a < c->p->addr || a >= c->p->addr + c->p->sizept) return NULL;
    return c->p->blob + (a - c->p->addr);
}

/* debug_varname: name of local `slot` live at pc, or NULL (internal names
 * such as "(for index)" count as no name here). */
static const char *varname(const struct nctx *c, uint32_t pc, uint32_t slot, size_t *len)
{
    const uint8_t *end, *q = blob_ptr(c, c->rt->lay->pt_varinfo, &end);
    uint32_t lastpc = 0;
    if (!q) return NULL;
    for (int guard = 0; q < end && guard < 65536; guard++) {
        const uint8_t *name = q;
        uint32_t vn = *q;
        if (vn < 7) {
            if (vn == 0) break;
            q++;
        } else {
            while (q < end && *q)
                q++;
            q++;
        }
        uint32_t startpc = lastpc = lastpc + (uint32_t)ss_elf_uleb(&q, end);
        if (startpc > pc) break;
        uint32_t endpc = startpc + (uint32_t)ss_elf_uleb(&q, end);
        if (pc < endpc && slot-- == 0) {
            if (vn < 7) return NULL;
            *len = strnlen((const char *)name, (size_t)(end - name));
            return (const char *)name;
        }
    }
    return NULL;
}

static const char *uvname(const struct nctx *c, uint32_t idx, size_t *len)
{
    const uint8_t *end, *q = blob_ptr(c, c->rt->lay->pt_uvinfo, &end);
    if (!q || idx >= c->p->sizeuv) return NULL;
    while (idx && q < end)
        if (*q++ == 0) idx--;
    if (q >= end) return NULL;
    *len = strnlen((const char *)q, (size_t)(end - q));
    return (const char *)q;
}

/* String constant kgc[~idx] of the prototype, copied into out. */
static bool kstr(const struct nctx *c, uint32_t idx, char *out, size_t cap)
{
    const struct lj_layout *lay = c->rt->lay;
    unsigned rs = lay->gc64 ? 8 : 4;
    const uint8_t *end, *k = blob_ptr(c, lay->pt_k, &end);
    if (!k || idx >= c->p->sizekgc || k - c->p->blob < (ptrdiff_t)((idx + 1) * rs)) return false;
    uint64_t s = lj_ref(lay, k - (idx + 1) * rs);
    uint8_t hdr[24 + 64];
    if (!s || ss_mem_read(c->m, s, hdr, sizeof(hdr)) || hdr[lay->gct] != LJ_GCT_STR) return false;
    uint32_t len = lj_u32(hdr + lay->str_len);
    if (len >= cap) return false;
    if (len + 1 <= sizeof(hdr) - lay->str_data)
        memcpy(out, hdr + lay->str_data, len + 1);
    else if (ss_mem_read(c->m, s + lay->str_data, out, len + 1))
        return false;
    return out[len] == 0;
}

/* lj_debug_slotname, writing the name into out; depth limits the
 * enrichment recursion. Returns false when no name is derivable. */
static bool slotname(const struct nctx *c, uint32_t pos, uint32_t slot, char *out, size_t cap,
                     int depth)
{
    size_t len;
    const char *ln;
    const unsigned fr2 = c->rt->lay->gc64 ? 1 : 0;
    for (int guard = 0; guard < 64; guard++) {
        if ((ln = varname(c, pos, slot, &len))) {
            snprintf(out, cap, "%.*s", (int)len, ln);
            return true;
        }
        uint32_t ip = pos, restart = 0;
        while (--ip > 0 && !restart) {
            uint32_t ins = ins_at(c, ip);
            unsigned op = op_of(ins), ra = a_of(ins);
            if (op >= BC_MAX) return false;
            if (bcmode[op].amode == 2) {
                if (slot >= ra && (op != BC_KNIL || slot <= d_of(ins))) return false;
            } else if (bcmode[op].amode == 1 && ra == slot) {
                switch (op) {
                case BC_MOV:
                    slot = d_of(ins);
                    pos = ip;
                    restart = 1;
                    continue;
                case BC_GGET:
                    return kstr(c, d_of(ins), out, cap);
                case BC_TGETS: {
                    char key[128], tab[128];
                    if (!kstr(c, c_of(ins), key, sizeof(key))) return false;
                    bool method = false;
                    if (ip > 1) {
                        uint32_t p = ins_at(c, ip - 1);
                        method =
                            op_of(p) == BC_MOV && a_of(p) == ra + 1 + fr2 && d_of(p) == b_of(ins);
                    }
                    if (depth > 0 && slotname(c, ip, b_of(ins), tab, sizeof(tab), depth - 1))
                        snprintf(out, cap, "%s%c%s", tab, method ? ':' : '.', key);
                    else
                        snprintf(out, cap, "%s", key);
                    return true;
                }
                case BC_UGET:
                    if ((ln = uvname(c, d_of(ins), &len)) && len) {
                        snprintf(out, cap, "%.*s", (int)len, ln);
                        return true;
                    }
                    return false;
                default:
                    return false;
                }
            }
        }
        if (!restart) return false;
    }
    return false;
}

/* Name of the function called at caller position pos (instruction index). */
static const char *call_name(struct ss_lj_runtime *rt, struct ss_mem *m, struct lj_proto *p,
                             uint32_t pos)
{
    /* a position's name is kept in slot pos % LJ_NAMES_PER_PROTO only */
    const struct lj_pname *hit = &p->names[pos % LJ_NAMES_PER_PROTO];
    if (hit->pos == pos + 1) return hit->name;
    struct nctx c = {rt, m, p};
    uint32_t ins = ins_at(&c, pos);
    unsigned op = op_of(ins);
    char buf[256];
    const char *name = NULL;
    if (op >= BC_MAX) return NULL;
    if (!strcmp(bcmode[op].mm, "call")) {
        uint32_t slot = a_of(ins);
        if (op == BC_ITERC) slot -= 3;
        if (slotname(&c, pos, slot, buf, sizeof(buf), 2)) name = ss_lj_intern(rt, buf, strlen(buf));
    } else if (strcmp(bcmode[op].mm, "___")) {
        snprintf(buf, sizeof(buf), "__%s", bcmode[op].mm);
        name = ss_lj_intern(rt, buf, strlen(buf));
    }
    /* cache (also negative results, as "") */
    unsigned slot = pos % LJ_NAMES_PER_PROTO;
    p->names[slot].pos = pos + 1;
    p->names[slot].name = name ? name : ss_lj_intern(rt, "", 0);
    return name;
}

/* Name of argument slot A + delta of the call at pos (not cached: rare). */
static const char *arg_name(struct ss_lj_runtime *rt, struct ss_mem *m, struct lj_proto *p,
                            uint32_t pos, unsigned delta)
{
    struct nctx c = {rt, m, p};
    uint32_t ins = ins_at(&c, pos);
    char buf[256];
    if (op_of(ins) >= BC_MAX || strcmp(bcmode[op_of(ins)].mm, "call")) return NULL;
    if (!slotname(&c, pos, a_of(ins) + delta, buf, sizeof(buf), 2)) return NULL;
    return ss_lj_intern(rt, buf, strlen(buf));
}

void ss_lj_frame_text(struct ss_lj_runtime *rt, struct ss_mem *m, const struct lj_walk *w,
                      unsigned i, struct ss_frame *fr)
{
    const struct lj_layout *lay = rt->lay;
    const struct lj_wframe *wf = &w->f[i];
    memset(fr, 0, sizeof(*fr));
    fr->kind = SS_FRAME_LUA;
    if (wf->ffid > 1) {
        unsigned k = wf->ffid - 2u;
        char b[32];
        if (k < *lay->nff) {
            fr->name = lay->ff[k];
        } else {
            snprintf(b, sizeof(b), "builtin#%u", wf->ffid);
            fr->name = ss_lj_intern(rt, b, strlen(b));
        }
        fr->module = "[builtin]";
        return;
    }
    if (wf->ffid == 1) {
        fr->name = "?";
        fr->module = "[C]";
        return;
    }
    const struct lj_proto *p = wf->proto;
    if (!p) {
        fr->name = "?";
        fr->module = "?";
        return;
    }
    fr->module = p->chunk;
    fr->first_line = p->firstline > 0 ? (uint32_t)p->firstline : 0;
    if (wf->pc) {
        uint64_t bc = wf->pt + lay->pt_size;
        fr->addr = wf->pc - 4;
        fr->line = ss_lj_proto_line(rt, p, (uint32_t)((wf->pc - bc) / 4 - 1));
    }
    if (p->firstline == 0) {
        fr->name = "main";
        return;
    }
    /* caller: the next frame below (a VARG pseudo-frame carries the same
     * function as the frame under it) */
    const char *name = NULL;
    if (i + 1 < w->n) {
        const struct lj_wframe *cw = &w->f[i + 1];
        if ((cw->ftsz & 7) == LJ_FRAME_VARG && i + 2 < w->n) cw = &w->f[i + 2];
        /* called by pcall/xpcall: name the function argument at the
         * pcall call site (GGET/local/field of slot A + 1 + FR2) */
        if (cw->ffid > 1 && cw->ffid - 2u < *lay->nff && i + 2 < w->n &&
            (!strcmp(lay->ff[cw->ffid - 2], "pcall") || !strcmp(lay->ff[cw->ffid - 2], "xpcall"))) {
            const struct lj_wframe *pw = &w->f[i + 2];
            if (pw->ffid == 0 && pw->proto && pw->pc) {
                uint64_t bc = pw->pt + lay->pt_size;
                uint32_t pos = (uint32_t)((pw->pc - bc) / 4 - 1);
                if (pos < pw->proto->sizebc)
                    name = arg_name(rt, m, pw->proto, pos, 1 + (lay->gc64 ? 1 : 0));
            }
        }
        if (!name && cw->ffid == 0 && cw->proto && cw->pc) {
            uint64_t bc = cw->pt + lay->pt_size;
            uint32_t pos = (uint32_t)((cw->pc - bc) / 4 - 1);
            if (pos < cw->proto->sizebc) name = call_name(rt, m, cw->proto, pos);
        }
    }
    fr->name = name && name[0] ? name : "anonymous";
}
