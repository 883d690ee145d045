/* test/capture/ringbuf.h: for criterion tests of the ring buffer program. */
#ifndef SS_TEST_CAPTURE_RINGBUF_H
#define SS_TEST_CAPTURE_RINGBUF_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "stacksnap/capture.h"

/* c was opened without compat but fell back to it: close c, then skip
 * loudly when this kernel lacks what the ring buffer program needs (the
 * kernel matrix boots 5.10), else fail (the program was rejected). */
static inline void need_ringbuf(struct ss_capture *c)
{
    char why[512];
    snprintf(why, sizeof(why), "%s", ss_capture_fallback_reason(c));
    ss_capture_close(c);
    if (!strncmp(why, "the kernel has no", 17))
        cr_skip_test("SKIP: the ring buffer program needs more than this kernel has: %s", why);
    cr_assert_fail("the ring buffer program did not load: %s", why);
}

#endif
