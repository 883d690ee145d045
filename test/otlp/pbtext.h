/* test/otlp/pbtext: protoc's text output (`protoc --decode`) read into a
 * tree, and the checks of an OTLP ExportProfilesServiceRequest decoded by
 * the official v1.11.0 schema: dictionary rules, and its samples as folded
 * text (the frame text rules of DESIGN.md) to compare with `-o x.folded`. */
#ifndef SS_TEST_PBTEXT_H
#define SS_TEST_PBTEXT_H

#include <stddef.h>

/* A field: a message (val NULL, kids) or a scalar (val: the unescaped text). */
struct pbt {
    char *name, *val;
    size_t vlen;
    struct pbt *kids;
    size_t nkids, cap;
};
/* Parse protoc's text format; NULL (and why) on a syntax error. */
struct pbt *pbt_parse(const char *text, char *why, size_t whylen);
void pbt_free(struct pbt *t);
/* The idx-th field called name, or NULL. */
const struct pbt *pbt_get(const struct pbt *t, const char *name, size_t idx);
size_t pbt_count(const struct pbt *t, const char *name);
/* A scalar's number (proto3 leaves zeros out: def when absent). */
long long pbt_int(const struct pbt *t, const char *name, long long def);

/* The request's samples as sorted folded lines "comm;root;...;leaf COUNT\n",
 * after checking the dictionary (index 0 of every table the zero value, no
 * index past a table, every location typed by profile.frame.type). NULL and
 * why on a broken rule. Counts: div 0: timestamps, or the sum of values
 * without them; else the sum of values / div (off-CPU: nanoseconds in the
 * OTLP, microseconds in folded). A sample with both has as many of each. */
char *otlp_folded(const struct pbt *req, long long div, char *why, size_t whylen);
/* The string value of resource attribute key of resource_profiles[i] (static
 * storage of the tree), or NULL. */
const char *otlp_resource_attr(const struct pbt *req, size_t i, const char *key);
/* `protoc --decode` of an .otlp file with the schema under proto_dir
 * (opentelemetry/proto/...), parsed; NULL and why (protoc's error). */
struct pbt *otlp_decode_file(const char *proto_dir, const char *path, char *why, size_t whylen);
/* Folded text sorted bytewise, lines with one stack merged (malloc'd). */
char *folded_sorted(const char *text);

#endif
