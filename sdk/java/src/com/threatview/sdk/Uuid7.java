package com.threatview.sdk;

import java.security.SecureRandom;

/**
 * Uuid7 makes time-ordered UUIDv7 strings (RFC 9562): 48 bits of Unix
 * ms, then a 12-bit counter that keeps ids made in the same ms in order
 * (method 1 of the RFC), then 62 random bits.
 */
final class Uuid7 {
    private final SecureRandom random = new SecureRandom();
    private final Clock clock;
    private long lastMs = -1;
    private int counter;

    Uuid7(Clock clock) {
        this.clock = clock;
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    /** next returns a new id, greater than every id this generator made before (unless the clock moved back a lot). */
    synchronized String next() {
        long ms = clock.nowMillis();
        if (ms <= lastMs) {
            // Same ms (or a clock that stepped back): count on from the last id.
            ms = lastMs;
            counter++;
            if (counter > 0xfff) {
                ms++;
                counter = random.nextInt(0x800);
            }
        } else {
            // A random start in the lower half leaves room to count.
            counter = random.nextInt(0x800);
        }
        lastMs = ms;
        long hi = (ms & 0xffffffffffffL) << 16 | 0x7000L | counter;
        long lo = random.nextLong() & 0x3fffffffffffffffL | 0x8000000000000000L;
        char[] c = new char[36];
        int p = 0;
        for (int i = 15; i >= 0; i--) {
            c[p++] = HEX[(int) (hi >>> (i * 4)) & 15];
            if (p == 8 || p == 13) {
                c[p++] = '-';
            }
        }
        c[p++] = '-';
        for (int i = 15; i >= 0; i--) {
            c[p++] = HEX[(int) (lo >>> (i * 4)) & 15];
            if (p == 23) {
                c[p++] = '-';
            }
        }
        return new String(c);
    }
}
