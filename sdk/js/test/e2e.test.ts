// End-to-end against the running collector ($THREATVIEW_COLLECTOR_URL,
// $THREATVIEW_DEMO_TOKEN, $THREATVIEW_DEMO_APP), with the events database
// ($EVENTS_DATABASE_URL) read through psql. Without them the tests skip,
// unless THREATVIEW_REQUIRE_SERVICES=1 (make test), where that fails.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { ThreatView, type Drop } from "../src/index.js";

const vectors = JSON.parse(readFileSync(new URL("../../../testdata/vectors.json", import.meta.url), "utf8"));
const env = process.env;
const collector = env.THREATVIEW_COLLECTOR_URL ?? "";
const token = env.THREATVIEW_DEMO_TOKEN ?? "";
const app = env.THREATVIEW_DEMO_APP ?? "";
const db = env.EVENTS_DATABASE_URL ?? "";
const missing = !collector || !token || !app || !db;
const required = env.THREATVIEW_REQUIRE_SERVICES === "1";
const skip = missing && !required ? "the stack's addresses are not set (source .run/env)" : false;

test("the stack is there", { skip }, () => {
  assert.ok(!missing, "THREATVIEW_COLLECTOR_URL, THREATVIEW_DEMO_TOKEN, THREATVIEW_DEMO_APP and EVENTS_DATABASE_URL must be set");
});

// vectorBody builds a case's body as sdk/testdata/README.md says.
function vectorBody(c: Record<string, any>): string {
  let text: string;
  if (c.body_text !== undefined) text = c.body_text;
  else if (c.repeat) {
    const events = Array.from({ length: c.repeat.count }, (_, i) =>
      c.repeat.pad_index === i ? { ...c.repeat.event, attributes: { pad: "x".repeat(c.repeat.pad_bytes) } } : c.repeat.event,
    );
    text = JSON.stringify({ events });
  } else text = JSON.stringify(c.body);
  return text.split(JSON.stringify(vectors.app_placeholder)).join(JSON.stringify(app));
}

test("wire vectors: the collector answers every request as the vectors say", { skip: skip || missing }, async (t) => {
  const absent = new Set<string>();
  for (const c of vectors.requests) {
    await t.test(c.name, async (tt) => {
      if (absent.has(c.feature)) return tt.skip(`the collector does not have feature ${c.feature} yet`);
      const headers: Record<string, string> = { "Content-Type": "application/json", Authorization: "Bearer " + token };
      if (c.auth === "none") delete headers.Authorization;
      if (c.auth === "invalid") headers.Authorization = "Bearer tv_not_a_real_token_0000000000";
      Object.assign(headers, c.headers ?? {});
      let body: string | Uint8Array = vectorBody(c);
      if (c.gzip) {
        body = gzipSync(body);
        headers["Content-Encoding"] = "gzip";
      }
      const res = await fetch(collector + "/v1/events", { method: "POST", headers, body });
      const answer = await res.json().catch(() => null);
      const exp = c.expect;
      const d = answer?.error?.details;
      if (c.feature && exp.status === 202 && res.status === 422 && d?.field && !String(d.field).includes(".")) {
        absent.add(c.feature);
        return tt.skip(`the collector does not have feature ${c.feature} yet (${answer.error.message})`);
      }
      assert.equal(res.status, exp.status, `answer ${JSON.stringify(answer)?.slice(0, 300)}`);
      if (exp.status === 202) {
        assert.equal(answer.accepted, exp.accepted);
        for (const [i, id] of (exp.ids ?? []).entries()) assert.equal(answer.ids[i], id);
        return;
      }
      assert.equal(answer?.error?.code, exp.code);
      if (exp.field !== undefined) assert.equal(d?.field, exp.field);
      if (exp.index !== undefined) assert.equal(d?.index, exp.index);
      if ([429, 503].includes(res.status)) assert.ok(res.headers.get("Retry-After"));
    });
  }
});

// storedCounts returns how many rows each of ids has in events.events.
function storedCounts(ids: string[]): { rows: number; distinct: number } {
  const sql = `select count(*), count(distinct id) from events.events where app_id = '${app.replace(/'/g, "''")}' and id::text = any(string_to_array('${ids.join(",")}', ','))`;
  const out = execFileSync("psql", [db, "-Atc", sql], { encoding: "utf8" }).trim();
  const [rows, distinct] = out.split("|").map(Number);
  return { rows, distinct };
}

async function waitStored(ids: string[], timeoutMs = 60000): Promise<{ rows: number; distinct: number }> {
  const end = Date.now() + timeoutMs;
  let got = storedCounts(ids);
  while (got.distinct < ids.length && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 500));
    got = storedCounts(ids);
  }
  // The processor may still be writing a redelivered copy: look once more.
  await new Promise((r) => setTimeout(r, 1000));
  return storedCounts(ids);
}

