package com.threatview.sdk;

import java.io.File;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * CrashChild is the app process E2E/killed kills: it enqueues n events
 * tagged with a run id into a file queue, says "queued" once they are
 * in the queue files, and keeps sending until it is killed.
 * Arguments: endpoint token app queueDir run n.
 */
public final class CrashChild {
    private CrashChild() {}

    public static void main(String[] a) throws Exception {
        ThreatView tv = ThreatView.builder().endpoint(a[0]).token(a[1]).app(a[2], "1.0.0").queueDir(new File(a[3]))
                .flushAt(100).backoff(50, 500, TimeUnit.MILLISECONDS).build();
        int n = Integer.parseInt(a[5]);
        for (int i = 0; i < n; i++) {
            Map<String, Object> e = new LinkedHashMap<String, Object>();
            e.put("type", "app.startup");
            Map<String, Object> attrs = new LinkedHashMap<String, Object>();
            attrs.put("run", a[4]);
            attrs.put("i", i);
            e.put("attributes", attrs);
            tv.enqueue(e);
        }
        // The writer thread puts them in the files within milliseconds; leave it ample time on a busy box.
        Thread.sleep(1500);
        System.out.println("queued " + tv.stats());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
