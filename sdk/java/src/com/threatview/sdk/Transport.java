package com.threatview.sdk;

import java.io.IOException;

/** Transport posts one gzipped batch; tests replace it with a fake collector. */
interface Transport {
    /** Response is the collector's answer: status, its Retry-After header (or null) and body. */
    final class Response {
        final int status;
        final String retryAfter;
        final String body;

        Response(int status, String retryAfter, String body) {
            this.status = status;
            this.retryAfter = retryAfter;
            this.body = body;
        }
    }

    /** post sends gz (a gzipped {"events":[...]}) with the Idempotency-Key key; IOException when no answer came. */
    Response post(byte[] gz, String key) throws IOException;

    /** abort cuts the requests in flight short (close ran out of time); their post throws IOException. */
    void abort();
}
