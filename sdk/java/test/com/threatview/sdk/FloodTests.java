package com.threatview.sdk;

import static com.threatview.sdk.TestMain.*;

import java.io.File;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/** FloodTests push far more than the caps allow and check that memory and disk stay bounded. */
final class FloodTests {
    private FloodTests() {}

    static long heapAfterGc() {
        Runtime r = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return r.totalMemory() - r.freeMemory();
    }

    /** processCpuNanos is the JVM's CPU time (every thread), or -1 where the JVM does not say. */
    static long processCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return -1;
    }

    static void register() {
        test("Flood/1M events into a queue capped at 10 MB: memory and disk stay bounded", new Body() {
            public void run() throws Exception {
                File dir = tempDir("flood");
                FileStorage fs = new FileStorage(dir);
                FakeClock c = new FakeClock();
                FakeTransport t = new FakeTransport();
                CountDownLatch hold = new CountDownLatch(1);
                t.script = held(hold, new Transport.Response(503, "60", ""));
                final AtomicLong full = new AtomicLong();
                final AtomicLong other = new AtomicLong();
                ThreatView.Builder b = builder(c, t, null).storage(fs).maxQueueBytes(10L << 20).maxQueueEvents(2000000)
                        .flushAt(500).closeTimeout(100, TimeUnit.MILLISECONDS).onDrop(new DropListener() {
                            public void onDrop(Drop d) {
                                (d.reason.equals(Drop.QUEUE_FULL) ? full : other).addAndGet(d.count);
                            }
                        });
                ThreatView tv = b.build();
                Map<String, Object>[] evs = BenchTests.events(1000);
                long heap0 = heapAfterGc();
                int n = 1000000;
                List<Long> samples = new ArrayList<Long>();
                java.lang.management.ThreadMXBean mx = ManagementFactory.getThreadMXBean();
                long cpu0 = mx.getCurrentThreadCpuTime();
                long t0 = System.nanoTime();
                for (int i = 0; i < n; i++) {
                    tv.enqueue(evs[i % evs.length]);
                    if (i % 250000 == 249999) {
                        samples.add(heapAfterGc() - heap0);
                    }
                }
                long took = System.nanoTime() - t0;
                long cpu = mx.getCurrentThreadCpuTime() - cpu0;
                Stats st = tv.stats();
                long heap1 = heapAfterGc();
                hold.countDown();
                tv.close();
                long disk = fs.diskBytes();
                System.out.printf("    %d enqueued in %.2f s (%.2f us each, wall; %.2f us of the caller's CPU; most refused at the cap): %d queued, %d bytes, %d on disk; heap growth after GC %s, at the end %.1f MiB%n",
                        n, took / 1e9, took / 1e3 / n, cpu / 1e3 / n, st.queued, st.queuedBytes, disk, mib(samples), (heap1 - heap0) / 1048576.0);
                check(st.queuedBytes <= 10L << 20, "queued %d bytes, over the 10 MiB cap", st.queuedBytes);
                check(st.queued > 20000, "only %d events queued", st.queued);
                eq(full.get() + st.queued, (long) n, "queue_full drops + queued");
                eq(other.get(), 0L, "other drops");
                // Each line on disk adds its enqueue time, a tab and a newline to the JSON.
                check(disk <= st.queuedBytes + st.queued * 16 && disk >= st.queuedBytes, "disk %d bytes for %d of JSON", disk, st.queuedBytes);
                for (long s : samples) {
                    check(s < 24L << 20, "heap grew %d bytes during the flood", s);
                }
                deleteTree(dir);
            }
        });
    }

    static String mib(List<Long> xs) {
        StringBuilder sb = new StringBuilder();
        for (long x : xs) {
            sb.append(sb.length() > 0 ? ", " : "").append(String.format("%.1f", x / 1048576.0));
        }
        return "[" + sb + "] MiB";
    }
}
