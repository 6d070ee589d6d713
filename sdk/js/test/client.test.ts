import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ThreatView, memoryStorage, asyncStorage, preferencesStorage, uuidv7, type Config, type Drop, type Storage } from "../src/index.js";
import { fileStorage } from "../src/node.js";
import { FakeClock, fakeFetch, accepted, settle, type Answer } from "./helpers.js";

const vectors = JSON.parse(readFileSync(new URL("../../../testdata/vectors.json", import.meta.url), "utf8"));

// client makes a client on a fake clock and a scripted collector.
function client(script: Answer[], over: Partial<Config> = {}) {
  const clock = new FakeClock();
  const ff = fakeFetch(clock, script);
  const drops: Drop[] = [];
  const tv = new ThreatView({
    endpoint: "http://collector.test",
    token: "t0ken",
    app: { id: "demo-app" },
    compress: false,
    fetch: ff.fetch,
    clock,
    random: () => 0.5,
    onDrop: (d) => drops.push(d),
    ...over,
  });
  return { tv, clock, requests: ff.requests, drops };
}

const ev = (n = 0) => ({ type: "app.startup", attributes: { n } });

test("enqueue returns an id at once and never throws", async () => {
  const { tv, clock, requests, drops } = client([accepted]);
  const id = tv.enqueue(ev());
  assert.match(id, new RegExp(vectors.client.event_id_pattern));
  assert.equal(tv.enqueue(null as never), "");
  assert.equal(tv.enqueue({ type: "" } as never), "");
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  assert.equal(tv.enqueue({ type: "x", attributes: cyclic }), "");
  assert.equal(tv.enqueue({ type: "x", attributes: { pad: "x".repeat(33000) } }), "");
  assert.equal(tv.enqueue({ type: "x", attributes: { big: 1n } as never }), "");
  assert.equal(drops.filter((d) => d.reason === "invalid").length, 5);
  assert.equal(requests.length, 0, "nothing is sent before flushAt or the interval");
  await clock.advance(5000);
  assert.equal(requests.length, 1);
  assert.equal(requests[0].body.events.length, 1);
  assert.equal(requests[0].body.events[0].event_id, id);
  await tv.shutdown();
});

test("flushAt sends without waiting for the interval; the interval sends the rest", async () => {
  const { tv, clock, requests } = client([accepted], { flushAt: 10, flushIntervalMs: 1000 });
  await settle();
  for (let i = 0; i < 9; i++) tv.enqueue(ev(i));
  await clock.advance(0);
  assert.equal(requests.length, 0);
  tv.enqueue(ev(9));
  await clock.advance(0);
  assert.deepEqual(requests.map((r) => r.body.events.length), [10]);
  for (let i = 0; i < 5; i++) tv.enqueue(ev(i));
  await clock.advance(999);
  assert.equal(requests.length, 1);
  await clock.advance(1);
  assert.deepEqual(requests.map((r) => r.body.events.length), [10, 5]);
  const ev0 = requests[0].body.events[0];
  assert.equal(typeof ev0.sent_at, "string");
  assert.deepEqual(ev0.app, { id: "demo-app" });
  assert.equal(requests[0].headers["Authorization"], "Bearer t0ken");
  assert.equal(requests[0].headers["Content-Type"], "application/json");
  await tv.shutdown();
});

