/* agent/httplog.c: client errors — what a hostile or broken client costs the
 * log. Each error is counted by reason (stacksnap_http_client_errors_total
 * {reason}); the first one of each reason is logged as is, the later ones
 * only in a summary line with their counts, at most once every
 * AG_CE_LOG_EVERY seconds, so no client can flood the journal.
 * libmicrohttpd's own messages are sorted into reasons by their text. */
#include <stdio.h>
#include <string.h>

#include "agent/agent_int.h"

static const char *const ce_names[AG_CE_N] = {
    [AG_CE_REQUEST] = "request",
    [AG_CE_UNAUTHORIZED] = "unauthorized",
    [AG_CE_CLIENT_CERT] = "client_cert",
    [AG_CE_MALFORMED] = "malformed",
    [AG_CE_OVERSIZE] = "oversize",
    [AG_CE_INCOMPLETE] = "incomplete",
    [AG_CE_NETWORK] = "network",
    [AG_CE_LIMIT] = "limit",
    [AG_CE_TLS] = "tls",
    [AG_CE_OTHER] = "other",
};

const char *ag_ce_name(enum ag_ce r)
{
    return r < AG_CE_N ? ce_names[r] : "other";
}

void ag_ce_count(struct ss_agent *a, enum ag_ce r, const char *msg)
{
    if (r >= AG_CE_N) r = AG_CE_OTHER;
    pthread_mutex_lock(&a->ce.mu);
    a->ce.total[r]++;
    bool say = !a->ce.said[r];
    if (say)
        a->ce.said[r] = true;
    else
        a->ce.pending[r]++;
    pthread_mutex_unlock(&a->ce.mu);
    if (say)
        ag_log(a,
               "http: %s (client error '%s'; the next ones are counted in "
               "stacksnap_http_client_errors_total and summarised every %.0f s)",
               msg ? msg : "client error", ce_names[r], AG_CE_LOG_EVERY);
}

/* libmicrohttpd's messages (0.9.75) by what they say about the client. */
static enum ag_ce classify(const char *m)
{
    if (strstr(m, "incomplete request")) return AG_CE_INCOMPLETE;
    if (strstr(m, "Failed to parse") || strstr(m, "malformed")) return AG_CE_MALFORMED;
    const char *code = strstr(m, "HTTP response code is ");
    if (code) {
        int c = 0;
        sscanf(code + strlen("HTTP response code is "), "%d", &c);
        if (c == 413 || c == 414 || c == 431) return AG_CE_OVERSIZE;
        return c == 400 ? AG_CE_MALFORMED : AG_CE_OTHER;
    }
    if (strstr(m, "connection limit") || strstr(m, "per IP") || strstr(m, "per-IP") ||
        strstr(m, "Too many"))
        return AG_CE_LIMIT;
    if (strstr(m, "TLS") || strstr(m, "handshake") || strstr(m, "GnuTLS") || strstr(m, "gnutls") ||
        strstr(m, "certificate"))
        return AG_CE_TLS;
    if (strstr(m, "reset") || strstr(m, "Failed to send") || strstr(m, "Failed to receive") ||
        strstr(m, "closed by remote") || strstr(m, "timed out") || strstr(m, "Broken pipe"))
        return AG_CE_NETWORK;
    return AG_CE_OTHER;
}

void ag_ce_mhd(struct ss_agent *a, const char *msg)
{
    ag_ce_count(a, classify(msg), msg);
}

void ag_ce_tick(struct ss_agent *a, double now, bool final)
{
    char line[512];
    size_t n = 0;
    uint64_t sum = 0;
    pthread_mutex_lock(&a->ce.mu);
    double span = now - a->ce.last;
    if (final || span >= AG_CE_LOG_EVERY) {
        for (int r = 0; r < AG_CE_N; r++) {
            if (!a->ce.pending[r]) continue;
            sum += a->ce.pending[r];
            int w = snprintf(line + n, sizeof(line) - n, "%s%s %llu", n ? ", " : "", ce_names[r],
                             (unsigned long long)a->ce.pending[r]);
            if (w > 0 && (size_t)w < sizeof(line) - n) n += (size_t)w;
            a->ce.pending[r] = 0;
        }
        a->ce.last = now;
    }
    pthread_mutex_unlock(&a->ce.mu);
    line[n] = 0;
    if (sum)
        ag_log(a, "http: %llu more client errors in the last %.0f s (%s)", (unsigned long long)sum,
               span, line);
}

void ag_ce_totals(struct ss_agent *a, uint64_t out[AG_CE_N])
{
    pthread_mutex_lock(&a->ce.mu);
    memcpy(out, a->ce.total, sizeof(a->ce.total));
    pthread_mutex_unlock(&a->ce.mu);
}
