/* test/report/fixture: the hand-made corpus and helpers (fixture.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"

static char *S(struct fx *fx, const char *s)
{
    if (!s) return NULL;
    char *d = strdup(s);
    if (fx->nstrs == fx->capstrs) {
        fx->capstrs = fx->capstrs ? 2 * fx->capstrs : 256;
        fx->strs = realloc(fx->strs, fx->capstrs * sizeof(*fx->strs));
    }
    fx->strs[fx->nstrs++] = d;
    return d;
}

#define LIBLJ "/usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2.1.0"
#define EXE "/usr/bin/luajit"
#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define LJ_BIAS 0x7f0000000000ull
#define EXE_BIAS 0x555555554000ull
#define LIBC_BIAS 0x7f1000000000ull

static struct ss_frame nat(struct fx *fx, const char *name, const char *mod, uint64_t bias,
                           uint64_t off, uint8_t bid)
{
    struct ss_frame f = {.kind = SS_FRAME_NATIVE, .addr = bias + off, .offset = off};
    f.name = S(fx, name);
    f.module = S(fx, mod);
    if (bid) {
        f.build_id_len = 20;
        for (int i = 0; i < 20; i++)
            f.build_id[i] = (uint8_t)(bid + i);
    }
    return f;
}

static struct ss_frame lua(struct fx *fx, const char *name, const char *chunk, uint32_t line,
                           uint32_t first)
{
    struct ss_frame f = {.kind = SS_FRAME_LUA,
                         .addr = 0x40000000 + (fx->bc += 4),
                         .line = line,
                         .first_line = first};
    f.name = S(fx, name);
    f.module = S(fx, chunk);
    return f;
}

static struct ss_frame kern(struct fx *fx, const char *name, uint64_t addr)
{
    return (struct ss_frame){.kind = SS_FRAME_KERNEL, .addr = addr, .name = S(fx, name)};
}

static struct ss_frame pseudo(struct fx *fx, const char *name)
{
    return (struct ss_frame){.kind = SS_FRAME_PSEUDO, .name = S(fx, name)};
}

/* The native bottom of every luajit stack: lua_pcall <- main <- __libc_start_main. */
static size_t base(struct fx *fx, struct ss_frame *f)
{
    f[0] = nat(fx, "lua_pcall", LIBLJ, LJ_BIAS, 0x1000, 0x11);
    f[1] = nat(fx, "main", EXE, EXE_BIAS, 0x2000, 0x22);
    f[2] = nat(fx, "__libc_start_main", LIBC, LIBC_BIAS, 0x3000, 0x33);
    return 3;
}

static void add(struct fx *fx, const char *comm, uint32_t pid, uint32_t tid, uint64_t count,
                struct ss_frame *fr, size_t n)
{
    struct fx_sample *s = &fx->s[fx->n++];
    memset(s, 0, sizeof(*s));
    strncpy(s->st.comm, comm, sizeof(s->st.comm) - 1);
    s->st.pid = pid;
    s->st.tid = tid;
    s->st.cpu = (uint32_t)(fx->n % 4);
    s->st.time_ns = 1000000000ull * (1000 + fx->n) + 123456789ull;
    s->st.nframes = (uint32_t)n;
    s->st.frames = n ? calloc(n, sizeof(*fr)) : NULL;
    if (n) memcpy(s->st.frames, fr, n * sizeof(*fr));
    s->count = count;
    fx->total += count;
}