test("queue caps: count, bytes and age drop the oldest, counted and reported", async (t) => {
  await t.test("count", async () => {
    const { tv, drops } = client([accepted], { maxEvents: 10, flushAt: 500, flushIntervalMs: 3600e3 });
    const ids = Array.from({ length: 15 }, (_, i) => tv.enqueue(ev(i)));
    assert.equal(tv.stats().pending, 10);
    const gone = drops.filter((d) => d.reason === "queue_full").flatMap((d) => d.eventIds);
    assert.deepEqual(gone, ids.slice(0, 5));
    assert.equal(tv.stats().dropped, 5);
    await tv.shutdown(0);
  });
  await t.test("bytes", async () => {
    const { tv, drops } = client([accepted], { maxBytes: 40000, flushAt: 500, flushIntervalMs: 3600e3 });
    for (let i = 0; i < 10; i++) tv.enqueue({ type: "x", attributes: { pad: "p".repeat(10000) } });
    assert.ok(tv.stats().bytes <= 40000, `bytes ${tv.stats().bytes}`);
    assert.equal(tv.stats().pending, 3);
    assert.equal(drops.reduce((n, d) => n + d.count, 0), 7);
    await tv.shutdown(0);
  });
  await t.test("age", async () => {
    const { tv, clock, requests, drops } = client([accepted], { maxAgeMs: 60000, flushIntervalMs: 3600e3 });
    const old = tv.enqueue(ev(1));
    await clock.advance(60001);
    const fresh = tv.enqueue(ev(2));
    assert.equal(await tv.flush(), true);
    assert.deepEqual(drops.map((d) => [d.reason, d.eventIds]), [["expired", [old]]]);
    assert.deepEqual(requests.flatMap((r) => r.body.events.map((e) => e.event_id)), [fresh]);
    await tv.shutdown();
  });
});

test("retries back off exponentially with jitter and keep the batch's Idempotency-Key and event ids", async () => {
  const down: Answer = { status: 503, body: { error: { code: "unavailable", message: "x" } } };
  const { tv, clock, requests } = client([down, down, down, "reset", accepted], { minBackoffMs: 200, maxBackoffMs: 1000 });
  tv.enqueue(ev(1));
  tv.enqueue(ev(2));
  const done = tv.flush();
  await clock.advance(10000);
  assert.equal(await done, true);
  assert.equal(requests.length, 5);
  // random() = 0.5: each wait is 3/4 of 200, 400, 800, 1000 (the cap).
  const gaps = requests.slice(1).map((r, i) => r.at - requests[i].at);
  assert.deepEqual(gaps, [150, 300, 600, 750]);
  const keys = new Set(requests.map((r) => r.headers["Idempotency-Key"]));
  assert.equal(keys.size, 1, `keys ${[...keys]}`);
  assert.match([...keys][0], new RegExp(vectors.client.idempotency_key_pattern));
  const ids = requests.map((r) => r.body.events.map((e) => e.event_id).join());
  assert.equal(new Set(ids).size, 1);
  assert.equal(tv.stats().retries, 4);
  assert.equal(tv.stats().delivered, 2);
  // The next batch gets its own key.
  tv.enqueue(ev(3));
  await tv.flush();
  await settle();
  assert.notEqual(requests[5].headers["Idempotency-Key"], requests[0].headers["Idempotency-Key"]);
  await tv.shutdown();
});

test("Retry-After is honoured: no attempt sooner", async () => {
  const limited: Answer = { status: 429, headers: { "Retry-After": "3" }, body: { error: { code: "rate_limited", message: "slow down" } } };
  const { tv, clock, requests } = client([limited, accepted], { minBackoffMs: 10 });
  tv.enqueue(ev());
  const done = tv.flush();
  await clock.advance(2999);
  assert.equal(requests.length, 1);
  await clock.advance(400);
  assert.equal(requests.length, 2);
  assert.ok(requests[1].at - requests[0].at >= 3000, `waited ${requests[1].at - requests[0].at} ms`);
  assert.ok(requests[1].at - requests[0].at <= 3300, `waited ${requests[1].at - requests[0].at} ms`);
  assert.equal(await done, true);
  assert.equal(tv.stats().throttled, 1);
  await tv.shutdown();
});

