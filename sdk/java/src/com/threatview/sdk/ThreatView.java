package com.threatview.sdk;

import java.io.ByteArrayOutputStream;
import java.io.Closeable;
import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.Charset;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.Future;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.zip.Deflater;
import java.util.zip.GZIPOutputStream;

/**
 * ThreatView sends an app's events to a Threat View collector. enqueue
 * never blocks and never throws; a bounded queue (files, or memory)
 * holds the events; the SDK's own two threads write the queue and send
 * it in gzipped batches, each with a UUIDv7 event_id per event and one
 * Idempotency-Key per batch, retried with backoff and jitter (never
 * sooner than Retry-After) until the collector accepts or definitely
 * refuses them. Safe to use from any number of threads.
 *
 * <pre>
 * ThreatView tv = ThreatView.builder()
 *     .endpoint("https://collector.example.com").token(token)
 *     .queueDir(new File(context.getFilesDir(), "threatview")).build();
 * tv.enqueue(event);
 * </pre>
 */
public final class ThreatView implements Closeable {
    /** MAX_EVENT_BYTES is the collector's limit on one event. */
    static final int MAX_EVENT_BYTES = 32 << 10;
    /** MAX_BATCH_EVENTS is the collector's limit on one request. */
    static final int MAX_BATCH_EVENTS = 500;
    /** MAX_BATCH_BYTES keeps a request under the collector's 1 MiB with room for sent_at and commas. */
    static final long MAX_BATCH_BYTES = (1 << 20) - (32 << 10);
    /** VERSION is the SDK's version, sent in the User-Agent. */
    public static final String VERSION = "0.1.0";

    private static final Charset UTF8 = Charset.forName("UTF-8");
    private static final byte[] OPEN = "{\"events\":[".getBytes(UTF8);
    private static final byte[] CLOSE = "]}".getBytes(UTF8);

    private final Storage storage;
    private final boolean durable;
    private final Transport transport;
    private final Clock clock;
    private final Random random;
    private final Uuid7 ids;
    private final DropListener onDrop;
    private final String appId;
    private final String appVersion;
    private final int flushAt;
    private final long flushIntervalMs;
    private final long maxEvents;
    private final long maxBytes;
    private final long maxAgeMs;
    private final long maxMemoryBytes;
    private final long minBackoffMs;
    private final long maxBackoffMs;
    private final int maxAttempts;
    private final long closeTimeoutMs;
    private final long requestTimeoutMs;

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition work = lock.newCondition(); // the sender waits here
    private final Condition toWrite = lock.newCondition(); // the writer waits here
    private final Condition progress = lock.newCondition(); // flush and close wait here

    // Guarded by lock.
    private ArrayList<Storage.Entry> pending = new ArrayList<Storage.Entry>();
    private long pendingBytes;
    private int writing; // entries the writer took and has not yet stored
    private long stored; // entries in storage (kept here so no app thread waits on storage I/O)
    private long queued; // accepted and not yet resolved (delivered or dropped)
    private long queuedBytes;
    private long accepted;
    private long resolved;
    private long flushTarget;
    private long oldestAt; // when the oldest unsent entry started waiting for a batch
    private boolean closing;
    private boolean stopped;
    private volatile boolean optOut;

    private final AtomicLong delivered = new AtomicLong();
    private final AtomicLong dropped = new AtomicLong();
    private final AtomicLong requests = new AtomicLong();
    private final AtomicLong retries = new AtomicLong();
    private final AtomicLong throttled = new AtomicLong();

    private final ExecutorService executor;
    private final ExecutorService helpers; // the other requests of a group, when concurrency > 1
    private final int concurrency;
    private final Set<Thread> pausing = Collections.synchronizedSet(new HashSet<Thread>());

