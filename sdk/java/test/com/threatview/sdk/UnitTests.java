package com.threatview.sdk;

import static com.threatview.sdk.TestMain.*;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/** UnitTests run without the stack: a fake clock and an in-memory collector. */
final class UnitTests {
    private UnitTests() {}

    static Map<String, Object> ev(String type) {
        Map<String, Object> m = new LinkedHashMap<String, Object>();
        m.put("type", type);
        return m;
    }

    static void register() {
        test("Json/round trip", new Body() {
            public void run() {
                String[] cases = {
                    "{\"a\":[1,2.5,-3,true,false,null,\"x\\\"y\\\\z\\n\\u0001\"],\"b\":{}}",
                    "[]", "\"\\u00e9\\ud83d\\ude00 \u2028\"", "123456789012345678901234567890",
                };
                for (String c : cases) {
                    Object v = Json.parse(c);
                    Object again = Json.parse(Json.toJson(v));
                    eq(again, v, "parse(toJson(parse(" + c + ")))");
                }
                eq(Json.toJson("a\u2028\ud800b"), "\"a\\u2028\\ud800b\"", "toJson(lone surrogate)");
                eq(Json.toJson(Arrays.asList(1.0, 1.5, Double.NaN, new int[] {1, 2})), "[1,1.5,null,[1,2]]", "toJson(numbers)");
                for (String bad : new String[] {"", "{", "[1,]", "{\"a\" 1}", "tru", "\"\\x\"", "1 2", "{\"a\":1,}"}) {
                    try {
                        Json.parse(bad);
                        throw new AssertionError("parse(" + bad + ") did not fail");
                    } catch (IllegalArgumentException expected) {
                        // ok
                    }
                }
            }
        });

        test("Time/rfc3339 matches java.time", new Body() {
            public void run() {
                Random r = new Random(7);
                long[] fixed = {0, 1, -1, 951782400000L, 253402300799999L, 1764750000123L};
                for (int i = 0; i < 20000; i++) {
                    long ms = i < fixed.length ? fixed[i] : (long) (r.nextDouble() * 253402300799999L);
                    String s = Time.rfc3339(ms);
                    eq(Instant.parse(s).toEpochMilli(), ms, "parse(rfc3339(" + ms + "))");
                    check(s.length() == 24 && s.endsWith("Z"), "rfc3339(%d) = %s", ms, s);
                }
            }
        });

        test("Uuid7/time ordered and well formed", new Body() {
            public void run() throws Exception {
                String pat = (String) ((Map<?, ?>) vectors().get("client")).get("event_id_pattern");
                FakeClock c = new FakeClock();
                Uuid7 u = new Uuid7(c);
                String prev = "";
                Set<String> seen = new HashSet<String>();
                for (int i = 0; i < 50000; i++) {
                    if (i % 10000 == 0) {
                        c.now.addAndGet(1);
                    }
                    String id = u.next();
                    check(id.matches(pat), "id %s does not match %s", id, pat);
                    check(id.compareTo(prev) > 0, "id %s after %s is not larger", id, prev);
                    check(seen.add(id), "id %s twice", id);
                    prev = id;
                }
                long ms = Long.parseLong(prev.substring(0, 8) + prev.substring(9, 13), 16);
                check(ms >= c.now.get(), "id time %d before the clock %d", ms, c.now.get());
            }
        });

        test("Retry/backoff bounds and Retry-After", new Body() {
            public void run() {
                Random r = new Random(1);
                for (int f = 1; f <= 20; f++) {
                    long full = Math.min(200L << Math.min(f - 1, 20), 30000L);
                    for (int i = 0; i < 200; i++) {
                        long d = Retry.backoff(f, 0, 200, 30000, r);
                        check(d >= full / 2 && d <= full, "backoff(%d) = %d, want %d..%d", f, d, full / 2, full);
                        long withRa = Retry.backoff(f, 5000, 200, 30000, r);
                        check(withRa >= 5000 && withRa >= full / 2 && withRa <= Math.max(full, 5501),
                                "backoff(%d, Retry-After 5s) = %d", f, withRa);
                    }
                }
                long now = 1764750000000L;
                eq(Retry.parseRetryAfter("3", now), 3000L, "parseRetryAfter(3)");
                eq(Retry.parseRetryAfter(" 0 ", now), 0L, "parseRetryAfter(0)");
                eq(Retry.parseRetryAfter("soon", now), 0L, "parseRetryAfter(soon)");
                eq(Retry.parseRetryAfter(null, now), 0L, "parseRetryAfter(null)");
                eq(Retry.parseRetryAfter("-5", now), 0L, "parseRetryAfter(-5)");
                eq(Retry.parseRetryAfter("99999999999999999", now), Retry.MAX_RETRY_AFTER_MS, "parseRetryAfter(huge)");
                // 2025-12-03T08:20:10Z is 10 s after now.
                eq(Retry.parseRetryAfter("Wed, 03 Dec 2025 08:20:10 GMT", now), 10000L, "parseRetryAfter(HTTP date)");
                for (int s : new int[] {0, 408, 429, 500, 502, 503, 504}) {
                    check(Retry.retryable(s), "retryable(%d) = false", s);
                }
                for (int s : new int[] {400, 401, 403, 404, 405, 413, 415, 422}) {
                    check(!Retry.retryable(s), "retryable(%d) = true", s);
                }
            }
        });

        test("ThreatView/wire: ids, occurred_at, sent_at, app, key", new Body() {
            public void run() throws Exception {
                Map<String, Object> v = vectors();
                Map<?, ?> client = (Map<?, ?>) v.get("client");
                FakeClock c = new FakeClock();
                FakeTransport t = new FakeTransport();
                Drops d = new Drops();
                ThreatView tv = builder(c, t, d).build();
                Map<String, Object> e = ev("app.startup");
                e.put("sent_at", "1999-01-01T00:00:00Z");
                Map<String, Object> dev = new LinkedHashMap<String, Object>();
                dev.put("model", "Pixel 8");
                dev.put("os", "android");
                e.put("device", dev);
                e.put("threats", Arrays.asList("Hooks", Collections.singletonMap("type", "Debug")));
                tv.enqueue(e);
                Map<String, Object> own = ev("app.resume");
                own.put("event_id", "01890a5d-ac96-774b-bcce-b302099a8057");
                own.put("occurred_at", "2026-11-30T08:15:00Z");
                own.put("app", Collections.singletonMap("id", "other-app"));
                tv.enqueue(own);
                e.put("type", "changed after enqueue");
                check(tv.flush(5, TimeUnit.SECONDS), "flush timed out");
                tv.close();
                eq(t.reqs.size(), 1, "requests");
                Req r = t.reqs.get(0);
                check(r.key.matches((String) client.get("idempotency_key_pattern")), "key %s", r.key);
                Map<String, Object> a = r.events.get(0);
                Map<String, Object> b = r.events.get(1);
                check(((String) a.get("event_id")).matches((String) client.get("event_id_pattern")), "event_id %s", a.get("event_id"));
                eq(a.get("type"), "app.startup", "type (the map was changed after enqueue)");
                eq(a.get("occurred_at"), Time.rfc3339(c.now.get()), "occurred_at");
                eq(a.get("sent_at"), Time.rfc3339(c.now.get()), "sent_at (the SDK's, not the event's)");
                eq(a.get("app"), Json.parse("{\"id\":\"demo-app\",\"version\":\"1.0.0\"}"), "app");
                eq(a.get("device"), dev, "device");
                eq(a.get("threats"), Json.parse("[\"Hooks\",{\"type\":\"Debug\"}]"), "threats");
                eq(b.get("event_id"), "01890a5d-ac96-774b-bcce-b302099a8057", "own event_id");
                eq(b.get("occurred_at"), "2026-11-30T08:15:00Z", "own occurred_at");
                eq(b.get("app"), Collections.singletonMap("id", "other-app"), "own app");
                eq(d.all.size(), 0, "drops");
            }
        });

        test("ThreatView/caps: count, bytes, event size, invalid; enqueue never throws", new Body() {
            public void run() throws Exception {
                FakeClock c = new FakeClock();
                FakeTransport t = new FakeTransport();
                final CountDownLatch hold = new CountDownLatch(1);
                t.script = held(hold, new Transport.Response(202, null, "{}"));
                Drops d = new Drops();
                ThreatView tv = builder(c, t, d).maxQueueEvents(10).flushAt(500).build();
                for (int i = 0; i < 25; i++) {
                    tv.enqueue(ev("e" + i));
                }
                eq(tv.stats().queued, 10L, "queued at the count cap");
                eq(d.count(Drop.QUEUE_FULL), 15, "queue_full drops");
                tv.enqueue(null);
                tv.enqueue(ev(""));
                Map<String, Object> cyc = ev("cycle");
                cyc.put("self", cyc);
                tv.enqueue(cyc);
                Map<String, Object> big = ev("big");
                char[] pad = new char[40000];
                Arrays.fill(pad, 'x');
                big.put("attributes", Collections.singletonMap("pad", new String(pad)));
                tv.enqueue(big);
                eq(d.count(Drop.INVALID), 3, "invalid drops");
                eq(d.count(Drop.TOO_LARGE), 1, "too_large drops");
                hold.countDown();
                check(tv.flush(5, TimeUnit.SECONDS), "flush timed out");
                eq(t.deliveredIds().size(), 10, "delivered");
                eq(tv.stats().dropped, 19L, "stats.dropped");
                tv.close();

                FakeTransport t2 = new FakeTransport();
                Drops d2 = new Drops();
                ThreatView small = builder(c, t2, d2).maxQueueBytes(64 << 10).flushAt(500).build();
                Map<String, Object> e = ev("sized");
                char[] kb = new char[1000];
                Arrays.fill(kb, 'y');
                e.put("attributes", Collections.singletonMap("pad", new String(kb)));
                for (int i = 0; i < 100; i++) {
                    small.enqueue(e);
                }
                long q = small.stats().queued;
                long each = small.stats().queuedBytes / q;
                check(q * each <= 64 << 10 && (q + 1) * each > 64 << 10, "queued %d events of %d bytes under a 64 KiB cap", q, each);
                check(small.stats().queuedBytes <= 64 << 10, "queuedBytes %d over the cap", small.stats().queuedBytes);
                eq((long) d2.count(Drop.QUEUE_FULL), 100 - q, "queue_full drops at the byte cap");
                small.close();
            }
        });

        test("ThreatView/age cap drops old events unsent", new Body() {
            public void run() throws Exception {
                FakeClock c = new FakeClock();
                FakeTransport t = new FakeTransport();
                final FakeClock fc = c;
                // The first attempt fails; by the retry the first two events are too old.
                t.script = new Script() {
                    public Transport.Response answer(int n, Req r) {
                        if (n == 0) {
                            fc.now.addAndGet(TimeUnit.HOURS.toMillis(2));
                            return new Transport.Response(503, "1", "");
                        }
                        return accepted(r);
                    }
                };
                Drops d = new Drops();
                ThreatView tv = builder(c, t, d).maxEventAge(1, TimeUnit.HOURS).flushAt(500).build();
                tv.enqueue(ev("old1"));
                tv.enqueue(ev("old2"));
                check(tv.flush(5, TimeUnit.SECONDS), "flush timed out");
                eq(d.count(Drop.EXPIRED), 2, "expired drops after a retry");
                eq(t.reqs.size(), 1, "requests (nothing left to retry)");
                c.now.addAndGet(TimeUnit.MINUTES.toMillis(1));
                tv.enqueue(ev("fresh"));
                check(tv.flush(5, TimeUnit.SECONDS), "flush timed out");
                eq(t.reqs.size(), 2, "requests");
                eq(t.reqs.get(1).events.get(0).get("type"), "fresh", "the fresh event is sent");
                tv.close();
            }
        });

        test("ThreatView/503 storm: same batch, same key, waits honour Retry-After", new Body() {
            public void run() throws Exception {
                FakeClock c = new FakeClock();
                FakeTransport t = new FakeTransport();
                t.script = new Script() {
                    public Transport.Response answer(int n, Req r) throws IOException {
                        if (n < 3) {
                            return new Transport.Response(503, "2", "{\"error\":{\"code\":\"unavailable\",\"message\":\"retry later\"}}");
                        }
                        if (n < 5) {
                            throw new IOException("connection reset");
                        }
                        if (n < 6) {
                            return new Transport.Response(429, "7", "{\"error\":{\"code\":\"rate_limited\",\"message\":\"slow down\"}}");
                        }
                        return accepted(r);
                    }
                };
                Drops d = new Drops();
                ThreatView tv = builder(c, t, d).flushAt(500).build();
                for (int i = 0; i < 20; i++) {
                    tv.enqueue(ev("storm"));
                }
                check(tv.flush(5, TimeUnit.SECONDS), "flush timed out");
                eq(t.reqs.size(), 7, "requests");
                Req first = t.reqs.get(0);
                for (Req r : t.reqs) {
                    eq(r.key, first.key, "Idempotency-Key on a retry");
                    eq(r.ids(), first.ids(), "event ids on a retry");
                }
                List<Long> s = new ArrayList<Long>(c.sleeps);
                eq(s.size(), 6, "waits");
                for (int i = 0; i < 3; i++) {
                    check(s.get(i) >= 2000 && s.get(i) <= 2201, "wait %d after Retry-After 2 = %d ms", i, s.get(i));
                }
                check(s.get(3) < 2000 && s.get(4) < 2000, "waits after resets %s (backoff from 50 ms)", s);
                check(s.get(5) >= 7000, "wait after 429 Retry-After 7 = %d", s.get(5));
                Stats st = tv.stats();
                eq(st.delivered, 20L, "delivered");
                eq(st.retries, 6L, "retries");
                eq(st.throttled, 1L, "throttled");
                eq(d.all.size(), 0, "drops");
                tv.close();
            }
        });

        test("ThreatView/definite 4xx is never retried; maxAttempts gives up", new Body() {
            public void run() throws Exception {
                for (int status : new int[] {400, 401, 404, 415}) {
                    FakeClock c = new FakeClock();
                    FakeTransport t = new FakeTransport();
                    final int st = status;
                    t.script = new Script() {
                        public Transport.Response answer(int n, Req r) {
                            return new Transport.Response(st, null, "{\"error\":{\"code\":\"nope\",\"message\":\"refused\"}}");
                        }
                    };
                    Drops d = new Drops();
                    ThreatView tv = builder(c, t, d).flushAt(500).build();
                    tv.enqueue(ev("a"));
                    tv.enqueue(ev("b"));
                    check(tv.flush(5, TimeUnit.SECONDS), "flush timed out");
                    eq(t.reqs.size(), 1, "requests after " + status);
                    eq(d.count(Drop.REJECTED), 2, "rejected after " + status);
                    Drop dr = d.all.get(0);
                    eq(dr.status, status, "drop status");
                    eq(dr.code, "nope", "drop code");
                    eq(dr.eventIds, t.reqs.get(0).ids(), "drop event ids");
                    tv.close();
                }
                FakeClock c = new FakeClock();
                FakeTransport t = new FakeTransport();
                t.script = new Script() {
                    public Transport.Response answer(int n, Req r) {
                        return new Transport.Response(500, null, "oops");
                    }
                };
                Drops d = new Drops();
                ThreatView tv = builder(c, t, d).maxAttempts(4).flushAt(500).build();
                tv.enqueue(ev("a"));
                check(tv.flush(5, TimeUnit.SECONDS), "flush timed out");
                eq(t.reqs.size(), 4, "attempts with maxAttempts 4");
                eq(d.count(Drop.RETRIES_EXHAUSTED), 1, "retries_exhausted");
                tv.close();
            }
        });

        test("ThreatView/thread safety: 8 threads, every event once", new Body() {
            public void run() throws Exception {
                FakeClock c = new FakeClock();
                FakeTransport t = new FakeTransport();
                final AtomicInteger calls = new AtomicInteger();
                t.script = new Script() {
                    public Transport.Response answer(int n, Req r) {
                        // Every third request fails once: retries interleave with new batches.
                        if (calls.incrementAndGet() % 3 == 0) {
                            return new Transport.Response(503, null, "");
                        }
                        return accepted(r);
                    }
                };
                Drops d = new Drops();
                final ThreatView tv = builder(c, t, d).flushAt(50).maxQueueEvents(100000).build();
                final int threads = 8;
                final int per = 5000;
                final CountDownLatch start = new CountDownLatch(1);
                Thread[] ts = new Thread[threads];
                for (int i = 0; i < threads; i++) {
                    final int k = i;
                    ts[i] = new Thread(new Runnable() {
                        public void run() {
                            try {
                                start.await();
                            } catch (InterruptedException e) {
                                return;
                            }
                            for (int j = 0; j < per; j++) {
                                Map<String, Object> e = ev("t" + k);
                                e.put("attributes", Collections.singletonMap("j", j));
                                tv.enqueue(e);
                                if (j % 1000 == 0) {
                                    tv.flush(5, TimeUnit.SECONDS);
                                }
                            }
                        }
                    });
                    ts[i].start();
                }
                start.countDown();
                for (Thread th : ts) {
                    th.join();
                }
                check(tv.flush(20, TimeUnit.SECONDS), "flush timed out");
                // Distinct ids, each (thread, j) once (two requests may be in flight: no order across them).
                Set<String> ids = new HashSet<String>();
                Set<String> seen = new HashSet<String>();
                // A failed attempt and its retry carry the same key: count each batch once.
                Map<String, Req> lastByKey = new LinkedHashMap<String, Req>();
                synchronized (t.reqs) {
                    for (Req r : t.reqs) {
                        lastByKey.put(r.key, r);
                    }
                }
                for (Req r : lastByKey.values()) {
                    for (Map<String, Object> e : r.events) {
                        check(ids.add((String) e.get("event_id")), "event_id %s in two batches", e.get("event_id"));
                        int k = Integer.parseInt(((String) e.get("type")).substring(1));
                        int j = ((Number) ((Map<?, ?>) e.get("attributes")).get("j")).intValue();
                        check(seen.add(k + "/" + j), "event %d/%d twice", k, j);
                    }
                }
                eq(ids.size(), threads * per, "distinct events delivered");
                eq(tv.stats().delivered, (long) threads * per, "stats.delivered");
                eq(tv.stats().queued, 0L, "stats.queued");
                eq(d.all.size(), 0, "drops");
                tv.close();
            }
        });

        test("ThreatView/enqueue never waits for a stuck collector", new Body() {
            public void run() throws Exception {
                FakeClock c = new FakeClock();
                FakeTransport t = new FakeTransport();
                final CountDownLatch hold = new CountDownLatch(1);
                t.script = held(hold, new Transport.Response(202, null, "{}"));
                Drops d = new Drops();
                File dir = tempDir("stuck");
                ThreatView tv = builder(c, t, d).storage(new FileStorage(dir)).flushAt(10).maxQueueEvents(100000).build();
                long[] took = new long[20000];
                for (int i = 0; i < took.length; i++) {
                    long t0 = System.nanoTime();
                    tv.enqueue(ev("stuck"));
                    took[i] = System.nanoTime() - t0;
                }
                // Every enqueue returned while the one request hangs, and each was accepted.
                check(t.reqs.size() <= 2, "requests while stuck = %d, want at most the two in flight", t.reqs.size());
                eq(tv.stats().queued, 20000L, "queued while stuck");
                check(!tv.flush(100, TimeUnit.MILLISECONDS), "flush returned true while the collector is stuck");
                hold.countDown();
                check(tv.flush(10, TimeUnit.SECONDS), "flush timed out after the collector came back");
                eq(t.deliveredIds().size(), 20000, "delivered");
                tv.close();
                Arrays.sort(took);
                System.out.printf("    enqueue while the collector hung: median %.1f us, p99 %.1f us, max %.1f ms (a shared 2-core box: the max is the scheduler's)%n",
                        took[took.length / 2] / 1e3, took[took.length * 99 / 100] / 1e3, took[took.length - 1] / 1e6);
                deleteTree(dir);
            }
        });

        test("ThreatView/opt-out empties the queue and sends nothing", new Body() {
            public void run() throws Exception {
                FakeClock c = new FakeClock();
                FakeTransport t = new FakeTransport();
                final CountDownLatch hold = new CountDownLatch(1);
                t.script = held(hold, new Transport.Response(503, "30", ""));
                Drops d = new Drops();
                File dir = tempDir("optout");
                ThreatView tv = builder(c, t, d).storage(new FileStorage(dir)).flushAt(5).build();
                for (int i = 0; i < 12; i++) {
                    tv.enqueue(ev("before"));
                }
                tv.setOptOut(true);
                hold.countDown();
                check(tv.flush(5, TimeUnit.SECONDS), "flush after opt-out timed out");
                eq(d.count(Drop.OPTED_OUT), 12, "opted_out drops");
                tv.enqueue(ev("after"));
                eq(d.count(Drop.OPTED_OUT), 13, "opted_out drops after enqueue");
                int reqs = t.reqs.size();
                check(reqs <= 1, "requests = %d, want at most the one in flight", reqs);
                eq(tv.stats().queued, 0L, "queued");
                tv.close();
                FileStorage fs = new FileStorage(dir);
                eq(fs.size(), 0, "events left on disk after opt-out");
                fs.close();
                // Opted out from the start: nothing is sent, nothing queued.
                FakeTransport t2 = new FakeTransport();
                ThreatView off = builder(c, t2, d).optOut(true).build();
                off.enqueue(ev("x"));
                off.flush();
                off.setOptOut(false);
                off.enqueue(ev("y"));
                check(off.flush(5, TimeUnit.SECONDS), "flush after opting in again");
                eq(t2.reqs.size(), 1, "requests after opting in");
                eq(t2.reqs.get(0).events.get(0).get("type"), "y", "the event sent");
                off.close();
                deleteTree(dir);
            }
        });

        test("ThreatView/close cuts a hanging request at closeTimeout; the events stay queued", new Body() {
            public void run() throws Exception {
                StormProxy hang = new StormProxy("http://127.0.0.1:9", new StormProxy.Plan() {
                    public StormProxy.Mode mode(int n) {
                        return StormProxy.Mode.HANG;
                    }
                });
                File dir = tempDir("hang");
                Drops d = new Drops();
                ThreatView tv = ThreatView.builder().endpoint(hang.url()).token("t").queueDir(dir).app("demo-app", "1.0.0")
                        .onDrop(d).closeTimeout(300, TimeUnit.MILLISECONDS).requestTimeout(20, TimeUnit.SECONDS).build();
                for (int i = 0; i < 10; i++) {
                    tv.enqueue(ev("hung"));
                }
                check(!tv.flush(500, TimeUnit.MILLISECONDS), "flush returned true while the request hangs");
                check(hang.requests.get() >= 1, "no request made");
                long t0 = System.nanoTime();
                tv.close();
                long took = (System.nanoTime() - t0) / 1000000;
                hang.close();
                check(took < 3000, "close took %d ms with closeTimeout 300 ms (a request hung)", took);
                eq(d.all.size(), 0, "drops");
                FileStorage fs = new FileStorage(dir);
                eq(fs.size(), 10, "events still queued");
                fs.close();
                deleteTree(dir);
            }
        });

        test("FileStorage/segments, reopen, torn line, lock", new Body() {
            public void run() throws Exception {
                File dir = tempDir("fs");
                FileStorage fs = new FileStorage(dir, 1000);
                List<Storage.Entry> in = new ArrayList<Storage.Entry>();
                for (int i = 0; i < 100; i++) {
                    in.add(new Storage.Entry(1000 + i, ("{\"event_id\":\"e" + i + "\",\"type\":\"t\"}").getBytes(UTF8)));
                }
                fs.append(in.subList(0, 60));
                fs.append(in.subList(60, 100));
                eq(fs.size(), 100, "size");
                check(dir.list().length >= 5, "segments: %s", Arrays.toString(dir.list()));
                try {
                    new FileStorage(dir);
                    throw new AssertionError("a second FileStorage opened the same directory");
                } catch (IOException expected) {
                    // ok
                }
                List<Storage.Entry> p = fs.peek(30, 1 << 20);
                eq(p.size(), 30, "peek");
                eq(new String(p.get(29).json, UTF8), new String(in.get(29).json, UTF8), "peek 29");
                eq(p.get(29).enqueuedAt, 1029L, "enqueuedAt");
                fs.remove(30);
                p = fs.peek(500, 10); // a byte cap below one entry still gives one
                eq(p.size(), 1, "peek under a small byte cap");
                eq(new String(p.get(0).json, UTF8), new String(in.get(30).json, UTF8), "head after remove");
                fs.remove(1);
                long bytes = fs.bytes();
                fs.close();
                // Reopen: the head survives; a torn last line is cut.
                File[] segs = dir.listFiles();
                Arrays.sort(segs);
                File last = null;
                for (File f : segs) {
                    if (f.getName().startsWith("q-")) {
                        last = f;
                    }
                }
                FileOutputStream tail = new FileOutputStream(last, true);
                tail.write("2000\t{\"event_id\":\"torn".getBytes(UTF8));
                tail.close();
                fs = new FileStorage(dir, 1000);
                eq(fs.size(), 69, "size after reopen");
                eq(fs.bytes(), bytes, "bytes after reopen");
                p = fs.peek(500, 1 << 20);
                eq(p.size(), 69, "peek all");
                eq(new String(p.get(0).json, UTF8), new String(in.get(31).json, UTF8), "head after reopen");
                eq(new String(p.get(68).json, UTF8), new String(in.get(99).json, UTF8), "tail after reopen");
                fs.append(Collections.singletonList(new Storage.Entry(5, "{\"event_id\":\"n\"}".getBytes(UTF8))));
                p = fs.peek(500, 1 << 20);
                eq(p.size(), 70, "peek after append");
                fs.remove(70);
                eq(fs.size(), 0, "size after removing all");
                eq(fs.diskBytes(), 0L, "disk bytes when empty");
                fs.append(in.subList(0, 3));
                fs.clear();
                eq(fs.size(), 0, "size after clear");
                fs.close();
                // A line that is not ours is handed out as unreadable, not lost silently.
                RandomAccessFile raf = new RandomAccessFile(new File(dir, "q-" + String.format("%019d", 999) + ".log"), "rw");
                raf.write("garbage\n".getBytes(UTF8));
                raf.close();
                fs = new FileStorage(dir, 1000);
                p = fs.peek(10, 1 << 20);
                check(p.size() == 1 && p.get(0).enqueuedAt == -1, "garbage line read as %d entries", p.size());
                fs.close();
                deleteTree(dir);
            }
        });

        test("ThreatView/file queue survives close and a new instance sends it", new Body() {
            public void run() throws Exception {
                File dir = tempDir("restart");
                FakeClock c = new FakeClock();
                FakeTransport down = new FakeTransport();
                down.script = new Script() {
                    public Transport.Response answer(int n, Req r) {
                        return new Transport.Response(503, "1", "");
                    }
                };
                Drops d = new Drops();
                // A real clock here: close must cut a backoff short.
                ThreatView.Builder b = builder(c, down, d).storage(new FileStorage(dir)).flushAt(10)
                        .closeTimeout(300, TimeUnit.MILLISECONDS);
                b.clock = Clock.SYSTEM;
                ThreatView tv = b.build();
                for (int i = 0; i < 25; i++) {
                    tv.enqueue(ev("kept"));
                }
                long t0 = System.nanoTime();
                tv.close();
                check(System.nanoTime() - t0 < 3_000_000_000L, "close took %d ms", (System.nanoTime() - t0) / 1000000);
                eq(d.all.size(), 0, "drops at close (the queue is durable)");
                check(down.reqs.size() >= 1, "no attempt before close");
                List<String> tried = down.reqs.get(0).ids();
                FakeTransport up = new FakeTransport();
                ThreatView tv2 = builder(c, up, d).storage(new FileStorage(dir)).flushAt(500).build();
                eq(tv2.stats().queued, 25L, "queued at start");
                check(tv2.flush(5, TimeUnit.SECONDS), "flush timed out");
                List<String> got = up.deliveredIds();
                eq(got.size(), 25, "delivered by the second instance");
                eq(got.subList(0, tried.size()), tried, "same event ids as the first attempt");
                tv2.close();
                deleteTree(dir);
            }
        });
    }
}
