/* report/diff_svg: the differential flame graph. Both sides' stacks go into
 * one flame tree (root "all", comm, frames root first); widths are AFTER's
 * samples, each node also carries BEFORE's, and svg_write.c colours it by the
 * change of its share (red grew, blue shrank). Frames only BEFORE had have
 * no width and are not drawn (the table lists them). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "report/diff_int.h"
#include "report/svg_int.h"

int ss_diff_write_svg(const struct ss_diff *d, FILE *f, struct ss_err *err)
{
    struct rp_strtab str;
    struct fg_tree t = {0};
    struct rp_buf k = {0}, sub = {0};
    int rc = 0;
    if (rp_strtab_init(&str) || rp_fg_init(&t, &str)) goto oom;
    for (uint32_t id = 1; id < d->stk.n; id++) {
        const char *s = rp_str(&d->stk, id);
        const uint64_t *c = d->cnt[id];
        t.n[0].total += c[1];
        t.n[0].base += c[0];
        int64_t cur = 0;
        for (const char *p = s; p;) {
            const char *q = strchr(p, ';');
            size_t len = q ? (size_t)(q - p) : strlen(p);
            rp_buf_reset(&k);
            rp_unfold(&k, p, len);
            int64_t tid = k.oom ? -ENOMEM : rp_str_intern(&str, k.p ? k.p : "", k.len);
            if (tid < 0) goto oom;
            uint8_t kind = cur == 0 ? FG_KIND_PROCESS : rp_kind_of_text(k.p ? k.p : "", k.len);
            cur = rp_fg_child(&t, (uint32_t)cur, (uint32_t)tid, kind);
            if (cur < 0) goto oom;
            t.n[cur].total += c[1];
            t.n[cur].base += c[0];
            p = q ? q + 1 : NULL;
        }
    }
    if (rp_fg_layout(&t)) goto oom;
    const char *nb = d->name[0] ? d->name[0] : "before", *na = d->name[1] ? d->name[1] : "after";
    rp_buf_printf(&sub,
                  "before: %s, %" PRIu64 " samples \xc2\xb7 after: %s, %" PRIu64
                  " samples \xc2\xb7 shares of each side's total",
                  nb, d->total[0], na, d->total[1]);
    if (sub.oom) goto oom;
    struct fg_opts o = {.title = "stacksnap differential flame graph",
                        .subtitle = sub.p,
                        .diff = 1,
                        .base_total = d->total[0]};
    rc = rp_fg_write(&t, &o, f, err);
    goto out;
oom:
    ss_err_set(err, -ENOMEM, "diff SVG output: out of memory");
    rc = -ENOMEM;
out:
    rp_fg_free(&t);
    rp_strtab_free(&str);
    rp_buf_free(&k);
    rp_buf_free(&sub);
    return rc;
}
