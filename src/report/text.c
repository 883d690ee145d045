/* report/text: frame text and escapes (text.h). */
#include <stdio.h>
#include <string.h>

#include "stacksnap/report.h"
#include "report/text.h"

size_t rp_utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return (c < 0x20 || c == 0x7f) ? 0 : 1;
    size_t len;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    if (cp == 0xfffe || cp == 0xffff) /* not XML characters */
        return 0;
    return len;
}

static void hex(struct rp_buf *b, unsigned char c)
{
    static const char d[] = "0123456789abcdef";
    char e[4] = {'\\', 'x', d[c >> 4], d[c & 15]};
    rp_buf_put(b, e, 4);
}

/* Printable ASCII that mode writes as itself, whatever is around it: a
 * bit per character 0x00-0x7f (controls and DEL never). */
static void plain_set(enum rp_esc mode, uint64_t *lo, uint64_t *hi)
{
    const char *special = "";
    switch (mode) {
    case RP_ESC_DISPLAY:
        break;
    case RP_ESC_FOLDED:
        special = "\\;";
        break;
    case RP_ESC_PERF_SYM:
        special = "\\();\"'>";
        break;
    case RP_ESC_PERF_DSO:
        special = " ";
        break;
    case RP_ESC_PERF_COMM:
        special = "; ";
        break;
    case RP_ESC_XML:
        special = "&<>\"'";
        break;
    }
    *lo = ~0ull << 0x20; /* 0x20-0x3f */
    *hi = ~0ull >> 1;    /* 0x40-0x7e */
    for (const char *c = special; *c; c++) {
        unsigned v = (unsigned char)*c;
        if (v < 64)
            *lo &= ~(1ull << v);
        else
            *hi &= ~(1ull << (v - 64));
    }
}

void rp_escape(struct rp_buf *b, const char *str, size_t n, enum rp_esc mode)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    uint64_t lo, hi;
    plain_set(mode, &lo, &hi);
    while (i < n) {
        /* a run of characters written as they are, in one copy */
        size_t j = i;
        for (; j < n; j++) {
            unsigned c = s[j];
            if (c >= 0x80 || !((c < 64 ? lo >> c : hi >> (c - 64)) & 1)) break;
        }
        if (j > i) {
            rp_buf_put(b, s + i, j - i);
            i = j;
            if (i == n) break;
        }
        size_t k = rp_utf8_seq(s + i, n - i);
        if (!k) {
            hex(b, s[i++]);
            continue;
        }
        if (k > 1) {
            rp_buf_put(b, s + i, k);
            i += k;
            continue;
        }
        unsigned char c = s[i];
        switch (mode) {
        case RP_ESC_DISPLAY:
            break;
        case RP_ESC_FOLDED:
            if (c == '\\') {
                rp_buf_put(b, "\\\\", 2);
                i++;
                continue;
            }
            if (c == ';') goto esc;
            break;
        case RP_ESC_PERF_SYM:
            if (c == '\\') {
                rp_buf_put(b, "\\\\", 2);
                i++;
                continue;
            }
            if (strchr("();\"'", c) || (c == '>' && i > 0 && s[i - 1] == '-')) goto esc;
            break;
        case RP_ESC_PERF_DSO:
            if (c == ' ') goto esc;
            break;
        case RP_ESC_PERF_COMM:
            if (c == ';' ||
                (c == ' ' && (i == 0 || (i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9'))))
                goto esc;
            break;
        case RP_ESC_XML:
            switch (c) {
            case '&':
                rp_buf_puts(b, "&amp;");
                i++;
                continue;
            case '<':
                rp_buf_puts(b, "&lt;");
                i++;
                continue;
            case '>':
                rp_buf_puts(b, "&gt;");
                i++;
                continue;
            case '"':
                rp_buf_puts(b, "&quot;");
                i++;
                continue;
            case '\'':
                rp_buf_puts(b, "&#39;");
                i++;
                continue;
            }
            break;
        }
        rp_buf_putc(b, (char)c);
        i++;
        continue;
    esc:
        hex(b, c);
        i++;
    }
}

const char *rp_basename(const char *path)
{
    const char *s = strrchr(path, '/');
    return s && s[1] ? s + 1 : path;
}

static int set(const char *s)
{
    return s && *s;
}

void rp_frame_text(struct rp_buf *b, const struct rp_frame_view *f, int func)
{
    switch (f->kind) {
    case SS_FRAME_LUA:
        rp_buf_puts(b, set(f->name) ? f->name : "anonymous");
        if (set(f->module)) rp_buf_printf(b, " (%s:%u)", f->module, func ? f->first_line : f->line);
        return;
    case SS_FRAME_PSEUDO:
        rp_buf_puts(b, set(f->name) ? f->name : "[unknown]");
        return;
    case SS_FRAME_KERNEL:
        if (set(f->name))
            rp_buf_puts(b, f->name);
        else if (set(f->module))
            rp_buf_printf(b, "%s+0x%llx", rp_basename(f->module), (unsigned long long)f->offset);
        else
            rp_buf_printf(b, "[kernel.kallsyms]+0x%llx", (unsigned long long)f->addr);
        rp_buf_puts(b, "_[k]");
        return;
    default: /* native, and unknown kinds treated as native */
        if (set(f->name))
            rp_buf_puts(b, f->name);
        else if (set(f->module))
            rp_buf_printf(b, "%s+0x%llx", rp_basename(f->module), (unsigned long long)f->offset);
        else
            rp_buf_printf(b, "[unknown]+0x%llx", (unsigned long long)f->addr);
        return;
    }
}

size_t ss_frame_text(const struct ss_frame *f, char *buf, size_t len)
{
    struct rp_frame_view v = {f->kind,   f->addr, f->offset,    f->name,
                              f->module, f->line, f->first_line};
    struct rp_buf b = {0};
    rp_frame_text(&b, &v, 0);
    size_t n = b.oom ? 0 : b.len;
    if (len) {
        size_t c = n < len ? n : len - 1;
        if (c) memcpy(buf, b.p, c);
        buf[c] = '\0';
    }
    rp_buf_free(&b);
    return n;
}

const char *ss_frame_kind_str(uint8_t kind)
{
    switch (kind) {
    case SS_FRAME_NATIVE:
        return "native";
    case SS_FRAME_LUA:
        return "lua";
    case SS_FRAME_KERNEL:
        return "kernel";
    case SS_FRAME_PSEUDO:
        return "pseudo";
    }
    return "?";
}