test("a definite 4xx is never retried; one named event is dropped alone", async (t) => {
  await t.test("401 drops the batch", async () => {
    const { tv, clock, requests, drops } = client([{ status: 401, body: { error: { code: "unauthorized", message: "invalid or revoked token" } } }]);
    tv.enqueue(ev(1));
    tv.enqueue(ev(2));
    assert.equal(await tv.flush(), true);
    await clock.advance(600000);
    assert.equal(requests.length, 1);
    assert.deepEqual(drops.map((d) => [d.reason, d.count, d.status, d.code]), [["rejected", 2, 401, "unauthorized"]]);
    await tv.shutdown();
  });
  await t.test("422 naming event 1", async () => {
    const bad: Answer = { status: 422, body: { error: { code: "invalid_event", message: "event 1: threats: must be an array", details: { index: 1, field: "threats" } } } };
    const { tv, requests, drops } = client([bad, accepted]);
    const ids = [tv.enqueue(ev(0)), tv.enqueue(ev(1)), tv.enqueue(ev(2))];
    assert.equal(await tv.flush(), true);
    assert.equal(requests.length, 2);
    assert.deepEqual(drops[0].eventIds, [ids[1]]);
    assert.deepEqual(requests[1].body.events.map((e) => e.event_id), [ids[0], ids[2]]);
    assert.notEqual(requests[1].headers["Idempotency-Key"], requests[0].headers["Idempotency-Key"]);
    await tv.shutdown();
  });
  await t.test("408 is retried", async () => {
    const { tv, clock, requests } = client([{ status: 408 }, accepted]);
    tv.enqueue(ev());
    const done = tv.flush();
    await clock.advance(1000);
    assert.equal(await done, true);
    assert.equal(requests.length, 2);
    await tv.shutdown();
  });
});

test("wire vectors: every answer leads to the action the vectors name", async (t) => {
  for (const c of vectors.answers) {
    await t.test(c.name, async () => {
      const answer: Answer = c.network ? "reset" : { status: c.status, headers: c.headers, body: c.body };
      const { tv, clock, requests, drops } = client([answer, accepted], { minBackoffMs: 100, maxBackoffMs: 100 });
      const ids: string[] = [];
      for (let i = 0; i < vectors.client.answer_batch_size; i++) ids.push(tv.enqueue(ev(i)));
      const done = tv.flush();
      await clock.advance(10000);
      assert.equal(await done, true);
      const exp = c.expect;
      const dropped = drops.flatMap((d) => d.eventIds);
      switch (exp.action) {
        case "deliver":
          assert.equal(requests.length, 1);
          assert.deepEqual(dropped, []);
          break;
        case "retry":
          assert.equal(requests.length, 2, "retried once");
          assert.deepEqual(requests[1].body.events.map((e) => e.event_id), ids);
          assert.equal(requests[1].headers["Idempotency-Key"], requests[0].headers["Idempotency-Key"]);
          if (exp.min_wait_ms) assert.ok(requests[1].at - requests[0].at >= exp.min_wait_ms, `waited ${requests[1].at - requests[0].at}`);
          assert.deepEqual(dropped, []);
          break;
        case "drop":
          assert.deepEqual(dropped, exp.dropped.map((i: number) => ids[i]));
          assert.deepEqual(drops.map((d) => d.reason), ["rejected"]);
          assert.equal(drops[0].status, c.status);
          if (exp.resend) {
            assert.equal(requests.length, 2);
            assert.deepEqual(requests[1].body.events.map((e) => e.event_id), exp.resend.map((i: number) => ids[i]));
          } else assert.equal(requests.length, 1);
          break;
        default:
          assert.fail(`unknown action ${exp.action}`);
      }
      await tv.shutdown();
    });
  }
});

