/* util/err.c: the error message buffer and enum-to-text helpers of ss.h. */
#include <stdarg.h>
#include <stdio.h>

#include "stacksnap/ss.h"

void ss_err_set(struct ss_err *e, int code, const char *fmt, ...)
{
    if (!e || e->code) /* keep the first (innermost) cause */
        return;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
}

const char *ss_trunc_str(enum ss_trunc t)
{
    switch (t) {
    case SS_TRUNC_NONE:
        return "complete";
    case SS_TRUNC_SNAPSHOT:
        return "end of stack snapshot";
    case SS_TRUNC_NOINFO:
        return "no unwind info";
    case SS_TRUNC_BADIP:
        return "ip outside mappings";
    case SS_TRUNC_LOOP:
        return "repeated frame";
    case SS_TRUNC_DEPTH:
        return "frame limit";
    case SS_TRUNC_ERROR:
        return "unwind error";
    }
    return "?";
}

const char *ss_proc_event_str(uint32_t kind)
{
    switch (kind) {
    case SS_PROC_FORK:
        return "fork";
    case SS_PROC_EXEC:
        return "exec";
    case SS_PROC_EXIT:
        return "exit";
    }
    return "?";
}
