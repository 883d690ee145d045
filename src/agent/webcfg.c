/* agent/webcfg.c: the agent's TLS and authentication settings, read once at
 * start — the Prometheus exporter-toolkit web configuration (--web-config,
 * YAML through libyaml):
 *   tls_server_config: cert_file, key_file, client_ca_file, client_auth_type,
 *                      min_version, max_version
 *   basic_auth_users:  USER: BCRYPT-HASH
 * and the bearer token file (--auth-token-file). Relative paths are taken
 * from the configuration file's folder, as the toolkit does. The PEM files
 * are checked with GnuTLS here, so a bad one is named before the server
 * starts. Every error names the file and the key. */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "agent/webcfg.h"

#define WEB_FILE_MAX (1u << 20)

/* A whole (small) file as a NUL-terminated string. */
static char *slurp(const char *path, size_t *len, int *e)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        *e = errno;
        return NULL;
    }
    char *buf = malloc(WEB_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, WEB_FILE_MAX + 1, f) : 0;
    *e = !buf ? ENOMEM : ferror(f) ? EIO : n > WEB_FILE_MAX ? EFBIG : 0;
    fclose(f);
    if (*e) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

struct wparse {
    const char *file;
    yaml_document_t *doc;
    struct ss_err *err;
    char dir[4096]; /* the configuration's folder, for relative paths */
};

static int bad(struct wparse *p, const yaml_node_t *n, const char *key, const char *fmt,
               const char *arg)
{
    char what[512];
    snprintf(what, sizeof(what), fmt, arg);
    ss_err_set(p->err, -EINVAL, "web config %s: line %zu: %s: %s", p->file,
               n ? n->start_mark.line + 1 : 0, key, what);
    return -EINVAL;
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A PEM file named by key: loaded, relative to the configuration's folder. */
static int load_pem(struct wparse *p, const yaml_node_t *v, const char *key, char **out)
{
    const char *s = scalar(v);
    if (!s || !*s) return bad(p, v, key, "%s", "expected a file name");
    char path[8192];
    snprintf(path, sizeof(path), "%s%s", s[0] == '/' ? "" : p->dir, s);
    int e = 0;
    free(*out);
    if (!(*out = slurp(path, NULL, &e))) {
        ss_err_set(p->err, e == ENOENT || e == EACCES ? -e : -EINVAL,
                   "web config %s: %s: cannot read %s: %s", p->file, key, path, strerror(e));
        return e == ENOENT || e == EACCES ? -e : -EINVAL;
    }
    return 0;
}

static const struct {
    const char *name;
    enum ag_client_auth v;
} client_auths[] = {
    {"NoClientCert", AG_CA_NONE},
    {"RequestClientCert", AG_CA_REQUEST},
    {"RequireAnyClientCert", AG_CA_REQUIRE_ANY},
    {"VerifyClientCertIfGiven", AG_CA_VERIFY_IF_GIVEN},
    {"RequireAndVerifyClientCert", AG_CA_REQUIRE_VERIFY},
};

static int tls_version(struct wparse *p, const yaml_node_t *v, const char *key, int *out)
{
    static const char *const names[] = {"TLS10", "TLS11", "TLS12", "TLS13"};
    const char *s = scalar(v);
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, names[i])) {
            *out = 10 + i;
            return 0;
        }
    return bad(p, v, key, "'%s' is not one of TLS10, TLS11, TLS12, TLS13",
               s ? s : "(not a string)");
}

