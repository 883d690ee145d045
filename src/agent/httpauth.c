/* agent/httpauth.c: TLS and authentication applied to the agent's HTTP
 * server (the settings come from webcfg.c):
 *   - TLS through libmicrohttpd's GnuTLS support: certificate and key,
 *     the client CA, the versions allowed;
 *   - the client certificate, per client_auth_type: without a verified one
 *     (GnuTLS checks it against client_ca_file) a request gets 403;
 *   - credentials: HTTP basic auth against bcrypt hashes (libxcrypt's
 *     crypt_rn), or `Authorization: Bearer TOKEN`; without them, 401 with
 *     WWW-Authenticate. /healthz may be left open (--healthz-open).
 *     Credentials that passed bcrypt are remembered as a SHA-256 digest
 *     (16 of them), so a scraper pays bcrypt's cost once.
 * Secrets are compared in constant time and never logged. */
#include <crypt.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/agent_int.h"
#include "agent/webcfg.h"

size_t ag_web_options(const struct ag_web *w, struct MHD_OptionItem *ops, unsigned *flags)
{
    size_t n = 0;
    if (!w || !w->tls) return 0;
    *flags |= MHD_USE_TLS;
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, w->cert_pem};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, w->key_pem};
    /* a trust list makes libmicrohttpd ask for client certificates */
    if (w->ca_pem && w->client_auth != AG_CA_NONE)
        ops[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, (void *)w->ca_pem};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)w->priorities};
    return n;
}

/* Equal, in a time that does not depend on where they differ. */
static bool same(const char *a, size_t alen, const char *b, size_t blen)
{
    volatile unsigned char d = (unsigned char)(alen != blen);
    size_t n = alen < blen ? alen : blen;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

static bool bearer_ok(const struct ag_web *w, struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!w->token || !h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strlen(h);
    while (n && h[n - 1] == ' ')
        n--;
    return same(h, n, w->token, w->token_len);
}

/* SHA-256 of "HASH:PASSWORD" (GnuTLS), for the cache of good credentials. */
static bool digest(const char *hash, const char *pass, unsigned char out[32])
{
    size_t hl = strlen(hash), pl = strlen(pass);
    char *b = malloc(hl + pl + 2);
    if (!b) return false;
    memcpy(b, hash, hl);
    b[hl] = ':';
    memcpy(b + hl + 1, pass, pl + 1);
    bool ok = gnutls_hash_fast(GNUTLS_DIG_SHA256, b, hl + pl + 1, out) == 0;
    explicit_bzero(b, hl + pl + 1);
    free(b);
    return ok;
}

static bool cached(struct ag_web *w, const unsigned char d[32])
{
    bool hit = false;
    pthread_mutex_lock(&w->mu);
    for (unsigned i = 0; i < w->ngood; i++)
        hit |= same((const char *)w->good[i], 32, (const char *)d, 32);
    pthread_mutex_unlock(&w->mu);
    return hit;
}

static void remember(struct ag_web *w, const unsigned char d[32])
{
    pthread_mutex_lock(&w->mu);
    memcpy(w->good[w->next], d, 32);
    w->next = (w->next + 1) % AG_WEB_CACHE;
    if (w->ngood < AG_WEB_CACHE) w->ngood++;
    pthread_mutex_unlock(&w->mu);
}

static bool basic_ok(struct ag_web *w, struct MHD_Connection *c)
{
    if (!w->nusers) return false;
    char *pass = NULL;
    char *user = MHD_basic_auth_get_username_password(c, &pass);
    bool ok = false;
    const struct ag_web_user *u = NULL;
    for (size_t i = 0; user && pass && i < w->nusers; i++)
        if (!strcmp(w->users[i].user, user)) u = &w->users[i];
    unsigned char d[32];
    bool have_d = u && digest(u->hash, pass, d);
    if (have_d && cached(w, d)) {
        ok = true;
    } else if (u) {
        struct crypt_data *cd = calloc(1, sizeof(*cd));
        if (cd) {
            const char *h = crypt_rn(pass, u->hash, cd, (int)sizeof(*cd));
            ok = h && same(h, strlen(h), u->hash, strlen(u->hash));
            explicit_bzero(cd, sizeof(*cd));
            free(cd);
        }
        if (ok && have_d) remember(w, d);
    }
    explicit_bzero(d, sizeof(d));
    if (pass) {
        explicit_bzero(pass, strlen(pass));
        MHD_free(pass);
    }
    if (user) MHD_free(user);
    return ok;
}

/* The client certificate as client_auth_type wants it. */
static bool client_cert_ok(const struct ag_web *w, struct MHD_Connection *c)
{
    if (!w->tls || w->client_auth <= AG_CA_REQUEST) return true;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t s = ci ? (gnutls_session_t)ci->tls_session : NULL;
    if (!s) return false;
    unsigned n = 0;
    bool given = gnutls_certificate_get_peers(s, &n) && n > 0;
    if (!given) return w->client_auth == AG_CA_VERIFY_IF_GIVEN;
    if (w->client_auth == AG_CA_REQUIRE_ANY) return true;
    unsigned status = 0;
    return gnutls_certificate_verify_peers2(s, &status) == 0 && status == 0;
}

static enum MHD_Result refuse(struct MHD_Connection *c, const struct ag_web *w, unsigned code,
                              const char *msg)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(msg), (void *)msg, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (code == MHD_HTTP_UNAUTHORIZED) {
        if (w->nusers)
            MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                    "Basic realm=\"stacksnap\", charset=\"UTF-8\"");
        if (w->token)
            MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                    "Bearer realm=\"stacksnap\"");
    }
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* GnuTLS, during the handshake, once the client's certificate is in: a
 * non-zero return fails the handshake. */
static int verify_peer(gnutls_session_t s)
{
    unsigned n = 0, status = 0;
    if (!gnutls_certificate_get_peers(s, &n) || !n) /* none: GNUTLS_CERT_REQUIRE refuses it */
        return 0;
    return gnutls_certificate_verify_peers2(s, &status) == 0 && status == 0 ? 0 : -1;
}

void ag_web_conn_started(const struct ag_web *w, struct MHD_Connection *c)
{
    if (!w || !w->tls || w->client_auth <= AG_CA_REQUEST) return;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t s = ci ? (gnutls_session_t)ci->tls_session : NULL;
    if (!s) return; /* the request's own check (client_cert_ok) still refuses */
    if (w->client_auth != AG_CA_VERIFY_IF_GIVEN)
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
    if (w->client_auth != AG_CA_REQUIRE_ANY) gnutls_session_set_verify_function(s, verify_peer);
}

bool ag_web_refuse(struct ss_agent *a, struct MHD_Connection *c, const char *url, int *ret)
{
    struct ag_web *w = a->web;
    if (!w || (w->healthz_open && !strcmp(url, "/healthz"))) return false;
    if (!client_cert_ok(w, c)) {
        ag_ce_count(a, AG_CE_CLIENT_CERT, "a request without a verified client certificate: 403");
        *ret = (int)refuse(c, w, MHD_HTTP_FORBIDDEN, "a verified client certificate is required\n");
        return true;
    }
    if (!w->nusers && !w->token) return false;
    if (bearer_ok(w, c) || basic_ok(w, c)) return false;
    ag_ce_count(a, AG_CE_UNAUTHORIZED, "a request without valid credentials: 401");
    *ret = (int)refuse(c, w, MHD_HTTP_UNAUTHORIZED, "unauthorized\n");
    return true;
}
