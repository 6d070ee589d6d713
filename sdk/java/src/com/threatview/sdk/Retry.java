package com.threatview.sdk;

import java.text.ParseException;
import java.text.SimpleDateFormat;
import java.util.Locale;
import java.util.Random;
import java.util.TimeZone;

/** Retry holds the rules for trying a batch again; they are pure, so tests need no clock. */
final class Retry {
    private Retry() {}

    /** MAX_RETRY_AFTER_MS caps a Retry-After the SDK honours (5 minutes). */
    static final long MAX_RETRY_AFTER_MS = 5 * 60 * 1000L;

    /**
     * retryable says whether the same batch may be sent again: no answer
     * (status 0), 408, 429 or any 5xx. Every event carries its event_id,
     * so a batch that was in fact accepted is stored once however often
     * it goes. Any other 4xx is a definite refusal.
     */
    static boolean retryable(int status) {
        return status == 0 || status == 408 || status == 429 || status >= 500;
    }

    /**
     * backoff is the wait before attempt failures+1: minMs doubled per
     * failure up to maxMs, jittered between half and all of it ("equal
     * jitter"), and never shorter than retryAfterMs plus up to 10 %, so
     * clients told the same Retry-After do not come back together.
     */
    static long backoff(int failures, long retryAfterMs, long minMs, long maxMs, Random r) {
        long d = minMs;
        for (int i = 1; i < failures && d < maxMs; i++) {
            d *= 2;
        }
        if (d > maxMs) {
            d = maxMs;
        }
        d = d / 2 + (long) (r.nextDouble() * (d / 2 + 1));
        if (retryAfterMs > 0) {
            long ra = retryAfterMs + (long) (r.nextDouble() * (retryAfterMs / 10 + 1));
            if (ra > d) {
                d = ra;
            }
        }
        return d;
    }

    /** parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or unreadable, at most MAX_RETRY_AFTER_MS. */
    static long parseRetryAfter(String v, long nowMs) {
        if (v == null) {
            return 0;
        }
        v = v.trim();
        if (v.isEmpty()) {
            return 0;
        }
        long d = 0;
        try {
            long sec = Long.parseLong(v);
            d = sec > MAX_RETRY_AFTER_MS / 1000 ? MAX_RETRY_AFTER_MS : sec * 1000L;
        } catch (NumberFormatException e) {
            SimpleDateFormat f = new SimpleDateFormat("EEE, dd MMM yyyy HH:mm:ss zzz", Locale.US);
            f.setTimeZone(TimeZone.getTimeZone("GMT"));
            try {
                d = f.parse(v).getTime() - nowMs;
            } catch (ParseException pe) {
                d = 0;
            }
        }
        if (d < 0) {
            return 0;
        }
        return Math.min(d, MAX_RETRY_AFTER_MS);
    }
}
