package com.threatview.sdk;

import java.io.Closeable;
import java.io.IOException;
import java.util.List;

/**
 * Storage is the SDK's queue of serialized events, oldest first. The SDK
 * calls it from its own two threads (one appends, one reads and removes),
 * never from the app's thread; an implementation needs to be safe for
 * that and no more. {@link FileStorage} keeps the queue in files,
 * {@link MemoryStorage} in memory.
 */
public interface Storage extends Closeable {
    /** Entry is one queued event: its JSON (UTF-8) and when it was enqueued. */
    final class Entry {
        /** enqueuedAt is ms since the epoch, or -1 for a record the storage could not read. */
        public final long enqueuedAt;
        /** json is the event, a JSON object in UTF-8 starting with {"event_id":. */
        public final byte[] json;

        public Entry(long enqueuedAt, byte[] json) {
            this.enqueuedAt = enqueuedAt;
            this.json = json;
        }
    }

    /** append adds entries at the tail, in order; it throws IOException when they are not stored. */
    void append(List<Entry> entries) throws IOException;

    /**
     * peek returns the entries at the head without removing them: at most
     * maxCount, and no more than maxBytes of JSON in all (but at least one
     * entry when the queue is not empty).
     */
    List<Entry> peek(int maxCount, long maxBytes) throws IOException;

    /** remove removes the first n entries of the last peek from the head. */
    void remove(int n) throws IOException;

    /** clear removes every entry. */
    void clear() throws IOException;

    /** size is the number of entries stored. */
    int size();

    /** bytes is the JSON bytes of the entries stored. */
    long bytes();

    /** sync makes what was appended durable against a power loss, where the storage can. */
    void sync() throws IOException;
}
