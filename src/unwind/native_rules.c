/* unwind/native_rules.c: compiling libunwind's CFI rows into compact rules
 * and the per-file sorted row tables (see native_rules.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "elf/elf.h"
#include "unwind/native.h"
#include "unwind/native_rules.h"

#if defined(__x86_64__)
const uint8_t ss_nrs_dreg[SS_NRS_COUNT] = {SS_DR_RBX, SS_DR_RBP, SS_DR_R12, SS_DR_R13,
                                           SS_DR_R14, SS_DR_R15, SS_DR_RIP};
#define RA_COL SS_DR_RIP /* the return address column */
#define NCOLS (SS_DR_RIP + 1)
#else
/* arm64: the return address column x30's slot loads the caller's pc */
const uint8_t ss_nrs_dreg[SS_NRS_COUNT] = {19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, SS_DR_IP};
#define RA_COL SS_DR_X30
#define NCOLS (SS_DR_SP + 1) /* x0-x30, sp */
#endif

/* libunwind's dwarf_where_t */
enum { W_UNDEF, W_SAME, W_CFAREL, W_REG, W_EXPR, W_VAL_EXPR };

/* The slot of CFI column i, or -1. */
static int col_slot(unsigned i)
{
    if (i == RA_COL) return SS_NRS_RA;
    for (int s = 0; s < SS_NRS_COUNT; s++)
        if (s != SS_NRS_RA && ss_nrs_dreg[s] == i) return s;
    return -1;
}

void ss_nrule_compile(const void *rs, size_t size, struct ss_nrule *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = SS_NR_COMPLEX;
    /* struct dwarf_reg_state { unw_word_t ret_addr_column;
     *   struct { char where[N + 2]; unw_word_t val[N + 2]; } reg; }
     * (N: 17 on x86-64, 97 on arm64) */
    unsigned n = 0;
    for (unsigned k = NCOLS; k <= 128; k++) {
        size_t wsz = (k + 2 + 7) & ~7u;
        if (8 + wsz + (k + 2) * 8 == size) {
            n = k;
            break;
        }
    }
    if (!n) return;
    const uint8_t *p = rs;
    uint64_t ra_col;
    memcpy(&ra_col, p, 8);
    const char *where = (const char *)(p + 8);
    const uint8_t *vals = p + 8 + ((n + 2 + 7) & ~7u);
#define VAL(i)                                                                                     \
    ({                                                                                             \
        uint64_t v_;                                                                               \
        memcpy(&v_, vals + 8 * (i), 8);                                                            \
        v_;                                                                                        \
    })
    if (ra_col != RA_COL || where[n] != W_REG) return;
    uint64_t cfa_reg = VAL(n);
    int64_t cfa_off = (int64_t)VAL(n + 1);
    if (cfa_reg >= NCOLS || cfa_reg == RA_COL || cfa_off < INT32_MIN || cfa_off > INT32_MAX) return;
    out->cfa_reg = (uint8_t)cfa_reg;
    out->cfa_off = (int32_t)cfa_off;
    for (unsigned i = 0; i < SS_NRS_COUNT; i++)
        out->off[i] = SS_NR_SAME;
    for (unsigned i = 0; i < NCOLS; i++) {
        if (i == SS_DR_SP) /* libunwind's sp is always the CFA */
            continue;
        int slot = col_slot(i);
        switch (where[i]) {
        case W_SAME:
            break;
        case W_UNDEF:
            if (slot >= 0)
                out->off[slot] = SS_NR_UNDEF;
            else
                out->undef |= 1u << i;
            break;
        case W_CFAREL: {
            int64_t off = (int64_t)VAL(i);
            if (slot < 0 || off <= SS_NR_UNDEF || off > INT16_MAX) return;
            out->off[slot] = (int16_t)off;
            break;
        }
        default:
            return;
        }
    }
#undef VAL
#if defined(__x86_64__)
    if (out->off[SS_NRS_RIP] == SS_NR_UNDEF || out->off[SS_NRS_RBP] == SS_NR_UNDEF)
        out->kind = SS_NR_END;
    else if (out->off[SS_NRS_RIP] == SS_NR_SAME)
        out->kind = SS_NR_COMPLEX; /* return address in a register: leave it to libunwind */
    else
        out->kind = SS_NR_OK;
#else
    /* libunwind: an undefined return address ends the walk; a caller's x30
     * is never known (native_unw.c's read_regs); the return address in x30
     * (SS_NR_SAME: a leaf's row) is the caller's pc */
    out->undef |= 1u << SS_DR_X30;
    out->kind = out->off[SS_NRS_RA] == SS_NR_UNDEF ? SS_NR_END : SS_NR_OK;
#endif
}

/* ---- per-file row tables ---- */
struct rowtab {
    uint64_t *lo, *hi;
    struct ss_nrule *r;
    size_t n, cap;
};

