/* agent/webcfg.h: the agent's TLS and authentication settings
 * (webcfg.c reads them, httpauth.c applies them to each request). */
#ifndef SS_AGENT_WEBCFG_H
#define SS_AGENT_WEBCFG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "stacksnap/ss.h"

/* tls_server_config.client_auth_type, as in Go's crypto/tls. */
enum ag_client_auth {
    AG_CA_NONE,
    AG_CA_REQUEST,
    AG_CA_REQUIRE_ANY,
    AG_CA_VERIFY_IF_GIVEN,
    AG_CA_REQUIRE_VERIFY,
};

#define AG_WEB_CACHE 16

struct ag_web_user {
    char *user, *hash; /* bcrypt */
};

struct ag_web {
    bool tls;
    char *cert_pem, *key_pem, *ca_pem; /* NUL-terminated PEM text */
    enum ag_client_auth client_auth;
    int min_version, max_version; /* 10..13 (TLS1.x), max 0: none */
    char priorities[128];         /* GnuTLS priority string from them */
    struct ag_web_user *users;
    size_t nusers;
    char *token; /* --auth-token-file's token */
    size_t token_len;
    bool healthz_open; /* /healthz needs no credentials */
    /* basic auth credentials that passed bcrypt: SHA-256 of hash:password,
     * so a scraper pays the bcrypt cost once (as the exporter toolkit does) */
    pthread_mutex_t mu;
    unsigned char good[AG_WEB_CACHE][32];
    unsigned ngood, next;
};

/* Read --web-config and --auth-token-file (either may be NULL; *out stays
 * NULL when both are). -EINVAL (bad content), -ENOENT, -EACCES + message. */
int ag_web_load(struct ag_web **out, const char *web_config, const char *token_file,
                bool healthz_open, struct ss_err *err);
void ag_web_free(struct ag_web *w);

#endif