    private ThreatView(Builder b, Storage storage, Transport transport) {
        this.storage = storage;
        this.durable = !(storage instanceof MemoryStorage);
        this.transport = transport;
        this.clock = b.clock;
        this.random = b.random != null ? b.random : new SecureRandom();
        this.ids = new Uuid7(clock);
        this.onDrop = b.onDrop;
        this.appId = b.appId;
        this.appVersion = b.appVersion;
        this.flushAt = b.flushAt;
        this.flushIntervalMs = b.flushIntervalMs;
        this.maxEvents = b.maxQueueEvents;
        this.maxBytes = b.maxQueueBytes;
        this.maxAgeMs = b.maxEventAgeMs;
        this.maxMemoryBytes = Math.min(b.maxMemoryBytes, b.maxQueueBytes);
        this.minBackoffMs = b.minBackoffMs;
        this.maxBackoffMs = b.maxBackoffMs;
        this.maxAttempts = b.maxAttempts;
        this.closeTimeoutMs = b.closeTimeoutMs;
        this.requestTimeoutMs = b.requestTimeoutMs;
        this.optOut = b.optOut;
        this.concurrency = b.concurrency;
        this.helpers = concurrency < 2 ? null : Executors.newFixedThreadPool(concurrency - 1, new ThreadFactory() {
            private int n;

            @Override
            public synchronized Thread newThread(Runnable r) {
                Thread t = new Thread(r, "threatview-sender-" + (++n));
                t.setDaemon(true);
                return t;
            }
        });
        // What an earlier run left in the queue counts against the caps and goes first.
        this.queued = storage.size();
        this.queuedBytes = storage.bytes();
        this.accepted = queued;
        this.stored = queued;
        this.oldestAt = clock.nowMillis() - flushIntervalMs;
        this.executor = Executors.newFixedThreadPool(2, new ThreadFactory() {
            private int n;

            @Override
            public synchronized Thread newThread(Runnable r) {
                Thread t = new Thread(r, n++ == 0 ? "threatview-writer" : "threatview-sender");
                t.setDaemon(true);
                return t;
            }
        });
        executor.execute(new Runnable() {
            @Override
            public void run() {
                writeLoop();
            }
        });
        executor.execute(new Runnable() {
            @Override
            public void run() {
                sendLoop();
            }
        });
    }

    /** builder starts the configuration of a ThreatView. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * enqueue queues one event and returns at once; it never blocks on I/O
     * and never throws. The event is a JSON-like tree: Maps, Lists,
     * arrays, Strings, Numbers, Booleans, null (anything else becomes its
     * toString()). It needs a "type"; the SDK adds "event_id" (UUIDv7)
     * and "occurred_at" (now) when absent, "app" from the builder when
     * absent, and "sent_at" at each attempt (an event's own sent_at is
     * ignored). The map is read before enqueue returns: the app may reuse
     * it. An event that cannot be queued is reported to the drop listener
     * (queue_full, invalid, too_large, opted_out, closed).
     */
    public void enqueue(Map<String, ?> event) {
        try {
            enqueue0(event);
        } catch (Throwable t) {
            // A map changed under us, a cycle, an OutOfMemoryError: never the caller's problem.
            drop(Drop.INVALID, null, 1, 0, "", t.getClass().getSimpleName());
        }
    }

