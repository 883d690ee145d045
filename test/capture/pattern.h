/* test/capture/pattern.h: the 64-byte pattern the capture workload keeps in
 * its spinning frame, and the line it prints when it spins. */
#ifndef SS_TEST_CAPTURE_PATTERN_H
#define SS_TEST_CAPTURE_PATTERN_H

#define SS_PATTERN_LEN 64
#define SS_PATTERN "stacksnap-capture-test:0123456789abcdefghijklmnopqrstuvwxyz!?#@%"

/* "ready pid=P tid=T fn=0xF size=N pat=0xA top=0xT\n": fn/size from the
 * spinning function's dynamic symbol, pat the pattern's address, top the
 * end of the readable stack (0 when not known). */
#define SS_READY_FMT "ready pid=%d tid=%d fn=%lx size=%lu pat=%lx top=%lx"

#endif