// Proxy stands between the SDK and the collector and misbehaves on cue.
type Mode = "forward" | "503" | "drop-before" | "drop-after";
function proxy(plan: (n: number) => Mode) {
  const target = new URL(collector);
  const seen: Mode[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const mode = plan(seen.length);
    seen.push(mode);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (mode === "503") {
        res.writeHead(503, { "Content-Type": "application/json", "Retry-After": "1" });
        res.end(JSON.stringify({ error: { code: "unavailable", message: "the collector cannot make events durable right now; retry later" } }));
        return;
      }
      if (mode === "drop-before") {
        req.socket.destroy(); // the collector went away before it read the request
        return;
      }
      const up = httpRequest(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
        (ur) => {
          const body: Buffer[] = [];
          ur.on("data", (c: Buffer) => body.push(c));
          ur.on("end", () => {
            if (mode === "drop-after") {
              req.socket.destroy(); // accepted, but the answer is lost: the outcome is unknown to the SDK
              return;
            }
            res.writeHead(ur.statusCode ?? 502, ur.headers);
            res.end(Buffer.concat(body));
          });
        },
      );
      up.on("error", () => req.socket.destroy());
      up.end(Buffer.concat(chunks));
    });
  });
  return {
    seen,
    start: () => new Promise<string>((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`))),
    stop: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

test("exactly once across a 503 storm and dropped connections (a collector restart)", { skip: skip || missing, timeout: 180000 }, async () => {
  const started = Date.now();
  // 503 for the first 2 s; then requests 20-23 lose their connection
  // after the collector accepted them and 24-25 before it saw them.
  const p = proxy((n) => {
    if (Date.now() - started < 2000) return "503";
    const k = n - 20;
    if (k >= 0 && k < 4) return "drop-after";
    if (k >= 4 && k < 6) return "drop-before";
    return "forward";
  });
  const endpoint = await p.start();
  const drops: Drop[] = [];
  const tv = new ThreatView({
    endpoint, token, app: { id: app, version: "e2e" }, flushAt: 50, maxBatchEvents: 50, flushIntervalMs: 100,
    minBackoffMs: 50, maxBackoffMs: 400, onDrop: (d) => drops.push(d),
  });
  const ids: string[] = [];
  const n = 3000;
  for (let i = 0; i < n; i++) {
    ids.push(tv.enqueue({ type: "app.startup", device: { model: "sdk-js-e2e", os: "android", os_version: "14" }, threats: i % 7 === 0 ? ["Hooks"] : [], attributes: { i } }));
    if (i % 100 === 99) await new Promise((r) => setTimeout(r, 40)); // about 2,500 events/s, so the storm hits batches in flight
  }
  assert.equal(await tv.flush(120000), true, "flushed");
  await tv.shutdown();
  await p.stop();
  const st = tv.stats();
  const count = (m: Mode) => p.seen.filter((x) => x === m).length;
  console.log(`e2e: ${n} events, ${st.requests} requests (${count("503")} answered 503, ${count("drop-after")} dropped after the collector took them, ${count("drop-before")} before), ${st.retries} retried`);
  assert.deepEqual(drops, []);
  assert.equal(st.delivered, n);
  assert.ok(count("503") >= 1 && count("drop-after") === 4 && count("drop-before") === 2, `proxy modes ${p.seen.join(",")}`);
  const got = await waitStored(ids);
  assert.deepEqual(got, { rows: n, distinct: n }, "every event stored exactly once");
});

test("the investigation fields go through: a session id per run, language, a pseudonymised user and a coarsened location", { skip: skip || missing, timeout: 120000 }, async (t) => {
  // The collector takes these fields only once the investigation contract
  // has landed: ask it first.
  const probe = await fetch(collector + "/v1/events", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + token },
    body: JSON.stringify({ type: "app.startup", app: { id: app }, session: { id: "probe" } }),
  });
  if (probe.status === 422) return t.skip("the collector does not take session yet");
  assert.equal(probe.status, 202);
  const rawUser = "sdk-js-user-" + Date.now();
  const tv = new ThreatView({ endpoint: collector, token, app: { id: app }, sessionId: true, device: { language: "de-CH", model: "sdk-js-e2e" } });
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) ids.push(tv.enqueue({ type: "app.startup", user: { id: rawUser }, location: { lat: 47.3769, lon: 8.5417, accuracy_m: 25 } }));
  assert.equal(await tv.flush(60000), true);
  await tv.shutdown();
  assert.deepEqual(await waitStored(ids), { rows: 20, distinct: 20 });
  const sql = `select count(distinct session_id), min(session_id), count(*) filter (where language = 'de-CH'),
    count(*) filter (where user_pseudonym <> '' and position('${rawUser}' in user_pseudonym) = 0 and position('${rawUser}' in payload::text) = 0),
    count(*) filter (where abs(lat - 47.3769) > 0.0001 and position('47.3769' in payload::text) = 0)
    from events.events where app_id = '${app}' and id::text = any(string_to_array('${ids.join(",")}', ','))`;
  const [sessions, session, lang, pseud, coarse] = execFileSync("psql", [db, "-Atc", sql], { encoding: "utf8" }).trim().split("|");
  assert.equal(sessions, "1", "one session id for the run");
  assert.match(session, new RegExp(vectors.client.event_id_pattern), "the session id is the run's UUIDv7");
  assert.equal(lang, "20");
  assert.equal(pseud, "20", "the user id is stored only as a pseudonym");
  assert.equal(coarse, "20", "the location is stored coarsened");
});