test("opt-out stops sending, drops the queue, and is remembered by the storage", async () => {
  const storage = memoryStorage();
  const { tv, clock, requests, drops } = client([accepted], { storage, flushIntervalMs: 1000 });
  await settle();
  tv.enqueue(ev(1));
  tv.enqueue(ev(2));
  tv.optOut();
  assert.equal(tv.isOptedOut(), true);
  assert.equal(tv.enqueue(ev(3)), "");
  assert.equal(await tv.flush(), true);
  await clock.advance(10000);
  assert.equal(requests.length, 0);
  assert.deepEqual(drops.map((d) => [d.reason, d.count]), [["opted_out", 2], ["opted_out", 1]]);
  assert.equal(tv.stats().pending, 0);
  await tv.shutdown();
  const keys = await storage.getAllKeys();
  assert.deepEqual(keys.filter((k) => k.includes(".q.")), [], "no queued events kept");
  // A new client on the same storage starts opted out, and optIn() undoes it.
  const next = client([accepted], { storage });
  await settle();
  assert.equal(next.tv.isOptedOut(), true);
  assert.equal(next.tv.enqueue(ev(4)), "");
  next.tv.optIn();
  const id = next.tv.enqueue(ev(5));
  assert.equal(await next.tv.flush(), true);
  assert.deepEqual(next.requests.flatMap((r) => r.body.events.map((e) => e.event_id)), [id]);
  await next.tv.shutdown();
  assert.equal((await storage.getAllKeys()).includes("threatview.optout"), false);
});

test("a file queue keeps undelivered events across a restart, same ids, and removes them once delivered", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tv-queue-"));
  try {
    const down: Answer = { status: 503, headers: { "Retry-After": "1" } };
    const a = client([down], { storage: fileStorage(dir), persistIntervalMs: 10 });
    await settle();
    const ids = Array.from({ length: 30 }, (_, i) => a.tv.enqueue(ev(i)));
    await a.clock.advance(50);
    const closing = a.tv.shutdown(0);
    await a.clock.advance(1);
    await closing;
    assert.ok(readdirSync(dir).length > 0, "events stored");
    const b = client([accepted], { storage: fileStorage(dir) });
    assert.equal(await b.tv.flush(), true);
    const sent = b.requests.flatMap((r) => r.body.events.map((e) => e.event_id));
    assert.deepEqual(sent, ids);
    await b.tv.shutdown();
    assert.deepEqual(readdirSync(dir), [], "delivered events leave the storage");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a torn line in the storage is skipped and reported; the others are sent", async () => {
  const storage = memoryStorage();
  const good = '{"event_id":"' + uuidv7() + '","type":"app.startup","app":{"id":"demo-app"}}';
  await storage.setItem("threatview.q.0001", `1800000000000 ${good}\n1800000000000 {"event_id":"0189`);
  const { tv, requests, drops } = client([accepted], { storage });
  assert.equal(await tv.flush(), true);
  assert.equal(requests.length, 1);
  assert.equal(requests[0].body.events.length, 1);
  assert.deepEqual(drops.map((d) => [d.reason, d.count]), [["invalid", 1]]);
  await tv.shutdown();
});

test("shutdown with memory storage reports what it could not deliver as closed", async () => {
  const { tv, clock, drops } = client([{ status: 503 }]);
  tv.enqueue(ev(1));
  const closing = tv.shutdown(0);
  await clock.advance(1);
  await closing;
  assert.deepEqual(drops.map((d) => [d.reason, d.count]), [["closed", 1]]);
  assert.equal(tv.enqueue(ev(2)), "");
});

test("uuidv7 ids are time-ordered and unique, also within a millisecond", () => {
  const re = new RegExp(vectors.client.event_id_pattern);
  let prev = "";
  const seen = new Set<string>();
  for (let i = 0; i < 20000; i++) {
    const id = uuidv7(1_800_000_000_000 + Math.floor(i / 5000));
    assert.match(id, re);
    assert.ok(id > prev, `${id} after ${prev}`);
    seen.add(id);
    prev = id;
  }
  assert.equal(seen.size, 20000);
});

test("the session id and defaults are filled in; new fields pass through", async () => {
  const { tv, requests } = client([accepted], { sessionId: "s-1", device: { os: "android", model: "Pixel 8" } });
  tv.enqueue({ type: "app.startup", device: { language: "de-CH" }, user: { id: "u-1" }, location: { lat: 47.37, lon: 8.54, accuracy_m: 20 } });
  await tv.flush();
  const e = requests[0].body.events[0];
  assert.deepEqual(e.session, { id: "s-1" });
  assert.deepEqual(e.device, { os: "android", model: "Pixel 8", language: "de-CH" });
  assert.deepEqual(e.user, { id: "u-1" });
  assert.deepEqual(e.location, { lat: 47.37, lon: 8.54, accuracy_m: 20 });
  await tv.shutdown();
});

