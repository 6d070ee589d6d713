package com.threatview.sdk;

import static com.threatview.sdk.TestMain.*;

import java.io.File;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * BenchTests measure what the README reports (run with test.sh -bench):
 * enqueue cost with the file queue, and delivery to the local collector.
 */
final class BenchTests {
    private BenchTests() {}

    static void register() {
        test("Bench/enqueue with the file queue", new Body() {
            public void run() throws Exception {
                int n = 200000;
                // Built before timing: the app's cost of making its map is not the SDK's.
                Map<String, Object>[] evs = events(n);
                for (int round = 0; round < 2; round++) {
                    File dir = tempDir("bench");
                    FileStorage fs = new FileStorage(dir);
                    FakeTransport t = new FakeTransport();
                    CountDownLatch hold = new CountDownLatch(1);
                    t.script = held(hold, new Transport.Response(503, "60", ""));
                    ThreatView tv = builder(new FakeClock(), t, null).storage(fs).maxQueueBytes(1L << 30).maxQueueEvents(n)
                            .flushAt(500).closeTimeout(100, TimeUnit.MILLISECONDS).build();
                    FloodTests.heapAfterGc();
                    java.lang.management.ThreadMXBean mx = java.lang.management.ManagementFactory.getThreadMXBean();
                    long cpu0 = FloodTests.processCpuNanos();
                    long caller0 = mx.getCurrentThreadCpuTime();
                    long t0 = System.nanoTime();
                    for (int i = 0; i < n; i++) {
                        tv.enqueue(evs[i]);
                    }
                    long wall = System.nanoTime() - t0;
                    long caller = mx.getCurrentThreadCpuTime() - caller0;
                    while (fs.size() < n) {
                        Thread.sleep(1);
                    }
                    long all = System.nanoTime() - t0;
                    long cpu = FloodTests.processCpuNanos() - cpu0;
                    Stats st = tv.stats();
                    hold.countDown();
                    tv.close();
                    eq(st.queued, (long) n, "queued");
                    System.out.printf("    round %d: %d events of ~%d B: enqueue %.2f us of the caller's CPU (%.2f us wall); on disk after %.2f s; process CPU %.2f us an event (caller + writer + GC); %d bytes on disk%n",
                            round, n, st.queuedBytes / n, caller / 1e3 / n, wall / 1e3 / n, all / 1e9, cpu / 1e3 / n, fs.diskBytes());
                    deleteTree(dir);
                }
            }
        });

        test("Bench/delivery ceiling: a local server that answers 202 at once", new Body() {
            public void run() throws Exception {
                com.sun.net.httpserver.HttpServer srv = com.sun.net.httpserver.HttpServer.create(
                        new java.net.InetSocketAddress(java.net.InetAddress.getByName("127.0.0.1"), 0), 50);
                srv.createContext("/v1/events", new com.sun.net.httpserver.HttpHandler() {
                    public void handle(com.sun.net.httpserver.HttpExchange ex) throws java.io.IOException {
                        java.io.InputStream in = ex.getRequestBody();
                        byte[] b = new byte[16384];
                        while (in.read(b) > 0) {
                            // drain
                        }
                        byte[] out = "{\"accepted\":1}".getBytes(UTF8);
                        ex.sendResponseHeaders(202, out.length);
                        ex.getResponseBody().write(out);
                        ex.close();
                    }
                });
                srv.setExecutor(java.util.concurrent.Executors.newFixedThreadPool(2));
                srv.start();
                String url = "http://127.0.0.1:" + srv.getAddress().getPort();
                int n = 100000;
                Map<String, Object>[] evs = events(n);
                for (int round = 0; round < 2; round++) {
                    File dir = tempDir("ceiling");
                    ThreatView tv = ThreatView.builder().endpoint(url).token("t").queueDir(dir).app("demo-app", "1.0.0")
                            .flushAt(500).maxQueueEvents(n).maxQueueBytes(1L << 30).build();
                    long t0 = System.nanoTime();
                    for (int i = 0; i < n; i++) {
                        tv.enqueue(evs[i]);
                    }
                    check(tv.flush(120, TimeUnit.SECONDS), "flush timed out");
                    long wall = System.nanoTime() - t0;
                    long sdk = sdkThreadsCpu();
                    Stats st = tv.stats();
                    tv.close();
                    eq(st.delivered, (long) n, "delivered");
                    System.out.printf("    round %d: %d events in %d requests, %.0f events/s end to end (enqueue, file queue, gzip, HTTP); SDK threads %.1f us of CPU an event; load %.1f%n",
                            round, n, st.requests, n / (wall / 1e9), sdk / 1e3 / n,
                            java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
                    deleteTree(dir);
                }
                srv.stop(0);
            }
        });

        test("Bench/delivery to the local collector", new Body() {
            public void run() throws Exception {
                E2ETests.need();
                int n = 10000;
                int[] conc = {2, 2, 1, 4};
                for (int round = 0; round < conc.length; round++) {
                    Map<String, Object>[] evs = events(n);
                    File dir = tempDir("deliver");
                    ThreatView.Builder b = ThreatView.builder().endpoint(E2ETests.collector).token(E2ETests.token).queueDir(dir)
                            .app(E2ETests.app, "1.0.0").flushAt(500).maxQueueEvents(n).concurrency(conc[round]);
                    E2ETests.Recording rec = new E2ETests.Recording(new HttpTransport(E2ETests.collector, E2ETests.token, 15000, "threatview-java-bench"));
                    b.transport = rec;
                    ThreatView tv = b.build();
                    long cpu0 = FloodTests.processCpuNanos();
                    long t0 = System.nanoTime();
                    for (int i = 0; i < n; i++) {
                        tv.enqueue(evs[i]);
                    }
                    check(tv.flush(120, TimeUnit.SECONDS), "flush timed out");
                    long wall = System.nanoTime() - t0;
                    long cpu = FloodTests.processCpuNanos() - cpu0;
                    long sdk = sdkThreadsCpu();
                    Stats st = tv.stats();
                    tv.close();
                    eq(st.delivered, (long) n, "delivered");
                    System.out.printf("    round %d, concurrency %d: %d events in %d requests, %.0f events/s accepted (202: durable on the broker); CPU an event: SDK threads %.1f us, whole JVM %.1f us; load %.1f%n",
                            round, conc[round], n, st.requests, n / (wall / 1e9), sdk / 1e3 / n, cpu / 1e3 / n,
                            java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
                    if (round == conc.length - 1) {
                        eq(E2ETests.stored(rec.distinctIds(), n), n + " " + n, "rows and distinct ids stored");
                    }
                    deleteTree(dir);
                }
            }
        });
    }

    /** sdkThreadsCpu is the CPU time of the live threatview-* threads (the caller's enqueues not included). */
    static long sdkThreadsCpu() {
        java.lang.management.ThreadMXBean mx = java.lang.management.ManagementFactory.getThreadMXBean();
        long sum = 0;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("threatview-")) {
                sum += Math.max(0, mx.getThreadCpuTime(t.getId()));
            }
        }
        return sum;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object>[] events(int n) {
        Map<String, Object>[] evs = new Map[n];
        for (int i = 0; i < n; i++) {
            evs[i] = E2ETests.event("app.startup", i);
        }
        return evs;
    }
}
