/* elf/debuginfod: debug files fetched by build-id from debuginfod servers
 * (libdebuginfod, DEBUGINFOD_URLS), off the sampling path.
 *
 * An ss_dfd is one fetcher: requests are queued by the thread that samples
 * (ss_dfd_request never blocks on the network) and served one at a time by a
 * background thread with its own debuginfod client. libdebuginfod caches the
 * files itself (DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client
 * or ~/.cache/debuginfod_client). Each fetch is cut after timeout_s seconds
 * (the progress callback aborts it). Results are collected by the owner with
 * ss_dfd_poll, on its own thread, so nothing else is shared. */
#ifndef SS_ELF_DEBUGINFOD_H
#define SS_ELF_DEBUGINFOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stacksnap/ss.h"

struct ss_dfd;

/* Start the fetcher thread. timeout_s <= 0: 30 s. -errno with a message. */
int ss_dfd_new(struct ss_dfd **out, double timeout_s, struct ss_err *err);
/* Stop the thread (an ongoing fetch is aborted) and free. */
void ss_dfd_free(struct ss_dfd *d);
/* Queue build-id id (once per id: later calls are no-ops). -ENOMEM. */
int ss_dfd_request(struct ss_dfd *d, const uint8_t *id, size_t len);
/* Hand each fetch that ended since the last poll to fn: path is the cached
 * debug file (NULL when the fetch failed; rc then says why: -ENOENT not on
 * any server, -ETIME timed out, ...). Returns the number handed out. */
typedef void (*ss_dfd_fn)(void *ctx, const uint8_t *id, size_t len, const char *path, int rc);
int ss_dfd_poll(struct ss_dfd *d, ss_dfd_fn fn, void *ctx);
/* Fetches queued or running. */
size_t ss_dfd_pending(struct ss_dfd *d);
/* Wait until nothing is pending or max_s seconds have passed. */
void ss_dfd_wait(struct ss_dfd *d, double max_s);

#endif
