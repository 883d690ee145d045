/* agent/listen.c: the agent's listening socket — TCP "HOST:PORT" (IPv6 as
 * "[ADDR]:PORT") or a Unix socket "unix:PATH". The socket is handed to
 * libmicrohttpd as is. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/agent_int.h"

static int listen_unix(const char *path, char *desc, size_t desclen, struct ss_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!*path || strlen(path) >= sizeof(sa.sun_path)) {
        ss_err_set(err, -EINVAL, "listen address unix:%s: path empty or longer than %zu bytes",
                   path, sizeof(sa.sun_path) - 1);
        return -EINVAL;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path); /* a stale socket */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        ss_err_set(err, -e, "listen on unix:%s: %s", path, strerror(e));
        return -e;
    }
    snprintf(desc, desclen, "unix:%s", path);
    return fd;
}

int ag_listen(const char *spec, char *desc, size_t desclen, struct ss_err *err)
{
    if (!strncmp(spec, "unix:", 5)) return listen_unix(spec + 5, desc, desclen, err);
    char host[256];
    const char *colon = strrchr(spec, ':');
    size_t hl = colon ? (size_t)(colon - spec) : 0;
    if (!colon || hl == 0 || hl >= sizeof(host) || !colon[1]) {
        ss_err_set(err, -EINVAL, "bad listen address '%s' (HOST:PORT or unix:PATH)", spec);
        return -EINVAL;
    }
    memcpy(host, spec, hl);
    host[hl] = 0;
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') { /* [::1]:PORT */
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, colon + 1, &hints, &res);
    if (g) {
        ss_err_set(err, -EINVAL, "bad listen address '%s': %s", spec, gai_strerror(g));
        return -EINVAL;
    }
    int fd = -1, e = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
            e = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        ss_err_set(err, -e, "listen on %s: %s", spec, strerror(e));
        return -e;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char num[64] = "?";
    int port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        getnameinfo((struct sockaddr *)&ss, sl, num, sizeof(num), NULL, 0, NI_NUMERICHOST) == 0)
        port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                        : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    snprintf(desc, desclen, ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", num, port);
    return fd;
}
