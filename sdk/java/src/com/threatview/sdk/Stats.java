package com.threatview.sdk;

/** Stats are a ThreatView's counters since it was built. */
public final class Stats {
    /** queued is the events waiting (in memory on their way to storage, or in storage). */
    public final long queued;
    /** queuedBytes is their JSON size. */
    public final long queuedBytes;
    /** delivered is the events the collector accepted (202). */
    public final long delivered;
    /** dropped is the events given up on, for any reason. */
    public final long dropped;
    /** requests is the POSTs made; retries the ones that failed and were retried; throttled the 429s. */
    public final long requests;
    public final long retries;
    public final long throttled;

    Stats(long queued, long queuedBytes, long delivered, long dropped, long requests, long retries, long throttled) {
        this.queued = queued;
        this.queuedBytes = queuedBytes;
        this.delivered = delivered;
        this.dropped = dropped;
        this.requests = requests;
        this.retries = retries;
        this.throttled = throttled;
    }

    @Override
    public String toString() {
        return "Stats{queued=" + queued + " bytes=" + queuedBytes + " delivered=" + delivered + " dropped=" + dropped
                + " requests=" + requests + " retries=" + retries + " throttled=" + throttled + "}";
    }
}
