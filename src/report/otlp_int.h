/* report/otlp_int: the OTLP writer's dictionary tables (otlp_dict.c
 * interns, otlp.c assembles the message). Only with SS_HAVE_OTLP. */
#ifndef SS_REPORT_OTLP_INT_H
#define SS_REPORT_OTLP_INT_H

#include "report/report_int.h"

/* A POD dictionary table deduplicated by its bytes; entry 0 is all zeros. */
struct otab {
    char *v;
    size_t n, cap, size;
    struct rp_index ix;
};

struct ox {
    const struct ss_report *r;
    struct rp_strtab str, res; /* the dictionary's strings; resource strings */
    struct rp_buf tmp;
    int oom;
    struct otab attrs, funcs, maps, stacks;
    int32_t *stack_of; /* per report stack: its stack_table index */
};

struct oattr { /* KeyValueAndUnit: int or string value */
    int32_t key;
    int32_t is_str;
    int64_t v; /* the number, or the string's id */
};
struct ofunc {
    int32_t name, sys, file, pad;
    int64_t start;
};
struct omap {
    uint32_t module;
    uint32_t build_id_len;
    uint8_t build_id[24];
    uint64_t bias;
};
struct ostack {
    uint64_t h;
    uint32_t report_stack; /* the first report stack with these frames */
    uint32_t pad;
};

void ox_tab_init(struct ox *x, struct otab *t, size_t size);
void ox_free(struct ox *x);
/* Strings escaped for display (valid UTF-8, as protobuf strings must be). */
int32_t ox_str_in(struct ox *x, struct rp_strtab *t, const char *s);
int32_t ox_str(struct ox *x, const char *s); /* in the dictionary's string_table */
int32_t ox_attr_int(struct ox *x, const char *key, int64_t v);
int32_t ox_attr_str(struct ox *x, const char *key, const char *v);
/* Function index of a frame (0: none, an unsymbolized native frame). */
int32_t ox_func(struct ox *x, const struct rp_frame *fr);
/* Mapping index of a native frame with a module (0 otherwise). */
int32_t ox_map(struct ox *x, const struct rp_frame *fr);
/* stack_table index of report stack s (frames deduplicated). */
int32_t ox_stack(struct ox *x, uint32_t s);
/* qsort_r order of report stack indices: by pid, then report order (ctx: the report). */
int ox_by_pid(const void *a, const void *b, void *ctx);

#endif