static int parse_tls(struct wparse *p, struct ag_web *w, const yaml_node_t *m)
{
    if (m->type != YAML_MAPPING_NODE)
        return bad(p, m, "tls_server_config", "%s", "expected a mapping");
    bool has_type = false;
    for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++) {
        const yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        const yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        const char *ks = scalar(k);
        char key[160];
        snprintf(key, sizeof(key), "tls_server_config.%s", ks ? ks : "?");
        int rc = 0;
        if (!ks)
            rc = bad(p, k, "tls_server_config", "%s", "a key that is not a string");
        else if (!strcmp(ks, "cert_file"))
            rc = load_pem(p, v, key, &w->cert_pem);
        else if (!strcmp(ks, "key_file"))
            rc = load_pem(p, v, key, &w->key_pem);
        else if (!strcmp(ks, "client_ca_file"))
            rc = load_pem(p, v, key, &w->ca_pem);
        else if (!strcmp(ks, "min_version"))
            rc = tls_version(p, v, key, &w->min_version);
        else if (!strcmp(ks, "max_version"))
            rc = tls_version(p, v, key, &w->max_version);
        else if (!strcmp(ks, "client_auth_type")) {
            const char *s = scalar(v);
            size_t i = 0, n = sizeof(client_auths) / sizeof(client_auths[0]);
            while (s && i < n && strcmp(s, client_auths[i].name))
                i++;
            if (i == n)
                rc = bad(p, v, key,
                         "'%s' is not one of NoClientCert, RequestClientCert, "
                         "RequireAnyClientCert, VerifyClientCertIfGiven, "
                         "RequireAndVerifyClientCert",
                         s ? s : "(not a string)");
            else
                w->client_auth = client_auths[i].v, has_type = true;
        } else
            rc = bad(p, k, key, "%s",
                     "unknown or unsupported key (cert_file, key_file, client_ca_file, "
                     "client_auth_type, min_version, max_version)");
        if (rc < 0) return rc;
    }
    if (!w->cert_pem)
        return bad(p, m, "tls_server_config.cert_file", "%s", "missing (and key_file)");
    if (!w->key_pem) return bad(p, m, "tls_server_config.key_file", "%s", "missing");
    /* the toolkit's default once a client CA is given */
    if (w->ca_pem && !has_type) w->client_auth = AG_CA_REQUIRE_VERIFY;
    if (w->client_auth != AG_CA_NONE && !w->ca_pem)
        return bad(p, m, "tls_server_config.client_ca_file", "%s",
                   "missing: client_auth_type asks for client certificates");
    if (w->max_version && w->max_version < w->min_version)
        return bad(p, m, "tls_server_config.max_version", "%s", "below min_version");
    w->tls = true;
    return 0;
}

static int parse_users(struct wparse *p, struct ag_web *w, const yaml_node_t *m)
{
    if (m->type != YAML_MAPPING_NODE)
        return bad(p, m, "basic_auth_users", "%s", "expected a mapping of user: bcrypt hash");
    size_t n = (size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
    if (!(w->users = calloc(n ? n : 1, sizeof(*w->users)))) return -ENOMEM;
    for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++) {
        const char *u = scalar(yaml_document_get_node(p->doc, pr->key));
        const yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        const char *h = scalar(v);
        char key[160];
        snprintf(key, sizeof(key), "basic_auth_users.%s", u ? u : "?");
        if (!u || !*u || strchr(u, ':'))
            return bad(p, v, "basic_auth_users", "%s", "a user name must be a string without ':'");
        if (!h || strlen(h) != 60 || h[0] != '$' || h[1] != '2' ||
            (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') || h[3] != '$')
            return bad(p, v, key, "%s",
                       "not a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters; "
                       "htpasswd -nbB USER PASSWORD makes one)");
        w->users[w->nusers].user = strdup(u);
        w->users[w->nusers].hash = strdup(h);
        if (!w->users[w->nusers].user || !w->users[w->nusers].hash) return -ENOMEM;
        w->nusers++;
    }
    return 0;
}

static int parse_config(struct ag_web *w, const char *file, struct ss_err *err)
{
    FILE *f = fopen(file, "re");
    if (!f) {
        int e = errno;
        ss_err_set(err, -e, "web config %s: %s", file, strerror(e));
        return -e;
    }
    struct wparse p = {.file = file, .err = err};
    const char *slash = strrchr(file, '/');
    if (slash) snprintf(p.dir, sizeof(p.dir), "%.*s/", (int)(slash - file), file);
    yaml_parser_t yp;
    yaml_document_t doc;
    int rc = 0;
    yaml_parser_initialize(&yp);
    yaml_parser_set_input_file(&yp, f);
    if (!yaml_parser_load(&yp, &doc)) {
        ss_err_set(err, -EINVAL, "web config %s: line %zu: not YAML: %s", file,
                   yp.problem_mark.line + 1, yp.problem ? yp.problem : "parse error");
        yaml_parser_delete(&yp);
        fclose(f);
        return -EINVAL;
    }
    p.doc = &doc;
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type == YAML_SCALAR_NODE && !*scalar(root)) root = NULL;
    if (root && root->type != YAML_MAPPING_NODE)
        rc = bad(&p, root, "(top)", "%s", "expected a mapping");
    for (yaml_node_pair_t *pr = root && !rc ? root->data.mapping.pairs.start : NULL;
         pr && pr < root->data.mapping.pairs.top && !rc; pr++) {
        const yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
        const yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
        const char *ks = scalar(k);
        if (ks && !strcmp(ks, "tls_server_config"))
            rc = parse_tls(&p, w, v);
        else if (ks && !strcmp(ks, "basic_auth_users"))
            rc = parse_users(&p, w, v);
        else
            rc = bad(&p, k, ks ? ks : "?", "%s",
                     "unknown or unsupported key (tls_server_config, basic_auth_users)");
    }
    if (rc == -ENOMEM) ss_err_set(err, -ENOMEM, "web config %s: out of memory", file);
    yaml_document_delete(&doc);
    yaml_parser_delete(&yp);
    fclose(f);
    return rc;
}

/* The PEM files, checked by GnuTLS as the server will load them. */
static int check_pems(struct ag_web *w, const char *file, struct ss_err *err)
{
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) < 0) return -ENOMEM;
    gnutls_datum_t cert = {(unsigned char *)w->cert_pem, (unsigned)strlen(w->cert_pem)};
    gnutls_datum_t key = {(unsigned char *)w->key_pem, (unsigned)strlen(w->key_pem)};
    int g = gnutls_certificate_set_x509_key_mem(cred, &cert, &key, GNUTLS_X509_FMT_PEM);
    int rc = 0;
    if (g < 0) {
        ss_err_set(err, -EINVAL,
                   "web config %s: tls_server_config.cert_file/key_file: not a matching PEM "
                   "certificate and key: %s",
                   file, gnutls_strerror(g));
        rc = -EINVAL;
    } else if (w->ca_pem) {
        gnutls_datum_t ca = {(unsigned char *)w->ca_pem, (unsigned)strlen(w->ca_pem)};
        g = gnutls_certificate_set_x509_trust_mem(cred, &ca, GNUTLS_X509_FMT_PEM);
        if (g <= 0) {
            ss_err_set(err, -EINVAL,
                       "web config %s: tls_server_config.client_ca_file: no PEM certificate "
                       "in it%s%s",
                       file, g < 0 ? ": " : "", g < 0 ? gnutls_strerror(g) : "");
            rc = -EINVAL;
        }
    }
    gnutls_certificate_free_credentials(cred);
    return rc;
}

