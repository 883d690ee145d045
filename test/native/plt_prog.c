/* test/native/plt_prog.c: a program whose calls go through the PLT (libm
 * and libc functions, -fno-builtin) plus a local IFUNC (an
 * R_X86_64_IRELATIVE .rela.plt entry), for test/native/plt_test.c. Built
 * with an IBT PLT (.plt.sec) and a plain one; only its file is inspected. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int twice_impl(int x)
{
    return 2 * x;
}
static int (*twice_resolve(void))(int)
{
    return twice_impl;
}
int twice(int x) __attribute__((ifunc("twice_resolve")));

int main(int argc, char **argv)
{
    volatile double x = argc * 0.25;
    double r = sin(x) + cos(x) + tan(x) + asin(x) + acos(x) + atan(x) + sinh(x) + cosh(x) +
               tanh(x) + exp(x) + exp2(x) + expm1(x) + log(x + 1) + log2(x + 1) + log10(x + 1) +
               log1p(x) + sqrt(x) + cbrt(x) + floor(x) + ceil(x) + round(x) + trunc(x) + erf(x) +
               erfc(x) + tgamma(x + 1) + lgamma(x + 1) + atan2(x, 1) + pow(x, 2) + hypot(x, 1) +
               fmod(x, 1);
    char buf[64];
    snprintf(buf, sizeof(buf), "%f %d", r, twice(argc));
    puts(buf);
    if (getenv("PLT_PROG_ECHO")) fputs(argv[0], stdout);
    return (int)strlen(buf) & 1;
}
