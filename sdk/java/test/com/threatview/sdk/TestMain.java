package com.threatview.sdk;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.Charset;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.GZIPInputStream;

/**
 * TestMain is the SDK's test runner (no JUnit: the SDK has no
 * dependencies, and the build has no Maven). It runs every registered
 * case, prints one line per case and "N passed, N failed", and exits 1
 * on any failure. Arguments: -unit (unit tests only), -run SUBSTRING.
 */
public final class TestMain {
    interface Body {
        void run() throws Exception;
    }

    /** Skip marks a case that cannot run here (e.g. no stack outside make test). */
    static final class Skip extends RuntimeException {
        Skip(String why) {
            super(why);
        }
    }

    private static final List<String> names = new ArrayList<String>();
    private static final List<Body> bodies = new ArrayList<Body>();

    static void test(String name, Body b) {
        names.add(name);
        bodies.add(b);
    }

    public static void main(String[] args) {
        boolean unitOnly = false;
        boolean bench = false;
        String filter = null;
        for (int i = 0; i < args.length; i++) {
            if ("-bench".equals(args[i])) {
                bench = true;
            } else if ("-unit".equals(args[i])) {
                unitOnly = true;
            } else if ("-run".equals(args[i]) && i + 1 < args.length) {
                filter = args[++i];
            }
        }
        UnitTests.register();
        VectorTests.register();
        FloodTests.register();
        if (bench) {
            BenchTests.register();
        } else if (!unitOnly) {
            E2ETests.register();
        }
        int passed = 0;
        int failed = 0;
        int skipped = 0;
        for (int i = 0; i < names.size(); i++) {
            String n = names.get(i);
            if (filter != null && !n.contains(filter)) {
                continue;
            }
            long t0 = System.nanoTime();
            try {
                bodies.get(i).run();
                passed++;
                System.out.printf("PASS %s (%.2fs)%n", n, (System.nanoTime() - t0) / 1e9);
            } catch (Skip s) {
                skipped++;
                System.out.printf("SKIP %s: %s%n", n, s.getMessage());
            } catch (Throwable t) {
                failed++;
                System.out.printf("FAIL %s (%.2fs): %s%n", n, (System.nanoTime() - t0) / 1e9, t);
                StackTraceElement[] st = t.getStackTrace();
                for (int k = 0; k < Math.min(6, st.length); k++) {
                    System.out.println("    at " + st[k]);
                }
            }
        }
        System.out.println(passed + " passed, " + failed + " failed" + (skipped > 0 ? ", " + skipped + " skipped" : ""));
        System.exit(failed > 0 ? 1 : 0);
    }

    // ---- assertions ----

    static void check(boolean ok, String fmt, Object... args) {
        if (!ok) {
            throw new AssertionError(String.format(fmt, args));
        }
    }

    static void eq(Object got, Object want, String what) {
        if (got == null ? want != null : !got.equals(want)) {
            throw new AssertionError(what + " = " + got + ", want " + want);
        }
    }

    // ---- fakes ----

    static final Charset UTF8 = Charset.forName("UTF-8");

    /** FakeClock advances on sleep and records each wait. */
    static final class FakeClock implements Clock {
        final AtomicLong now = new AtomicLong(1764750000000L); // 2025-12-03
        final List<Long> sleeps = Collections.synchronizedList(new ArrayList<Long>());

        @Override
        public long nowMillis() {
            return now.get();
        }

        @Override
        public void sleep(long ms) {
            sleeps.add(ms);
            now.addAndGet(ms);
        }
    }

    /** Req is one request the fake collector got. */
    static final class Req {
        final String key;
        final String json;
        final List<Map<String, Object>> events;

        @SuppressWarnings("unchecked")
        Req(String key, String json) {
            this.key = key;
            this.json = json;
            this.events = (List<Map<String, Object>>) ((Map<String, Object>) Json.parse(json)).get("events");
        }

        List<String> ids() {
            List<String> out = new ArrayList<String>();
            for (Map<String, Object> e : events) {
                out.add((String) e.get("event_id"));
            }
            return out;
        }
    }

