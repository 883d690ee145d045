/* unwind/a64call.h: is the arm64 instruction before a return address a
 * call? For the checks of return addresses found without CFI, by the arm64
 * build's stack scan (native_scan.c) and by an x86-64 build walking an
 * arm64 capture (foreign.c). */
#ifndef SS_UNWIND_A64CALL_H
#define SS_UNWIND_A64CALL_H

#include <stdint.h>

enum { SS_A64_CALL_IND = 1, SS_A64_CALL_DIR = 2 };

/* b: the 4 bytes before ra. BL (direct: its target in *target), BLR or one
 * of BLRAA, BLRAB, BLRAAZ, BLRABZ (indirect), else 0. */
static inline unsigned ss_a64_call(const uint8_t b[4], uint64_t ra, uint64_t *target)
{
    uint32_t i = b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if ((i & 0xfc000000u) == 0x94000000u) {
        int64_t imm = (int64_t)((uint64_t)(i & 0x03ffffffu) << 38) >> 36; /* imm26 * 4 */
        *target = ra - 4 + (uint64_t)imm;
        return SS_A64_CALL_DIR;
    }
    return (i & 0xfffffc1fu) == 0xd63f0000u || (i & 0xfefff800u) == 0xd63f0800u ? SS_A64_CALL_IND
                                                                                : 0;
}

#endif