void fx_build(struct fx *fx)
{
    struct ss_frame f[FX_DEEP + 8];
    size_t n;
    memset(fx, 0, sizeof(*fx));
    fx->s = calloc(32, sizeof(*fx->s));

    /* S1: Lua over the VM */
    n = 0;
    f[n++] = lua(fx, "leaf", "test.lua", 12, 10);
    f[n++] = lua(fx, "M.run", "test.lua", 30, 25);
    f[n++] = lua(fx, "main", "test.lua", 40, 0);
    n += base(fx, f + n);
    add(fx, "luajit", 100, 100, 3, f, n);
    /* S2: other line of leaf, other thread */
    f[0] = lua(fx, "leaf", "test.lua", 13, 10);
    add(fx, "luajit", 100, 101, 2, f, n);
    /* S3: a builtin over leaf */
    n = 0;
    f[n++] = lua(fx, "string.rep", NULL, 0, 0);
    f[n++] = lua(fx, "leaf", "test.lua", 12, 10);
    f[n++] = lua(fx, "M.run", "test.lua", 30, 25);
    f[n++] = lua(fx, "main", "test.lua", 40, 0);
    n += base(fx, f + n);
    add(fx, "luajit", 100, 100, 4, f, n);
    /* S4: unsymbolized natives */
    n = 0;
    f[n++] = nat(fx, NULL, NULL, 0, 0xdeadbeef, 0);
    f[n++] = nat(fx, NULL, "/usr/lib/libfoo.so", 0x7f2000000000ull, 0x1234, 0x44);
    n += base(fx, f + n);
    add(fx, "luajit", 100, 100, 1, f, n);
    /* S5: kernel frames (one without a symbol) over a libc call from Lua */
    n = 0;
    f[n++] = kern(fx, NULL, 0xffffffff81000010ull);
    f[n++] = kern(fx, "clear_page_erms", 0xffffffff81234567ull);
    f[n++] = kern(fx, "do_syscall_64", 0xffffffff81345678ull);
    f[n++] = nat(fx, "write", LIBC, LIBC_BIAS, 0x4000, 0x33);
    f[n++] = lua(fx, "io.write", NULL, 0, 0);
    f[n++] = lua(fx, "leaf", "test.lua", 12, 10);
    n += base(fx, f + n);
    add(fx, "luajit", 100, 100, 1, f, n);
    /* S6: pseudo frame */
    n = 0;
    f[n++] = pseudo(fx, "[GC]");
    f[n++] = lua(fx, "M.run", "test.lua", 31, 25);
    n += base(fx, f + n);
    add(fx, "luajit", 100, 100, 2, f, n);
    /* S7: ';', spaces and UTF-8 in names */
    n = 0;
    f[n++] = nat(fx, "weird;name with spaces", LIBLJ, LJ_BIAS, 0x1800, 0x11);
    f[n++] = lua(fx, "obj:method", "my dir/a;b.lua", 3, 1);
    f[n++] = nat(fx, "na\xc3\xafve \xe2\x86\x92 caf\xc3\xa9", LIBLJ, LJ_BIAS, 0x1900, 0x11);
    n += base(fx, f + n);
    add(fx, "luajit", 100, 100, 1, f, n);
    /* S8: non-UTF-8 chunk, quotes and parens, "->", backslashes, no name */
    n = 0;
    f[n++] = lua(fx, "f", "bad\xff\xfe.lua", 7, 5);
    f[n++] = lua(fx, "a->b", "x.lua", 2, 1);
    f[n++] = lua(fx, NULL, "[string \"x(1)\"]", 1, 0);
    f[n++] = lua(fx, "g", "C:\\dir\\x.lua", 9, 8);
    n += base(fx, f + n);
    add(fx, "luajit", 100, 100, 1, f, n);
    /* S9: empty stacks */
    add(fx, "idle", 300, 300, 2, f, 0);
    /* S10, S11: same text at two addresses and threads of a comm with spaces */
    f[0] = nat(fx, "foo", "/opt/app/bin/app", 0x400000, 0x1100, 0x55);
    f[1] = nat(fx, "main", "/opt/app/bin/app", 0x400000, 0x1000, 0x55);
    add(fx, "V8 Worker 2", 200, 201, 1, f, 2);
    f[0] = nat(fx, "foo", "/opt/app/bin/app", 0x400000, 0x1110, 0x55);
    add(fx, "V8 Worker 2", 200, 202, 1, f, 2);
    /* S12: ';' and spaces in the comm */
    f[0] = nat(fx, "bar", "/opt/app/bin/app", 0x400000, 0x1200, 0x55);
    add(fx, "a;b c", 400, 400, 1, f, 1);
    /* S13: FX_DEEP frames */
    n = 0;
    for (; n < FX_DEEP - 2; n++)
        f[n] = lua(fx, "rec", "deep.lua", 5, 4);
    f[n++] = lua(fx, "main", "deep.lua", 9, 0);
    f[n++] = nat(fx, "main", EXE, EXE_BIAS, 0x2000, 0x22);
    add(fx, "luajit", 100, 100, 1, f, n);
}

void fx_poison(struct fx *fx)
{
    for (size_t i = 0; i < fx->nstrs; i++)
        memset(fx->strs[i], 'X', strlen(fx->strs[i]));
}

void fx_free(struct fx *fx)
{
    for (size_t i = 0; i < fx->n; i++)
        free(fx->s[i].st.frames);
    free(fx->s);
    for (size_t i = 0; i < fx->nstrs; i++)
        free(fx->strs[i]);
    free(fx->strs);
    memset(fx, 0, sizeof(*fx));
}

