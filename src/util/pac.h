/* util/pac.h: the pointer-authentication (PAC) bits of user code addresses
 * on this machine, learned in our own process without ptrace. */
#ifndef SS_UTIL_PAC_H
#define SS_UTIL_PAC_H

#include <stdint.h>

/* The bits an arm64 kernel with pointer authentication puts a return
 * address's signature in (bits 54..VA_BITS, and the top byte when top-byte
 * ignore is off): the same for every user process of the running kernel, as
 * it depends only on the kernel's VA size. XPACLRI (a hint: a no-op on CPUs
 * without PAC) on a value with every bit but 55 set clears exactly those
 * bits. 0 on x86-64 and on arm64 CPUs without PAC. */
uint64_t ss_pac_mask(void);

/* The mask for an arm64 capture that does not say (recorded before captures
 * kept the recording machine's mask, or on a CPU without PAC: 0 either
 * way): the bits above a 48-bit user address space, which no user address
 * of such a kernel has, so stripping them is exact with or without PAC. */
#define SS_PAC_DEFAULT (~((UINT64_C(1) << 48) - 1))

/* addr without its signature: mask from ss_pac_mask (or a capture's). */
static inline uint64_t ss_pac_strip(uint64_t addr, uint64_t mask)
{
    return addr & ~mask;
}

#endif
