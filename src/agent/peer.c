/* agent/peer.c: what every push (the Pyroscope push, push.c; the OTLP push,
 * otlp_push.c) knows of the server it sends to: the CA file that verifies
 * it (--push-ca; the system's otherwise; verification is never off) and
 * the Authorization header value (--push-auth-file, read once at start).
 * The value is wiped when freed and never logged. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_int.h"

/* --push-auth-file: one line, the Authorization header's value. */
static int read_auth(struct ag_peer *pe, const char *file, struct ss_err *err)
{
    FILE *f = fopen(file, "re");
    if (!f) {
        int e = errno;
        ss_err_set(err, -e, "push auth file %s: %s", file, strerror(e));
        return -e;
    }
    char v[4096];
    size_t n = fread(v, 1, sizeof(v) - 1, f);
    bool big = n == sizeof(v) - 1 && fgetc(f) != EOF;
    fclose(f);
    v[n] = 0;
    while (n && (v[n - 1] == '\n' || v[n - 1] == '\r' || v[n - 1] == ' '))
        v[--n] = 0;
    int rc = 0;
    if (big || !n || strchr(v, '\n') || strchr(v, '\r') || strlen(v) != n) {
        ss_err_set(err, -EINVAL, "push auth file %s: %s", file,
                   big  ? "longer than 4 KiB"
                   : !n ? "empty"
                        : "not one line (the Authorization header value, e.g. Bearer TOKEN)");
        rc = -EINVAL;
    } else if (asprintf(&pe->auth, "Authorization: %s", v) < 0) {
        pe->auth = NULL;
        ss_err_set(err, -ENOMEM, "push: out of memory");
        rc = -ENOMEM;
    }
    explicit_bzero(v, sizeof(v));
    return rc;
}

int ag_peer_load(struct ag_peer *pe, const struct ss_agent_opts *o, struct ss_err *err)
{
    memset(pe, 0, sizeof(*pe));
    int rc = 0;
    if (o->push_ca) {
        if (access(o->push_ca, R_OK) < 0) {
            rc = -errno;
            ss_err_set(err, rc, "push CA file %s: %s", o->push_ca, strerror(-rc));
        } else if (!(pe->ca = strdup(o->push_ca))) {
            rc = -ENOMEM;
            ss_err_set(err, rc, "push: out of memory");
        }
    }
    if (!rc && o->push_auth_file) rc = read_auth(pe, o->push_auth_file, err);
    if (rc < 0) ag_peer_free(pe);
    return rc;
}

void ag_peer_apply(const struct ag_peer *pe, CURL *h)
{
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (pe->ca) curl_easy_setopt(h, CURLOPT_CAINFO, pe->ca);
}

void ag_peer_free(struct ag_peer *pe)
{
    free(pe->ca);
    if (pe->auth) explicit_bzero(pe->auth, strlen(pe->auth));
    free(pe->auth);
    memset(pe, 0, sizeof(*pe));
}
