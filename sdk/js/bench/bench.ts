// Benchmarks of the TypeScript SDK (not part of make test):
//   enqueue cost with the file queue, delivery rate to the local collector,
//   and the size of the library's files gzipped.
// Run: . .run/env; cd sdk/js && npm run bench
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { ThreatView } from "../src/index.js";
import { fileStorage, zlibGzip } from "../src/node.js";

const cpu = () => {
  const c = process.cpuUsage();
  return c.user + c.system;
};
const event = (i: number) => ({ type: "app.startup", device: { model: "Pixel 8", manufacturer: "Google", os: "android", os_version: "14" }, threats: i % 7 === 0 ? ["Hooks"] : [], attributes: { i } });

async function enqueueCost(n: number) {
  const dir = mkdtempSync(join(tmpdir(), "tv-bench-"));
  const tv = new ThreatView({
    endpoint: "http://127.0.0.1:9", token: "t", app: { id: "demo-app" }, storage: fileStorage(dir),
    maxEvents: n, maxBytes: 1 << 30, flushIntervalMs: 3600e3, flushAt: 500,
    fetch: (() => new Promise(() => undefined)) as typeof fetch,
  });
  await new Promise((r) => setTimeout(r, 20));
  const c0 = cpu();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    tv.enqueue(event(i));
    if (i % 1000 === 999) await new Promise((r) => setImmediate(r)); // an app yields now and then
  }
  const tEnq = performance.now() - t0;
  const cEnq = cpu() - c0;
  await tv.shutdown(0); // writes what is not stored yet
  const cAll = cpu() - c0;
  const tAll = performance.now() - t0;
  rmSync(dir, { recursive: true, force: true });
  console.log(`enqueue, file queue, ${n} events: ${(cEnq / n).toFixed(2)} us CPU and ${((tEnq * 1000) / n).toFixed(2)} us wall an enqueue; with every event written to disk ${(cAll / n).toFixed(2)} us CPU, ${((tAll * 1000) / n).toFixed(2)} us wall an event`);
}

async function delivery(n: number) {
  const env = process.env;
  if (!env.THREATVIEW_COLLECTOR_URL || !env.THREATVIEW_DEMO_TOKEN) {
    console.log("delivery: skipped (source .run/env)");
    return;
  }
  let dropped = 0;
  const tv = new ThreatView({
    endpoint: env.THREATVIEW_COLLECTOR_URL, token: env.THREATVIEW_DEMO_TOKEN, app: { id: env.THREATVIEW_DEMO_APP ?? "demo-app", version: "bench" },
    maxEvents: n, maxBytes: 1 << 30, flushAt: 500, onDrop: (d) => (dropped += d.count),
    ...(process.env.BENCH_ZLIB === "1" ? { compress: zlibGzip } : {}),
    concurrency: Number(process.env.BENCH_CONCURRENCY ?? 2),
  });
  await new Promise((r) => setTimeout(r, 20));
  const c0 = cpu();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) tv.enqueue(event(i));
  const ok = await tv.flush(300000);
  const secs = (performance.now() - t0) / 1000;
  const c = cpu() - c0;
  const st = tv.stats();
  await tv.shutdown();
  console.log(`delivery to the local collector, ${n} events in batches of 500, gzip, concurrency ${process.env.BENCH_CONCURRENCY ?? 2}: ${ok ? "all delivered" : "NOT all delivered"} in ${secs.toFixed(2)} s = ${Math.round(n / secs)} events/s, ${st.requests} requests, ${st.retries} retried, ${dropped} dropped, SDK CPU ${(c / n).toFixed(2)} us an event`);
}

// ceiling sends to a local server that answers 202 at once: the client's
// own rate, with the server's CPU in the same process.
async function ceiling(n: number) {
  const srv = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(202, { "Content-Type": "application/json" });
      res.end('{"accepted":0,"ids":[]}');
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const endpoint = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  for (const run of ["warm-up", "measured"]) {
    const tv = new ThreatView({ endpoint, token: "t", app: { id: "demo-app" }, maxEvents: n, maxBytes: 1 << 30, flushAt: 500 });
    await new Promise((r) => setTimeout(r, 20));
    const c0 = cpu();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) tv.enqueue(event(i));
    const cEnq = cpu() - c0;
    await tv.flush();
    const secs = (performance.now() - t0) / 1000;
    const c = cpu() - c0;
    await tv.shutdown();
    if (run === "measured") console.log(`ceiling, a local server answering 202 at once, ${n} events, gzip: ${Math.round(n / secs)} events/s, ${(cEnq / n).toFixed(2)} us CPU an enqueue, ${(c / n).toFixed(2)} us CPU an event in all (client and server)`);
  }
  srv.close();
}

function footprint() {
  const dist = new URL("../../dist/", import.meta.url);
  const files = readdirSync(dist).filter((f) => f.endsWith(".js") && f !== "node.js");
  const all = files.map((f) => readFileSync(new URL(f, dist), "utf8")).join("\n");
  // Comments and indentation out: a rough minification (a real minifier only makes it smaller).
  const min = all.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "").replace(/^\s+/gm, "").replace(/\n+/g, "\n");
  console.log(`footprint, ${files.join(" ")}: ${all.length} B, ${gzipSync(all, { level: 9 }).length} B gzipped; comments and indentation stripped ${min.length} B, ${gzipSync(min, { level: 9 }).length} B gzipped`);
}

footprint();
await enqueueCost(20000); // warm-up: the JIT, not the SDK
await enqueueCost(Number(process.env.BENCH_ENQUEUE ?? 200000));
await ceiling(Number(process.env.BENCH_CEILING ?? 50000));
await delivery(Number(process.env.BENCH_DELIVERY ?? 20000));
process.exit(0);
