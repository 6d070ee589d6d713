package com.threatview.sdk;

import static com.threatview.sdk.TestMain.*;

import java.io.IOException;
import java.net.ConnectException;
import java.net.SocketException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** VectorTests check the SDK against the shared wire test vectors (sdk/testdata). */
final class VectorTests {
    private VectorTests() {}

    static void register() {
        test("Vectors/answers: deliver, retry or drop as every SDK does", new Body() {
            @SuppressWarnings("unchecked")
            public void run() throws Exception {
                Map<String, Object> v = vectors();
                int size = ((Number) ((Map<?, ?>) v.get("client")).get("answer_batch_size")).intValue();
                List<Map<String, Object>> cases = (List<Map<String, Object>>) v.get("answers");
                check(cases != null && cases.size() > 10, "answers: %s", cases == null ? null : cases.size());
                for (final Map<String, Object> tc : cases) {
                    String name = (String) tc.get("name");
                    Map<String, Object> expect = (Map<String, Object>) tc.get("expect");
                    String action = (String) expect.get("action");
                    FakeClock c = new FakeClock();
                    FakeTransport t = new FakeTransport();
                    t.script = new Script() {
                        public Transport.Response answer(int n, Req r) throws IOException {
                            if (n > 0) {
                                return accepted(r);
                            }
                            return scripted(tc);
                        }
                    };
                    Drops d = new Drops();
                    ThreatView tv = builder(c, t, d).flushAt(500).build();
                    for (int i = 0; i < size; i++) {
                        tv.enqueue(UnitTests.ev("vector"));
                    }
                    check(tv.flush(5, TimeUnit.SECONDS), "%s: flush timed out", name);
                    tv.close();
                    List<String> sent = t.reqs.get(0).ids();
                    eq(sent.size(), size, name + ": events in the first request");
                    if ("deliver".equals(action)) {
                        eq(t.reqs.size(), 1, name + ": requests");
                        eq(d.all.size(), 0, name + ": drops");
                    } else if ("retry".equals(action)) {
                        eq(t.reqs.size(), 2, name + ": requests");
                        eq(t.reqs.get(1).key, t.reqs.get(0).key, name + ": Idempotency-Key of the retry");
                        eq(t.reqs.get(1).ids(), sent, name + ": event ids of the retry");
                        eq(d.all.size(), 0, name + ": drops");
                        Object min = expect.get("min_wait_ms");
                        if (min != null) {
                            check(c.sleeps.get(0) >= ((Number) min).longValue(), "%s: waited %d ms, want at least %s", name, c.sleeps.get(0), min);
                        }
                    } else if ("drop".equals(action)) {
                        List<String> want = pick(sent, (List<Object>) expect.get("dropped"));
                        eq(d.ids(), want, name + ": dropped ids");
                        for (Drop dr : d.all) {
                            eq(dr.reason, Drop.REJECTED, name + ": drop reason");
                            eq(dr.status, ((Number) tc.get("status")).intValue(), name + ": drop status");
                        }
                        List<Object> resend = (List<Object>) expect.get("resend");
                        if (resend == null || resend.isEmpty()) {
                            eq(t.reqs.size(), 1, name + ": requests");
                        } else {
                            eq(t.reqs.size(), 2, name + ": requests");
                            eq(t.reqs.get(1).ids(), pick(sent, resend), name + ": resent ids");
                            check(!t.reqs.get(1).key.equals(t.reqs.get(0).key), "%s: the resend reuses the key of a different body", name);
                            eq(c.sleeps.size(), 0, name + ": waits before the resend");
                        }
                    } else {
                        throw new AssertionError(name + ": unknown action " + action);
                    }
                }
            }
        });

        test("Vectors/freerasp: the 18 names, the event shape", new Body() {
            @SuppressWarnings("unchecked")
            public void run() throws Exception {
                Map<String, Object> fr = (Map<String, Object>) vectors().get("freerasp");
                eq(new HashSet<Object>(FreeRaspAdapter.THREATS), new HashSet<Object>((List<Object>) fr.get("names")), "threat names");
                eq(FreeRaspAdapter.THREATS.size(), 18, "threat count");
                eq(FreeRaspAdapter.EVENT_TYPE, fr.get("event_type"), "event type");
                FakeClock c = new FakeClock();
                FakeTransport t = new FakeTransport();
                Drops d = new Drops();
                ThreatView tv = builder(c, t, d).flushAt(500).build();
                Map<String, Object> base = new LinkedHashMap<String, Object>();
                base.put("device", Collections.singletonMap("model", "Pixel 8"));
                FreeRaspAdapter a = new FreeRaspAdapter(tv, base);
                // Every callback method by name, as freeRASP's listener would call it.
                List<String> callbacks = new ArrayList<String>();
                for (java.lang.reflect.Method m : FreeRaspAdapter.class.getDeclaredMethods()) {
                    if (m.getName().startsWith("on") && java.lang.reflect.Modifier.isPublic(m.getModifiers())) {
                        callbacks.add(m.getName());
                    }
                }
                Collections.sort(callbacks);
                eq(callbacks.size(), 17, "Android callbacks (DeviceID is iOS only)");
                for (String cb : callbacks) {
                    java.lang.reflect.Method m = FreeRaspAdapter.class.getMethod(cb, cb.equals("onMalwareDetected") ? new Class<?>[] {List.class} : new Class<?>[0]);
                    m.invoke(a, cb.equals("onMalwareDetected") ? new Object[] {java.util.Arrays.asList("x", "y")} : new Object[0]);
                }
                a.report("DeviceID");
                check(tv.flush(5, TimeUnit.SECONDS), "flush timed out");
                tv.close();
                List<Map<String, Object>> evs = t.reqs.get(0).events;
                eq(evs.size(), 18, "events");
                Map<String, Object> example = (Map<String, Object>) ((Map<String, Object>) fr.get("example")).get("event");
                for (int i = 0; i < 17; i++) {
                    Map<String, Object> e = evs.get(i);
                    String want = FreeRaspAdapter.threatFor(callbacks.get(i));
                    eq(e.get("threats"), Collections.singletonList(want), callbacks.get(i) + ": threats");
                    eq(e.get("type"), example.get("type"), callbacks.get(i) + ": type");
                    eq(((Map<?, ?>) e.get("attributes")).get("source"), "freerasp", callbacks.get(i) + ": attributes.source");
                    eq(e.get("device"), Collections.singletonMap("model", "Pixel 8"), callbacks.get(i) + ": device");
                }
                eq(FreeRaspAdapter.threatFor("onRootDetected"), "PrivilegedAccess", "onRootDetected");
                eq(FreeRaspAdapter.threatFor("onHookDetected"), "Hooks", "onHookDetected");
                eq(FreeRaspAdapter.threatFor("onUnlockedDeviceDetected"), "Passcode", "onUnlockedDeviceDetected");
                eq(evs.get(17).get("threats"), Collections.singletonList("DeviceID"), "report(DeviceID)");
                eq(d.all.size(), 0, "drops");
            }
        });
    }

    static List<String> pick(List<String> ids, List<Object> positions) {
        List<String> out = new ArrayList<String>();
        for (Object p : positions) {
            out.add(ids.get(((Number) p).intValue()));
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    static Transport.Response scripted(Map<String, Object> tc) throws IOException {
        Object net = tc.get("network");
        if ("reset".equals(net)) {
            throw new SocketException("Connection reset");
        }
        if ("refused".equals(net)) {
            throw new ConnectException("Connection refused");
        }
        String retryAfter = null;
        Map<String, Object> h = (Map<String, Object>) tc.get("headers");
        if (h != null) {
            for (Map.Entry<String, Object> e : h.entrySet()) {
                if (e.getKey().equalsIgnoreCase("Retry-After")) {
                    retryAfter = (String) e.getValue();
                }
            }
        }
        Object body = tc.get("body");
        String text = body == null ? "" : body instanceof String ? (String) body : Json.toJson(body);
        return new Transport.Response(((Number) tc.get("status")).intValue(), retryAfter, text);
    }
}