    private void enqueue0(Map<String, ?> event) {
        if (optOut) {
            drop(Drop.OPTED_OUT, null, 1, 0, "", "telemetry is switched off");
            return;
        }
        if (event == null) {
            drop(Drop.INVALID, null, 1, 0, "", "null event");
            return;
        }
        long now = clock.nowMillis();
        Object type = event.get("type");
        if (!(type instanceof String) || ((String) type).isEmpty()) {
            drop(Drop.INVALID, null, 1, 0, "", "type is required");
            return;
        }
        Object eid = event.get("event_id");
        String id = eid instanceof String && !((String) eid).isEmpty() ? (String) eid : ids.next();
        StringBuilder sb = new StringBuilder(256);
        sb.append("{\"event_id\":");
        Json.quote(sb, id);
        if (event.get("occurred_at") == null) {
            sb.append(",\"occurred_at\":\"").append(Time.rfc3339(now)).append('"');
        }
        if (event.get("app") == null && appId != null) {
            sb.append(",\"app\":{\"id\":");
            Json.quote(sb, appId);
            if (appVersion != null) {
                sb.append(",\"version\":");
                Json.quote(sb, appVersion);
            }
            sb.append('}');
        }
        for (Map.Entry<String, ?> e : event.entrySet()) {
            String k = e.getKey();
            Object v = e.getValue();
            if ("event_id".equals(k) || "sent_at".equals(k) || (v == null && ("occurred_at".equals(k) || "app".equals(k)))) {
                continue;
            }
            sb.append(',');
            Json.quote(sb, k);
            sb.append(':');
            Json.write(sb, v);
        }
        sb.append('}');
        byte[] json = sb.toString().getBytes(UTF8);
        if (json.length > MAX_EVENT_BYTES) {
            drop(Drop.TOO_LARGE, Collections.singletonList(id), 1, 0, "", json.length + " bytes, over " + MAX_EVENT_BYTES);
            return;
        }
        String reason = null;
        lock.lock();
        try {
            if (optOut) {
                reason = Drop.OPTED_OUT;
            } else if (closing) {
                reason = Drop.CLOSED;
            } else if (queued + 1 > maxEvents || queuedBytes + json.length > maxBytes
                    || pendingBytes + json.length > maxMemoryBytes) {
                reason = Drop.QUEUE_FULL;
            } else {
                pending.add(new Storage.Entry(now, json));
                pendingBytes += json.length;
                if (queued == 0) {
                    oldestAt = now;
                }
                queued++;
                queuedBytes += json.length;
                accepted++;
                if (pending.size() == 1) {
                    toWrite.signal();
                }
            }
        } finally {
            lock.unlock();
        }
        if (reason != null) {
            drop(reason, Collections.singletonList(id), 1, 0, "", "");
        }
    }

    /**
     * flush sends everything enqueued before it and blocks until each of
     * those events is delivered or definitely refused (or the SDK is
     * closed or opted out). With the collector unreachable it waits as
     * long as that lasts: call it from a background job (WorkManager), or
     * use {@link #flush(long, TimeUnit)}.
     */
    public void flush() {
        flush(Long.MAX_VALUE, TimeUnit.NANOSECONDS);
    }

    /** flush waits at most timeout; it returns whether everything enqueued before it was resolved. */
    public boolean flush(long timeout, TimeUnit unit) {
        long left = unit.toNanos(timeout);
        lock.lock();
        try {
            long target = accepted;
            if (target > flushTarget) {
                flushTarget = target;
            }
            work.signalAll();
            while (resolved < target) {
                if (stopped) {
                    return false;
                }
                if (left <= 0) {
                    return false;
                }
                left = progress.awaitNanos(left);
            }
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } finally {
            lock.unlock();
        }
    }

    /**
     * setOptOut switches telemetry off (true) or on again. Off: nothing is
     * sent after the request in flight, the queue is emptied (reported as
     * opted_out) and enqueue drops. The app keeps the choice (the SDK
     * does not persist it) and passes it to the builder on the next start.
     */
    public void setOptOut(boolean off) {
        lock.lock();
        try {
            optOut = off;
            work.signalAll();
            progress.signalAll();
        } finally {
            lock.unlock();
        }
        if (off) {
            wakeSender();
        }
    }

    /** isOptedOut says whether telemetry is switched off. */
    public boolean isOptedOut() {
        return optOut;
    }

    /** stats returns the counters. */
    public Stats stats() {
        lock.lock();
        try {
            return new Stats(queued, queuedBytes, delivered.get(), dropped.get(), requests.get(), retries.get(), throttled.get());
        } finally {
            lock.unlock();
        }
    }

