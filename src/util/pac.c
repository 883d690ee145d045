/* util/pac.c: ss_pac_mask (see pac.h). */
#include "util/pac.h"

#if defined(__aarch64__)
/* Bit 55 selects the lower (user) half: clear, so that XPACLRI fills the
 * signature field with zeros. */
#define PAC_PROBE (~(1ull << 55))

__attribute__((noinline)) uint64_t ss_pac_mask(void)
{
    uint64_t v;
    /* xpaclri is "hint #7": x30 in, x30 out; older assemblers know the hint */
    __asm__ volatile("mov x30, %1\n\thint #7\n\tmov %0, x30" : "=r"(v) : "r"(PAC_PROBE) : "x30");
    return v ^ PAC_PROBE;
}
#else
uint64_t ss_pac_mask(void)
{
    return 0;
}
#endif
