package com.threatview.sdk;

import static com.threatview.sdk.TestMain.*;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * E2ETests run the SDK against the real collector of the local stack
 * (.run/env) and check PostgreSQL by event id. Outside make test they
 * skip when the stack's addresses are unset; with
 * THREATVIEW_REQUIRE_SERVICES=1 that is a failure.
 */
final class E2ETests {
    private E2ETests() {}

    static String collector;
    static String token;
    static String app;
    static String db;

    static void need() {
        collector = env("THREATVIEW_COLLECTOR_URL");
        token = env("THREATVIEW_DEMO_TOKEN");
        app = env("THREATVIEW_DEMO_APP");
        db = env("EVENTS_DATABASE_URL");
        if (collector.isEmpty() || token.isEmpty() || app.isEmpty() || db.isEmpty()) {
            String why = "THREATVIEW_COLLECTOR_URL, THREATVIEW_DEMO_TOKEN, THREATVIEW_DEMO_APP and EVENTS_DATABASE_URL are needed (source .run/env)";
            if ("1".equals(env("THREATVIEW_REQUIRE_SERVICES"))) {
                throw new AssertionError(why);
            }
            throw new Skip(why);
        }
    }

    static Map<String, Object> event(String type, int i) {
        Map<String, Object> e = new LinkedHashMap<String, Object>();
        e.put("type", type);
        Map<String, Object> dev = new LinkedHashMap<String, Object>();
        dev.put("id", "java-sdk-e2e-" + (i % 7));
        dev.put("model", "Pixel " + (6 + i % 3));
        dev.put("manufacturer", "Google");
        dev.put("os", "android");
        dev.put("os_version", "14");
        e.put("device", dev);
        if (i % 5 == 0) {
            e.put("threats", Collections.singletonList(FreeRaspAdapter.THREATS.get(i % 18)));
        }
        e.put("attributes", Collections.singletonMap("i", i));
        return e;
    }

    /** psql runs sql against the events database and returns its unaligned output. */
    static String psql(String sql) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder("psql", db, "-X", "-At", "-v", "ON_ERROR_STOP=1", "-f", "-");
        pb.redirectErrorStream(true);
        Process p = pb.start();
        OutputStream in = p.getOutputStream();
        in.write(sql.getBytes(UTF8));
        in.close();
        InputStream out = p.getInputStream();
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        byte[] buf = new byte[8192];
        int n;
        while ((n = out.read(buf)) > 0) {
            b.write(buf, 0, n);
        }
        int rc = p.waitFor();
        String s = new String(b.toByteArray(), UTF8).trim();
        if (rc != 0) {
            throw new IOException("psql: " + s);
        }
        return s;
    }

    /** stored waits until the processor has stored want of ids (or 90 s) and returns "rows distinct". */
    static String stored(List<String> ids, int want) throws Exception {
        StringBuilder sb = new StringBuilder("select count(*), count(distinct id) from events.events where app_id = '");
        sb.append(app.replace("'", "''")).append("' and id in (");
        for (int i = 0; i < ids.size(); i++) {
            sb.append(i > 0 ? "," : "").append('\'').append(ids.get(i)).append('\'');
        }
        sb.append(");");
        String got = "";
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        while (System.nanoTime() < deadline) {
            got = psql(sb.toString()).replace('|', ' ');
            if (got.startsWith(want + " ")) {
                // A duplicate would show as more rows; give the processor a moment to write one.
                Thread.sleep(1000);
                return psql(sb.toString()).replace('|', ' ');
            }
            Thread.sleep(500);
        }
        return got;
    }

    static void register() {
        test("E2E/503 storm through a proxy: every event stored exactly once", new Body() {
            public void run() throws Exception {
                need();
                StormProxy proxy = new StormProxy(collector, new StormProxy.Plan() {
                    public StormProxy.Mode mode(int n) {
                        if (n < 4) {
                            return StormProxy.Mode.UNAVAILABLE;
                        }
                        if (n < 7) {
                            return StormProxy.Mode.FORWARD_THEN_503;
                        }
                        if (n < 9) {
                            return StormProxy.Mode.FORWARD_THEN_DROP;
                        }
                        if (n < 10) {
                            return StormProxy.Mode.DROP;
                        }
                        return n % 4 == 0 ? StormProxy.Mode.FORWARD_THEN_503 : StormProxy.Mode.FORWARD;
                    }
                });
                File dir = tempDir("storm");
                Drops d = new Drops();
                ThreatView.Builder b = ThreatView.builder().endpoint(proxy.url()).token(token).queueDir(dir)
                        .app(app, "1.0.0").onDrop(d).flushAt(250).backoff(50, 1000, TimeUnit.MILLISECONDS);
                Recording rec = new Recording(new HttpTransport(proxy.url(), token, 15000, "threatview-java-test"));
                b.transport = rec;
                ThreatView tv = b.build();
                int n = 2000;
                for (int i = 0; i < n; i++) {
                    tv.enqueue(event("app.startup", i));
                }
                check(tv.flush(120, TimeUnit.SECONDS), "flush timed out: %s", tv.stats());
                Stats st = tv.stats();
                tv.close();
                proxy.close();
                eq(d.all.size(), 0, "drops " + d.all);
                eq(st.delivered, (long) n, "delivered");
                check(st.retries >= 10, "retries %d: the storm did not happen (%s)", st.retries, proxy.log);
                List<String> ids = rec.distinctIds();
                eq(ids.size(), n, "distinct event ids the SDK sent");
                String got = stored(ids, n);
                eq(got, n + " " + n, "rows and distinct ids stored");
                System.out.printf("    %d requests through the proxy, %d retries: %s%n", proxy.requests.get(), st.retries,
                        proxy.log.subList(0, Math.min(14, proxy.log.size())));
                deleteTree(dir);
            }
        });
    }

    /** Recording passes requests to a real transport and keeps the event ids it sent. */
    static final class Recording implements Transport {
        final Transport next;
        final List<Req> reqs = Collections.synchronizedList(new ArrayList<Req>());

        Recording(Transport next) {
            this.next = next;
        }

        @Override
        public Response post(byte[] gz, String key) throws IOException {
            reqs.add(new Req(key, gunzip(gz)));
            return next.post(gz, key);
        }

        List<String> distinctIds() {
            java.util.LinkedHashSet<String> s = new java.util.LinkedHashSet<String>();
            synchronized (reqs) {
                for (Req r : reqs) {
                    s.addAll(r.ids());
                }
            }
            return new ArrayList<String>(s);
        }
    }
}