    /**
     * close stops accepting events, tries for up to closeTimeout to deliver
     * what is queued, and stops the SDK's threads. With file storage what
     * is left stays on disk for the next ThreatView on the directory; with
     * memory storage it is reported as closed.
     */
    @Override
    public void close() {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(closeTimeoutMs);
        lock.lock();
        try {
            if (closing) {
                return;
            }
            closing = true;
            work.signalAll();
            toWrite.signalAll();
            while (queued > 0 && !optOut) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                progress.awaitNanos(left);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            stopped = true;
            work.signalAll();
            toWrite.signalAll();
            progress.signalAll();
            lock.unlock();
        }
        wakeSender();
        // Requests still in flight have had closeTimeout: cut them (their events stay queued).
        transport.abort();
        executor.shutdown();
        if (helpers != null) {
            helpers.shutdown();
        }
        try {
            executor.awaitTermination(requestTimeoutMs + 2000, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (!durable) {
            long left;
            lock.lock();
            try {
                left = queued;
                queued = 0;
                queuedBytes = 0;
                resolved = accepted;
            } finally {
                lock.unlock();
            }
            if (left > 0) {
                drop(Drop.CLOSED, null, (int) left, 0, "", "undelivered at close");
            }
        }
        try {
            storage.sync();
        } catch (IOException ignored) {
            // nothing more to do at close
        }
        try {
            storage.close();
        } catch (IOException ignored) {
            // nothing more to do at close
        }
    }

    private void wakeSender() {
        synchronized (pausing) {
            for (Thread t : pausing) {
                t.interrupt();
            }
        }
    }

    // ---- the writer: moves accepted events from memory into storage ----

    private void writeLoop() {
        while (true) {
            ArrayList<Storage.Entry> chunk;
            lock.lock();
            try {
                while (pending.isEmpty()) {
                    if (closing || stopped) {
                        return;
                    }
                    toWrite.awaitUninterruptibly();
                }
                chunk = pending;
                pending = new ArrayList<Storage.Entry>(Math.max(16, chunk.size()));
                pendingBytes = 0;
                writing = chunk.size();
            } finally {
                lock.unlock();
            }
            boolean ok = true;
            String err = "";
            try {
                storage.append(chunk);
            } catch (Throwable e) {
                ok = false;
                err = e.toString();
            }
            if (!ok) {
                drop(Drop.STORAGE_ERROR, eventIds(chunk), chunk.size(), 0, "", err);
            }
            long failedBytes = 0;
            lock.lock();
            try {
                writing = 0;
                if (ok) {
                    stored += chunk.size();
                } else {
                    for (Storage.Entry e : chunk) {
                        failedBytes += e.json.length;
                    }
                    queued -= chunk.size();
                    queuedBytes -= failedBytes;
                    resolved += chunk.size();
                    progress.signalAll();
                }
                work.signalAll();
            } finally {
                lock.unlock();
            }
        }
    }

    // ---- the sender: reads batches from storage and delivers them ----

    private void sendLoop() {
        while (true) {
            boolean clear = false;
            lock.lock();
            try {
                while (true) {
                    if (stopped) {
                        return;
                    }
                    if (optOut) {
                        if (queued > 0 && writing == 0) {
                            pending = new ArrayList<Storage.Entry>();
                            pendingBytes = 0;
                            clear = true;
                            break;
                        }
                        if (closing && queued == 0) {
                            return;
                        }
                        awaitWork(0);
                        continue;
                    }
                    if (stored > 0) {
                        long waited = clock.nowMillis() - oldestAt;
                        if (stored >= flushAt || flushTarget > resolved || closing || waited >= flushIntervalMs) {
                            if ((writing > 0 || !pending.isEmpty()) && stored < MAX_BATCH_EVENTS) {
                                // The writer is a moment behind: let it catch up, for one full batch.
                                awaitWork(50);
                                continue;
                            }
                            break;
                        }
                        awaitWork(flushIntervalMs - waited);
                    } else {
                        if (closing && queued == 0) {
                            return;
                        }
                        awaitWork(0);
                    }
                }
            } finally {
                lock.unlock();
            }
            try {
                if (clear) {
                    clearForOptOut();
                } else {
                    sendBatch();
                }
            } catch (Throwable t) {
                // A storage that cannot be read right now: try again a little later.
                pause(1000);
            }
        }
    }

    private void awaitWork(long ms) {
        try {
            if (ms <= 0) {
                work.await();
            } else {
                work.await(ms, TimeUnit.MILLISECONDS);
            }
        } catch (InterruptedException e) {
            // woken for close or opt-out; the loop looks again
        }
    }

    private void clearForOptOut() throws IOException {
        storage.clear();
        long n;
        lock.lock();
        try {
            n = queued;
        } finally {
            lock.unlock();
        }
        // Heard of before flush returns.
        drop(Drop.OPTED_OUT, null, (int) n, 0, "", "telemetry switched off: queue emptied");
        lock.lock();
        try {
            stored = 0;
            queued = 0;
            queuedBytes = 0;
            resolved = accepted;
            progress.signalAll();
        } finally {
            lock.unlock();
        }
    }

    private void sendBatch() throws IOException {
        List<Storage.Entry> batch = storage.peek(MAX_BATCH_EVENTS * concurrency, MAX_BATCH_BYTES * concurrency);
        if (batch.isEmpty()) {
            return;
        }
        long now = clock.nowMillis();
        long nbytes = 0;
        List<Storage.Entry> live = new ArrayList<Storage.Entry>(batch.size());
        List<Storage.Entry> expired = null;
        for (Storage.Entry e : batch) {
            nbytes += e.json.length;
            if (e.enqueuedAt < 0 || e.json.length == 0 || e.json[0] != '{') {
                drop(Drop.STORAGE_ERROR, null, 1, 0, "", "unreadable queue record");
            } else if (maxAgeMs > 0 && now - e.enqueuedAt > maxAgeMs) {
                if (expired == null) {
                    expired = new ArrayList<Storage.Entry>();
                }
                expired.add(e);
            } else {
                live.add(e);
            }
        }
        if (expired != null) {
            drop(Drop.EXPIRED, eventIds(expired), expired.size(), 0, "", "older than the age cap");
        }
        if (!deliverAll(live)) {
            return; // stopped or opted out: the batch stays queued
        }
        storage.remove(batch.size());
        lock.lock();
        try {
            stored -= batch.size();
            queued -= batch.size();
            queuedBytes -= nbytes;
            resolved += batch.size();
            oldestAt = clock.nowMillis();
            progress.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /**
     * deliverAll cuts live into requests the collector takes (500 events,
     * under 1 MiB) and delivers them side by side, up to concurrency at a
     * time; true when each is resolved.
     */
    private boolean deliverAll(List<Storage.Entry> live) throws IOException {
        List<List<Storage.Entry>> parts = new ArrayList<List<Storage.Entry>>();
        List<Storage.Entry> cur = new ArrayList<Storage.Entry>();
        long b = 0;
        for (Storage.Entry e : live) {
            if (!cur.isEmpty() && (cur.size() == MAX_BATCH_EVENTS || b + e.json.length > MAX_BATCH_BYTES)) {
                parts.add(cur);
                cur = new ArrayList<Storage.Entry>();
                b = 0;
            }
            cur.add(e);
            b += e.json.length;
        }
        parts.add(cur);
        if (parts.size() == 1) {
            return deliver(cur);
        }
        List<Future<Boolean>> others = new ArrayList<Future<Boolean>>();
        for (int i = 1; i < parts.size(); i++) {
            final List<Storage.Entry> p = parts.get(i);
            others.add(helpers.submit(new Callable<Boolean>() {
                @Override
                public Boolean call() throws IOException {
                    return deliver(p);
                }
            }));
        }
        boolean ok = deliver(parts.get(0));
        for (Future<Boolean> f : others) {
            try {
                ok &= f.get();
            } catch (Exception e) {
                ok = false;
            }
        }
        return ok;
    }

    /** deliver sends live until each event is delivered or dropped (true), or the SDK stops first (false). */
    boolean deliver(List<Storage.Entry> live) throws IOException {
        String key = ids.next();
        int failures = 0;
        while (!live.isEmpty()) {
            if (stopped || optOut) {
                return false;
            }
            byte[] gz = body(live, clock.nowMillis());
            requests.incrementAndGet();
            int status;
            String retryAfter = null;
            String text;
            try {
                Transport.Response r = transport.post(gz, key);
                status = r.status;
                retryAfter = r.retryAfter;
                text = r.body;
            } catch (IOException e) {
                status = 0;
                text = e.toString();
            }
            if (status >= 200 && status < 300) {
                delivered.addAndGet(live.size());
                return true;
            }
            ErrorBody eb = ErrorBody.parse(status, text);
            if (Retry.retryable(status)) {
                if (status == 429) {
                    throttled.incrementAndGet();
                }
                failures++;
                if (maxAttempts > 0 && failures >= maxAttempts) {
                    drop(Drop.RETRIES_EXHAUSTED, eventIds(live), live.size(), status, eb.code, eb.message);
                    return true;
                }
                retries.incrementAndGet();
                long wait = Retry.backoff(failures, Retry.parseRetryAfter(retryAfter, clock.nowMillis()), minBackoffMs, maxBackoffMs, random);
                if (!pause(wait)) {
                    return false;
                }
                if (maxAgeMs > 0 && dropExpired(live)) {
                    key = ids.next(); // a different body is a different request
                }
                continue;
            }
            if (eb.index >= 0 && eb.index < live.size() && live.size() > 1) {
                // The collector named one bad event of an all-or-nothing batch: drop it, send the rest.
                Storage.Entry bad = live.remove(eb.index);
                drop(Drop.REJECTED, eventIds(Collections.singletonList(bad)), 1, status, eb.code, eb.message);
                key = ids.next();
                failures = 0;
                continue;
            }
            drop(Drop.REJECTED, eventIds(live), live.size(), status, eb.code, eb.message);
            return true;
        }
        return true;
    }

    private boolean dropExpired(List<Storage.Entry> live) {
        long now = clock.nowMillis();
        List<Storage.Entry> old = null;
        for (int i = live.size() - 1; i >= 0; i--) {
            if (now - live.get(i).enqueuedAt > maxAgeMs) {
                if (old == null) {
                    old = new ArrayList<Storage.Entry>();
                }
                old.add(0, live.remove(i));
            }
        }
        if (old == null) {
            return false;
        }
        drop(Drop.EXPIRED, eventIds(old), old.size(), 0, "", "older than the age cap");
        return true;
    }

    /** pause waits between attempts; false when the SDK stopped or opted out meanwhile. */
    private boolean pause(long ms) {
        Thread me = Thread.currentThread();
        pausing.add(me);
        try {
            if (!stopped && !optOut) {
                clock.sleep(ms);
            }
        } catch (InterruptedException e) {
            // close or opt-out
        } finally {
            pausing.remove(me);
        }
        return !stopped && !optOut;
    }

    /** body is the gzipped {"events":[...]} of entries, each with sent_at = now. */
    static byte[] body(List<Storage.Entry> entries, long now) throws IOException {
        byte[] sentAt = ("{\"sent_at\":\"" + Time.rfc3339(now) + "\",").getBytes(UTF8);
        long raw = 0;
        for (Storage.Entry e : entries) {
            raw += e.json.length;
        }
        ByteArrayOutputStream bos = new ByteArrayOutputStream((int) Math.min(raw / 4 + 64, 1 << 20));
        GZIPOutputStream gz = new GZIPOutputStream(bos, 16 << 10) {
            {
                def.setLevel(Deflater.BEST_SPEED);
            }
        };
        try {
            gz.write(OPEN);
            boolean first = true;
            for (Storage.Entry e : entries) {
                if (!first) {
                    gz.write(',');
                }
                first = false;
                gz.write(sentAt);
                gz.write(e.json, 1, e.json.length - 1);
            }
            gz.write(CLOSE);
        } finally {
            gz.close();
        }
        return bos.toByteArray();
    }

    private static final byte[] ID_PREFIX = "{\"event_id\":\"".getBytes(UTF8);

    /** eventIds reads each entry's event_id (the SDK writes it first). */
    static List<String> eventIds(List<Storage.Entry> entries) {
        List<String> out = new ArrayList<String>(entries.size());
        for (Storage.Entry e : entries) {
            byte[] j = e.json;
            boolean ok = j.length > ID_PREFIX.length;
            for (int i = 0; ok && i < ID_PREFIX.length; i++) {
                ok = j[i] == ID_PREFIX[i];
            }
            if (!ok) {
                continue;
            }
            int end = ID_PREFIX.length;
            while (end < j.length && j[end] != '"') {
                end++;
            }
            out.add(new String(j, ID_PREFIX.length, end - ID_PREFIX.length, UTF8));
        }
        return out;
    }

    private void drop(String reason, List<String> eventIds, int count, int status, String code, String message) {
        dropped.addAndGet(count);
        DropListener l = onDrop;
        if (l == null) {
            return;
        }
        try {
            l.onDrop(new Drop(reason, count, eventIds, status, code, message));
        } catch (Throwable ignored) {
            // the app's listener must not break delivery
        }
    }

    /** ErrorBody is what the SDK reads of a refusal: {"error":{"code","message","details":{"index"}}}. */
    static final class ErrorBody {
        String code = "";
        String message = "";
        int index = -1;

        static ErrorBody parse(int status, String text) {
            ErrorBody eb = new ErrorBody();
            if (status == 0) {
                eb.message = text;
                return eb;
            }
            try {
                Object v = Json.parse(text);
                Object err = v instanceof Map ? ((Map<?, ?>) v).get("error") : null;
                if (err instanceof Map) {
                    Map<?, ?> m = (Map<?, ?>) err;
                    if (m.get("code") instanceof String) {
                        eb.code = (String) m.get("code");
                    }
                    if (m.get("message") instanceof String) {
                        eb.message = (String) m.get("message");
                    }
                    Object d = m.get("details");
                    if (d instanceof Map && ((Map<?, ?>) d).get("index") instanceof Number) {
                        eb.index = ((Number) ((Map<?, ?>) d).get("index")).intValue();
                    }
                }
            } catch (RuntimeException e) {
                // not our error body (a proxy's page): keep its start as the message
            }
            if (eb.code.isEmpty() && eb.message.isEmpty()) {
                eb.message = "HTTP " + status + ": " + (text.length() > 200 ? text.substring(0, 200) : text);
            }
            return eb;
        }
    }

    /** Builder configures a ThreatView; endpoint, token and queueDir (or storage) are required. */
    public static final class Builder {
        private String endpoint;
        private String token;
        private File queueDir;
        private Storage storage;
        private String appId;
        private String appVersion;
        private DropListener onDrop;
        private int flushAt = 100;
        private long flushIntervalMs = 5000;
        private long maxQueueEvents = 10000;
        private long maxQueueBytes = 10L << 20;
        private long maxEventAgeMs = TimeUnit.DAYS.toMillis(7);
        private long maxMemoryBytes = 4L << 20;
        private long minBackoffMs = 200;
        private long maxBackoffMs = 30000;
        private int maxAttempts;
        private int concurrency = 2;
        private long closeTimeoutMs = 5000;
        private long requestTimeoutMs = 15000;
        private boolean optOut;
        Clock clock = Clock.SYSTEM;
        Random random;
        Transport transport;

        private Builder() {}

        /** endpoint is the collector's base URL (http or https), e.g. https://collector.example.com. */
        public Builder endpoint(String url) {
            this.endpoint = url;
            return this;
        }

        /** token is the app's collector token (Authorization: Bearer). */
        public Builder token(String token) {
            this.token = token;
            return this;
        }

        /** queueDir is the directory of the durable queue (on Android, under getFilesDir()). */
        public Builder queueDir(File dir) {
            this.queueDir = dir;
            return this;
        }

        /** storage replaces the file queue with another {@link Storage} (e.g. {@link MemoryStorage}). */
        public Builder storage(Storage s) {
            this.storage = s;
            return this;
        }

        /** app is put into events that have no "app" of their own. */
        public Builder app(String id, String version) {
            this.appId = id;
            this.appVersion = version;
            return this;
        }

        /** onDrop hears of every event the SDK gives up on. */
        public Builder onDrop(DropListener l) {
            this.onDrop = l;
            return this;
        }

        /** flushAt sends a batch once this many events are queued (default 100, at most 500). */
        public Builder flushAt(int n) {
            this.flushAt = n;
            return this;
        }

        /** flushInterval sends what is queued once its oldest event has waited this long (default 5 s). */
        public Builder flushInterval(long time, TimeUnit unit) {
            this.flushIntervalMs = unit.toMillis(time);
            return this;
        }

        /** maxQueueEvents caps the queue's events (default 10,000); past it enqueue drops (queue_full). */
        public Builder maxQueueEvents(long n) {
            this.maxQueueEvents = n;
            return this;
        }

        /** maxQueueBytes caps the queue's JSON bytes (default 10 MiB); past it enqueue drops (queue_full). */
        public Builder maxQueueBytes(long n) {
            this.maxQueueBytes = n;
            return this;
        }

        /** maxEventAge drops events older than this before they are sent (default 7 days; 0: never). */
        public Builder maxEventAge(long time, TimeUnit unit) {
            this.maxEventAgeMs = unit.toMillis(time);
            return this;
        }

        /** maxMemoryBytes caps events accepted but not yet written to the queue files (default 4 MiB). */
        public Builder maxMemoryBytes(long n) {
            this.maxMemoryBytes = n;
            return this;
        }

        /** backoff sets the first and the longest wait between attempts (default 200 ms and 30 s). */
        public Builder backoff(long min, long max, TimeUnit unit) {
            this.minBackoffMs = unit.toMillis(min);
            this.maxBackoffMs = unit.toMillis(max);
            return this;
        }

        /** maxAttempts drops a batch after this many failed attempts (default 0: keep trying). */
        public Builder maxAttempts(int n) {
            this.maxAttempts = n;
            return this;
        }

        /** concurrency is how many requests may be in flight at once (default 2, at most 8). */
        public Builder concurrency(int n) {
            this.concurrency = n;
            return this;
        }

        /** closeTimeout is how long close tries to deliver (default 5 s). */
        public Builder closeTimeout(long time, TimeUnit unit) {
            this.closeTimeoutMs = unit.toMillis(time);
            return this;
        }

        /** requestTimeout bounds connecting and reading one answer (default 15 s). */
        public Builder requestTimeout(long time, TimeUnit unit) {
            this.requestTimeoutMs = unit.toMillis(time);
            return this;
        }

        /** optOut starts with telemetry switched off (the app's stored choice). */
        public Builder optOut(boolean off) {
            this.optOut = off;
            return this;
        }

        /**
         * build opens the queue and starts the SDK's threads. It throws
         * IllegalArgumentException for a bad configuration and
         * IllegalStateException when the queue directory cannot be opened
         * (or another ThreatView uses it).
         */
        public ThreatView build() {
            if (endpoint == null || token == null || token.isEmpty()) {
                throw new IllegalArgumentException("threatview: endpoint and token are required");
            }
            URI u;
            try {
                u = new URI(endpoint);
            } catch (Exception e) {
                throw new IllegalArgumentException("threatview: endpoint " + endpoint + " is not a URL", e);
            }
            if (u.getHost() == null || !("https".equals(u.getScheme()) || "http".equals(u.getScheme()))) {
                throw new IllegalArgumentException("threatview: endpoint must be an http(s) URL, not " + endpoint);
            }
            if (storage == null && queueDir == null) {
                throw new IllegalArgumentException("threatview: queueDir (or storage) is required");
            }
            if (flushAt < 1 || flushAt > MAX_BATCH_EVENTS || maxQueueEvents < 1 || maxQueueBytes < MAX_EVENT_BYTES
                    || flushIntervalMs < 0 || minBackoffMs < 1 || maxBackoffMs < minBackoffMs || maxAttempts < 0
                    || maxMemoryBytes < MAX_EVENT_BYTES || maxEventAgeMs < 0 || concurrency < 1 || concurrency > 8) {
                throw new IllegalArgumentException("threatview: flushAt must be 1-500, concurrency 1-8, caps at least one event, backoff min>0 and max>=min");
            }
            Storage s = storage;
            if (s == null) {
                try {
                    s = new FileStorage(queueDir);
                } catch (IOException e) {
                    throw new IllegalStateException("threatview: " + e.getMessage(), e);
                }
            }
            Transport t = transport;
            if (t == null) {
                try {
                    t = new HttpTransport(endpoint, token, (int) requestTimeoutMs, "threatview-java/" + VERSION);
                } catch (IOException e) {
                    throw new IllegalArgumentException("threatview: endpoint " + endpoint + ": " + e.getMessage(), e);
                }
            }
            return new ThreatView(this, s, t);
        }
    }
}
