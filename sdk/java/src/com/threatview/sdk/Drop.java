package com.threatview.sdk;

import java.util.Collections;
import java.util.List;

/** Drop describes events the SDK gave up on; the app hears of it through its {@link DropListener}. */
public final class Drop {
    /** QUEUE_FULL: enqueue found the queue at its count or byte cap. */
    public static final String QUEUE_FULL = "queue_full";
    /** INVALID: the event could not be serialized, or has no "type". */
    public static final String INVALID = "invalid";
    /** TOO_LARGE: the event is over the collector's 32 KiB per event. */
    public static final String TOO_LARGE = "too_large";
    /** EXPIRED: the event waited longer than the age cap. */
    public static final String EXPIRED = "expired";
    /** REJECTED: the collector refused it with a definite 4xx; it is never sent again. */
    public static final String REJECTED = "rejected";
    /** RETRIES_EXHAUSTED: maxAttempts attempts failed. */
    public static final String RETRIES_EXHAUSTED = "retries_exhausted";
    /** OPTED_OUT: telemetry is switched off; the queue was emptied or the event refused. */
    public static final String OPTED_OUT = "opted_out";
    /** CLOSED: enqueue after close, or, with memory storage, undelivered at close. */
    public static final String CLOSED = "closed";
    /** STORAGE_ERROR: the queue could not write or read the event. */
    public static final String STORAGE_ERROR = "storage_error";

    /** reason is one of the constants above. */
    public final String reason;
    /** count is the number of events dropped. */
    public final int count;
    /** eventIds are the dropped events' event_id values, where known. */
    public final List<String> eventIds;
    /** status is the HTTP status of a refusal, else 0. */
    public final int status;
    /** code and message are the collector's error code and message, else empty. */
    public final String code;
    public final String message;

    Drop(String reason, int count, List<String> eventIds, int status, String code, String message) {
        this.reason = reason;
        this.count = count;
        this.eventIds = eventIds == null ? Collections.<String>emptyList() : Collections.unmodifiableList(eventIds);
        this.status = status;
        this.code = code == null ? "" : code;
        this.message = message == null ? "" : message;
    }

    @Override
    public String toString() {
        return "Drop{" + reason + " count=" + count + (status != 0 ? " status=" + status + " " + code + ": " + message : "") + "}";
    }
}