struct ss_report *fx_report(const struct fx *fx, uint32_t freq)
{
    struct ss_err err = {0};
    struct ss_report_opts o = {.freq_hz = freq, .title = "fixture <&> \"flame\""};
    struct ss_report *r = ss_report_new(&o, &err);
    if (!r) return NULL;
    for (size_t i = 0; i < fx->n; i++) {
        struct ss_stack st = fx->s[i].st;
        if (i % 2 == 0) {
            for (uint64_t k = 0; k < fx->s[i].count; k++, st.time_ns += 10000000)
                if (ss_report_add(r, &st, 1, &err)) goto fail;
        } else if (ss_report_add(r, &st, fx->s[i].count, &err)) {
            goto fail;
        }
    }
    return r;
fail:
    ss_report_free(r);
    return NULL;
}

char *fx_tmpdir(void)
{
    char *d = strdup("/tmp/ss-report-XXXXXX");
    if (!mkdtemp(d)) {
        free(d);
        return NULL;
    }
    return d;
}

void fx_rmdir(char *dir)
{
    if (!dir) return;
    char *cmd;
    if (asprintf(&cmd, "rm -rf '%s'", dir) > 0) {
        if (system(cmd)) {
        }
        free(cmd);
    }
    free(dir);
}

char *fx_path(const char *dir, const char *name)
{
    char *p;
    return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

char *fx_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            buf = realloc(buf, cap);
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (!k) break;
    }
    fclose(f);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

int fx_run(const char *cmd, char **out)
{
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            buf = realloc(buf, cap);
        }
        size_t k = fread(buf + n, 1, cap - n - 1, p);
        n += k;
        if (!k) break;
    }
    buf[n] = '\0';
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int fx_have(const char *prog)
{
    char *cmd;
    if (asprintf(&cmd, "command -v '%s' >/dev/null 2>&1", prog) < 0) return 0;
    int ok = system(cmd) == 0;
    free(cmd);
    return ok;
}

struct fx_lines fx_split(const char *text)
{
    struct fx_lines ls = {0};
    size_t cap = 0;
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (ls.n == cap) {
            cap = cap ? cap * 2 : 64;
            ls.l = realloc(ls.l, cap * sizeof(*ls.l));
        }
        ls.l[ls.n++] = strndup(p, n);
        p += n + (e ? 1 : 0);
    }
    return ls;
}

void fx_lines_free(struct fx_lines *ls)
{
    for (size_t i = 0; i < ls->n; i++)
        free(ls->l[i]);
    free(ls->l);
    memset(ls, 0, sizeof(*ls));
}

static int cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct fx_lines fx_folded_canon(const struct fx_lines *in)
{
    struct fx_lines out = {0};
    char **tmp = calloc(in->n + 1, sizeof(*tmp));
    for (size_t i = 0; i < in->n; i++)
        tmp[i] = in->l[i];
    /* sort by the stack part: compare "stack\x02count" copies (stacks may use
     * \x01 between frames; \x02 keeps equal stacks adjacent) */
    char **keyed = calloc(in->n + 1, sizeof(*keyed));
    for (size_t i = 0; i < in->n; i++) {
        keyed[i] = strdup(tmp[i]);
        char *sp = strrchr(keyed[i], ' ');
        if (sp) *sp = '\002';
    }
    qsort(keyed, in->n, sizeof(*keyed), cmpstr);
    out.l = calloc(in->n + 1, sizeof(*out.l));
    for (size_t i = 0; i < in->n;) {
        char *sep = strrchr(keyed[i], '\002');
        size_t klen = sep ? (size_t)(sep - keyed[i]) : strlen(keyed[i]);
        unsigned long long sum = 0;
        size_t j = i;
        for (; j < in->n; j++) {
            char *s2 = strrchr(keyed[j], '\002');
            size_t k2 = s2 ? (size_t)(s2 - keyed[j]) : strlen(keyed[j]);
            if (k2 != klen || memcmp(keyed[i], keyed[j], klen)) break;
            sum += s2 ? strtoull(s2 + 1, NULL, 10) : 0;
        }
        char *line;
        if (asprintf(&line, "%.*s %llu", (int)klen, keyed[i], sum) < 0) line = NULL;
        out.l[out.n++] = line;
        i = j;
    }
    for (size_t i = 0; i < in->n; i++)
        free(keyed[i]);
    free(keyed);
    free(tmp);
    return out;
}

char *fx_write(const struct ss_report *r, const char *dir, const char *name)
{
    char *p = fx_path(dir, name);
    struct ss_err err = {0};
    if (ss_report_save(r, p, &err)) {
        fprintf(stderr, "fx_write %s: %s\n", p, err.msg);
        free(p);
        return NULL;
    }
    return p;
}
