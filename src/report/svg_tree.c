/* report/svg_tree: the flame tree (svg_int.h): nodes merged by text under
 * their parent, children sorted by text, x laid out by width. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report/svg_int.h"

struct node_key {
    const struct fg_tree *t;
    uint32_t parent, text;
    uint8_t kind;
};

static bool node_eq(const void *ctx, uint32_t idx)
{
    const struct node_key *k = ctx;
    const struct fg_node *n = &k->t->n[idx];
    return n->parent == k->parent && n->text == k->text &&
           (n->kind == FG_KIND_PROCESS) == (k->kind == FG_KIND_PROCESS);
}

int rp_fg_init(struct fg_tree *t, const struct rp_strtab *str)
{
    *t = (struct fg_tree){.str = str};
    if (rp_grow(&t->n, &t->cap, 1, sizeof(*t->n))) return -ENOMEM;
    t->n[0] = (struct fg_node){.kind = FG_KIND_ROOT};
    t->len = 1;
    return 0;
}

int64_t rp_fg_child(struct fg_tree *t, uint32_t parent, uint32_t text, uint8_t kind)
{
    struct node_key k = {t, parent, text, kind};
    uint64_t h = rp_hash_u64(((uint64_t)parent << 32) | text, kind == FG_KIND_PROCESS);
    uint32_t idx;
    if (rp_index_find(&t->ix, h, node_eq, &k, &idx)) return idx;
    if (t->len >= UINT32_MAX - 1 || rp_grow(&t->n, &t->cap, t->len + 1, sizeof(*t->n)) ||
        rp_index_insert(&t->ix, h, (uint32_t)t->len))
        return -ENOMEM;
    uint32_t depth = t->n[parent].depth + 1;
    t->n[t->len] = (struct fg_node){.text = text, .kind = kind, .parent = parent, .depth = depth};
    if (depth > t->maxdepth) t->maxdepth = depth;
    return (int64_t)t->len++;
}

const char *rp_fg_text(const struct fg_tree *t, const struct fg_node *n)
{
    if (n->kind == FG_KIND_ROOT) return "all";
    if (n->kind == FG_KIND_PROCESS && !n->text) return "[unknown]";
    return rp_str(t->str, n->text);
}

static int child_cmp(const void *a, const void *b, void *ctx)
{
    const struct fg_tree *t = ctx;
    const struct fg_node *x = &t->n[*(const uint32_t *)a], *y = &t->n[*(const uint32_t *)b];
    return strcmp(rp_fg_text(t, x), rp_fg_text(t, y));
}

int rp_fg_layout(struct fg_tree *t)
{
    /* children, sorted by text; nodes are created after their parent */
    uint32_t *k = calloc(t->len, sizeof(*k));
    if (!k) return -ENOMEM;
    for (size_t i = 1; i < t->len; i++)
        t->n[t->n[i].parent].nchild++;
    uint32_t pos = 0;
    for (size_t i = 0; i < t->len; i++) {
        t->n[i].child0 = pos;
        pos += t->n[i].nchild;
        t->n[i].nchild = 0;
    }
    for (size_t i = 1; i < t->len; i++) {
        struct fg_node *p = &t->n[t->n[i].parent];
        k[p->child0 + p->nchild++] = (uint32_t)i;
    }
    for (size_t i = 0; i < t->len; i++) {
        struct fg_node *p = &t->n[i];
        qsort_r(k + p->child0, p->nchild, sizeof(*k), child_cmp, t);
        uint64_t x = p->x;
        for (uint32_t c = 0; c < p->nchild; c++) {
            t->n[k[p->child0 + c]].x = x;
            x += t->n[k[p->child0 + c]].total;
        }
    }
    free(t->kids);
    t->kids = k;
    return 0;
}

void rp_fg_free(struct fg_tree *t)
{
    free(t->n);
    free(t->kids);
    rp_index_free(&t->ix);
    *t = (struct fg_tree){0};
}