static int load_token(struct ag_web *w, const char *file, struct ss_err *err)
{
    int e = 0;
    size_t n = 0;
    char *t = slurp(file, &n, &e);
    if (!t) {
        ss_err_set(err, e == ENOENT || e == EACCES ? -e : -EINVAL, "auth token file %s: %s", file,
                   strerror(e));
        return e == ENOENT || e == EACCES ? -e : -EINVAL;
    }
    while (n && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' ' || t[n - 1] == '\t'))
        t[--n] = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= ' ' || (unsigned char)t[i] >= 0x7f) {
            free(t);
            ss_err_set(err, -EINVAL,
                       "auth token file %s: the token must be one line of printable ASCII "
                       "without spaces",
                       file);
            return -EINVAL;
        }
    if (!n) {
        free(t);
        ss_err_set(err, -EINVAL, "auth token file %s: empty", file);
        return -EINVAL;
    }
    w->token = t;
    w->token_len = n;
    return 0;
}

int ag_web_load(struct ag_web **out, const char *web_config, const char *token_file,
                bool healthz_open, struct ss_err *err)
{
    *out = NULL;
    if (!web_config && !token_file) return 0;
    struct ag_web *w = calloc(1, sizeof(*w));
    if (!w) return -ENOMEM;
    w->min_version = 12;
    w->healthz_open = healthz_open;
    pthread_mutex_init(&w->mu, NULL);
    int rc = 0;
    if (web_config && (rc = parse_config(w, web_config, err)) == 0 && w->tls)
        rc = check_pems(w, web_config, err);
    if (!rc && token_file) rc = load_token(w, token_file, err);
    if (rc < 0) {
        ag_web_free(w);
        return rc;
    }
    /* GnuTLS priorities: the versions from min_version to max_version */
    static const char *const vers[] = {"+VERS-TLS1.0", "+VERS-TLS1.1", "+VERS-TLS1.2",
                                       "+VERS-TLS1.3"};
    int hi = w->max_version ? w->max_version : 13;
    int n = snprintf(w->priorities, sizeof(w->priorities), "NORMAL:-VERS-ALL");
    for (int v = w->min_version; v <= hi; v++)
        n += snprintf(w->priorities + n, sizeof(w->priorities) - (size_t)n, ":%s", vers[v - 10]);
    *out = w;
    return 0;
}

static void wipe_free(char *s)
{
    if (!s) return;
    gnutls_memset(s, 0, strlen(s));
    free(s);
}

void ag_web_free(struct ag_web *w)
{
    if (!w) return;
    free(w->cert_pem);
    wipe_free(w->key_pem);
    free(w->ca_pem);
    wipe_free(w->token);
    for (size_t i = 0; i < w->nusers; i++) {
        free(w->users[i].user);
        free(w->users[i].hash);
    }
    free(w->users);
    gnutls_memset(w->good, 0, sizeof(w->good));
    pthread_mutex_destroy(&w->mu);
    free(w);
}