static void rowtab_free(void *p)
{
    struct rowtab *t = p;
    free(t->lo);
    free(t->hi);
    free(t->r);
    free(t);
}

static struct rowtab *table(struct ss_elf *e, bool create)
{
    if (e->unwind_priv || !create) return e->unwind_priv;
    struct rowtab *t = calloc(1, sizeof(*t));
    if (!t) return NULL;
    e->unwind_priv = t;
    e->unwind_priv_free = rowtab_free;
    return t;
}

/* index of the last row with lo <= vaddr, or n when none */
static size_t find(const struct rowtab *t, uint64_t vaddr)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->lo[mid] <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? lo - 1 : t->n;
}

int ss_nrules_lookup(struct ss_elf *e, uint64_t vaddr, struct ss_nrule *out)
{
    struct rowtab *t = table(e, false);
    if (!t || !t->n) return 0;
    size_t i = find(t, vaddr);
    if (i == t->n || vaddr >= t->hi[i]) return 0;
    *out = t->r[i];
    return 1;
}

size_t ss_nrules_count(struct ss_elf *e)
{
    struct rowtab *t = table(e, false);
    return t ? t->n : 0;
}

/* Row k goes in unless it is empty or overlaps a row of the table; the
 * table then stays sorted by lo without overlaps. */
static bool row_fits(const struct rowtab *t, uint64_t lo, uint64_t hi, size_t *pos)
{
    if (hi <= lo) return false;
    size_t i = find(t, lo); /* insert after i */
    *pos = i == t->n ? 0 : i + 1;
    if (i != t->n && t->hi[i] > lo) return false; /* overlaps a row we have */
    return !(*pos < t->n && t->lo[*pos] < hi);
}

static void put(struct rowtab *t, size_t at, uint64_t lo, uint64_t hi, const struct ss_nrule *r)
{
    t->lo[at] = lo;
    t->hi[at] = hi;
    t->r[at] = *r;
}

static void shift(struct rowtab *t, size_t from, size_t to, size_t count)
{
    memmove(t->lo + to, t->lo + from, count * sizeof(*t->lo));
    memmove(t->hi + to, t->hi + from, count * sizeof(*t->hi));
    memmove(t->r + to, t->r + from, count * sizeof(*t->r));
}

/* Rows in ascending order that do not overlap each other (the rows of one
 * FDE, as libunwind gives them) are merged in one pass from the end, each
 * row of the table moved once: inserting them one at a time moved the
 * table's tail once per row, the agent's biggest memmove. The result is the
 * same as one at a time: a row that overlaps none of the table's cannot
 * overlap one of the batch either. Other input goes one at a time. */
#define BATCH 64
static bool add_sorted(struct rowtab *t, const uint64_t *lo, const uint64_t *hi,
                       const struct ss_nrule *r, size_t n)
{
    size_t take[BATCH], at[BATCH], m = 0;
    uint64_t prev_hi = 0;
    if (n > BATCH) return false;
    for (size_t k = 0; k < n; k++) {
        if (hi[k] <= lo[k]) continue;
        if (lo[k] < prev_hi) return false; /* unsorted or overlapping: one at a time */
        prev_hi = hi[k];
    }
    for (size_t k = 0; k < n; k++)
        if (row_fits(t, lo[k], hi[k], &at[m])) take[m++] = k;
    size_t i = t->n, j = t->n + m; /* table rows [0, i) still to move; [j, ...) placed */
    for (size_t a = m; a-- > 0;) {
        size_t count = i - at[a];
        j -= count;
        i -= count;
        if (count && j != i) shift(t, i, j, count);
        put(t, --j, lo[take[a]], hi[take[a]], &r[take[a]]);
    }
    t->n += m;
    return true;
}

int ss_nrules_add(struct ss_elf *e, const uint64_t *lo, const uint64_t *hi,
                  const struct ss_nrule *r, size_t n)
{
    struct rowtab *t = table(e, true);
    if (!t) return -ENOMEM;
    if (t->n + n > t->cap) {
        size_t nc = t->cap ? t->cap : 256;
        while (nc < t->n + n)
            nc *= 2;
        uint64_t *nlo = realloc(t->lo, nc * sizeof(*nlo));
        if (nlo) t->lo = nlo;
        uint64_t *nhi = realloc(t->hi, nc * sizeof(*nhi));
        if (nhi) t->hi = nhi;
        struct ss_nrule *nr = realloc(t->r, nc * sizeof(*nr));
        if (nr) t->r = nr;
        if (!nlo || !nhi || !nr) return -ENOMEM;
        t->cap = nc;
    }
    if (add_sorted(t, lo, hi, r, n)) return 0;
    for (size_t k = 0; k < n; k++) {
        size_t pos;
        if (!row_fits(t, lo[k], hi[k], &pos)) continue;
        shift(t, pos, pos + 1, t->n - pos);
        put(t, pos, lo[k], hi[k], &r[k]);
        t->n++;
    }
    return 0;
}
