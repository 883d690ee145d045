/* test/otlp/otlp_util: what the OTLP tests share — a run's folder, record
 * with .snap, .folded and .otlp outputs, protoc's decode, the comparison
 * with folded, and replay's bytes (criterion asserts). */
#ifndef SS_TEST_OTLP_UTIL_H
#define SS_TEST_OTLP_UTIL_H

#include "pbtext.h"

/* A test's folder and the files record writes there. */
struct run {
    char *dir, *snap, *folded, *otlp;
};

struct run run_new(const char *tag);
void run_free(struct run *r);
/* protoc --decode of an .otlp file into a tree (asserts on failure). */
struct pbt *otlp_decode(const char *otlp);
/* Folded text (sorted, merged) equals the folded file's. */
void same_text_as_folded(const char *mine, const char *folded_path);
/* The decoded request's stacks equal the folded file's (div: otlp_folded's). */
void same_as_folded(const struct pbt *req, const char *folded_path, long long div);
/* record EXTRA... -o x.snap -o live.folded -o live.otlp TARGET... */
void otlp_record(const struct run *ru, char *const extra[], char *const target[], int ntarget);
/* replay -o replay.otlp gives live.otlp's bytes. */
void replay_same(const struct run *ru);

#endif