test("the batch in flight is stored too: a crash while sending loses nothing", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tv-queue-"));
  try {
    const clock = new FakeClock();
    const a = new ThreatView({
      endpoint: "http://collector.test", token: "t", app: { id: "demo-app" }, compress: false, clock,
      storage: fileStorage(dir), flushAt: 10, persistIntervalMs: 10,
      fetch: (() => new Promise(() => undefined)) as typeof fetch, // the request never ends: the process dies first
    });
    await settle();
    const ids = Array.from({ length: 30 }, (_, i) => a.enqueue(ev(i)));
    await clock.advance(50);
    await new Promise((r) => setTimeout(r, 300)); // the file writes finish
    // No shutdown: a crash. A new client on the same directory sends all 30.
    const b = client([accepted], { storage: fileStorage(dir) });
    assert.equal(await b.tv.flush(), true);
    assert.deepEqual(b.requests.flatMap((r) => r.body.events.map((e) => e.event_id)).sort(), [...ids].sort());
    await b.tv.shutdown();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("at most concurrency requests are in flight; flush waits for all of them", async () => {
  const clock = new FakeClock();
  const open: Array<() => void> = [];
  let most = 0;
  let sent = 0;
  const tv = new ThreatView({
    endpoint: "http://collector.test", token: "t", app: { id: "demo-app" }, compress: false, clock,
    flushAt: 10, maxBatchEvents: 10, concurrency: 2,
    fetch: (async () => {
      sent++;
      await new Promise<void>((r) => open.push(r));
      return new Response('{"accepted":10,"ids":[]}', { status: 202 });
    }) as typeof fetch,
  });
  await settle();
  for (let i = 0; i < 50; i++) tv.enqueue(ev(i));
  let done = false;
  void tv.flush().then(() => (done = true));
  for (let round = 0; round < 10 && !done; round++) {
    await settle();
    most = Math.max(most, open.length);
    open.splice(0).forEach((r) => r());
  }
  await settle();
  assert.equal(done, true);
  assert.equal(sent, 5);
  assert.equal(most, 2);
  assert.equal(tv.stats().delivered, 50);
  await tv.shutdown();
});

test("the React Native and Capacitor adapters keep the queue across a restart", async (t) => {
  const m = new Map<string, string>();
  // Fakes shaped as AsyncStorage's default export and Capacitor's Preferences.
  const rn = asyncStorage({
    getItem: async (k) => m.get(k) ?? null,
    setItem: async (k, v) => void m.set(k, v),
    removeItem: async (k) => void m.delete(k),
    getAllKeys: async () => [...m.keys()],
  });
  const cap = preferencesStorage({
    get: async ({ key }) => ({ value: m.get(key) ?? null }),
    set: async ({ key, value }) => void m.set(key, value),
    remove: async ({ key }) => void m.delete(key),
    keys: async () => ({ keys: [...m.keys()] }),
  });
  for (const [name, storage] of [["asyncStorage", rn], ["preferencesStorage", cap]] as Array<[string, Storage]>) {
    await t.test(name, async () => {
      m.clear();
      const a = client([{ status: 503 }], { storage, persistIntervalMs: 10 });
      await settle();
      const ids = [a.tv.enqueue(ev(1)), a.tv.enqueue(ev(2))];
      await a.clock.advance(20);
      const closing = a.tv.shutdown(0);
      await a.clock.advance(1);
      await closing;
      assert.ok([...m.keys()].some((k) => k.startsWith("threatview.q.")), "stored");
      const b = client([accepted], { storage });
      assert.equal(await b.tv.flush(), true);
      assert.deepEqual(b.requests.flatMap((r) => r.body.events.map((e) => e.event_id)), ids);
      await b.tv.shutdown();
      assert.deepEqual([...m.keys()], [], "delivered events leave the storage");
    });
  }
});