    interface Script {
        Transport.Response answer(int n, Req r) throws IOException;
    }

    static Transport.Response accepted(Req r) {
        return new Transport.Response(202, null, "{\"accepted\":" + r.events.size() + "}");
    }

    /** held answers every request with answer once hold is released. */
    static Script held(final java.util.concurrent.CountDownLatch hold, final Transport.Response answer) {
        return new Script() {
            @Override
            public Transport.Response answer(int n, Req r) throws IOException {
                try {
                    hold.await();
                } catch (InterruptedException e) {
                    throw new IOException(e);
                }
                return answer;
            }
        };
    }

    /** FakeTransport is a collector in memory: it records requests and answers by script. */
    static final class FakeTransport implements Transport {
        final List<Req> reqs = Collections.synchronizedList(new ArrayList<Req>());
        volatile Script script = new Script() {
            @Override
            public Transport.Response answer(int n, Req r) {
                return accepted(r);
            }
        };

        @Override
        public Response post(byte[] gz, String key) throws IOException {
            Req r = new Req(key, gunzip(gz));
            int n;
            synchronized (reqs) {
                reqs.add(r);
                n = reqs.size() - 1;
            }
            return script.answer(n, r);
        }

        @Override
        public void abort() {}

        List<String> deliveredIds() {
            List<String> out = new ArrayList<String>();
            synchronized (reqs) {
                for (Req r : reqs) {
                    out.addAll(r.ids());
                }
            }
            return out;
        }
    }

    /** Drops collects what the drop listener heard. */
    static final class Drops implements DropListener {
        final List<Drop> all = Collections.synchronizedList(new ArrayList<Drop>());

        @Override
        public void onDrop(Drop d) {
            all.add(d);
        }

        int count(String reason) {
            int n = 0;
            synchronized (all) {
                for (Drop d : all) {
                    if (d.reason.equals(reason)) {
                        n += d.count;
                    }
                }
            }
            return n;
        }

        List<String> ids() {
            List<String> out = new ArrayList<String>();
            synchronized (all) {
                for (Drop d : all) {
                    out.addAll(d.eventIds);
                }
            }
            return out;
        }
    }

    /** builder is a ThreatView builder on a fake clock and collector, memory storage, app demo-app. */
    static ThreatView.Builder builder(FakeClock c, FakeTransport t, Drops d) {
        ThreatView.Builder b = ThreatView.builder().endpoint("http://127.0.0.1:9").token("test-token")
                .storage(new MemoryStorage()).app("demo-app", "1.0.0").onDrop(d)
                .backoff(50, 2000, java.util.concurrent.TimeUnit.MILLISECONDS);
        b.clock = c;
        b.transport = t;
        b.random = new Random(42);
        return b;
    }

    static String gunzip(byte[] gz) throws IOException {
        InputStream in = new GZIPInputStream(new ByteArrayInputStream(gz));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] b = new byte[8192];
        int n;
        while ((n = in.read(b)) > 0) {
            out.write(b, 0, n);
        }
        return new String(out.toByteArray(), UTF8);
    }

    static File tempDir(String name) throws IOException {
        File d = Files.createTempDirectory("threatview-" + name).toFile();
        d.deleteOnExit();
        return d;
    }

    static void deleteTree(File f) {
        File[] kids = f.listFiles();
        if (kids != null) {
            for (File k : kids) {
                deleteTree(k);
            }
        }
        f.delete();
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> vectors() throws IOException {
        String p = System.getProperty("threatview.testdata", "../testdata");
        File f = new File(p, "vectors.json");
        if (!f.isFile()) {
            throw new AssertionError("wire test vectors missing: " + f.getAbsolutePath());
        }
        return (Map<String, Object>) Json.parse(new String(Files.readAllBytes(f.toPath()), UTF8));
    }

    static String env(String k) {
        String v = System.getenv(k);
        return v == null ? "" : v;
    }
}
