import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, readdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ThreatView } from "../src/index.js";
import { fileStorage } from "../src/node.js";
import { settle } from "./helpers.js";

const gc = (globalThis as { gc?: () => void }).gc;

test("1 M events flooded into a file queue capped at 10 MB: memory and disk stay bounded", { timeout: 120000 }, async () => {
  assert.ok(gc, "run with node --expose-gc");
  const dir = mkdtempSync(join(tmpdir(), "tv-flood-"));
  try {
    let dropped = 0;
    const cap = 10 << 20;
    // The collector is unreachable: nothing leaves the queue but the caps.
    const tv = new ThreatView({
      endpoint: "http://127.0.0.1:9",
      token: "t",
      app: { id: "demo-app" },
      storage: fileStorage(dir),
      maxEvents: 10_000_000,
      maxBytes: cap,
      flushAt: 500,
      flushIntervalMs: 3600e3,
      fetch: (() => new Promise(() => undefined)) as typeof fetch, // never answers
      onDrop: (d) => (dropped += d.count),
    });
    await settle();
    gc!();
    const before = process.memoryUsage().heapUsed;
    let peak = 0;
    const t0 = performance.now();
    for (let i = 0; i < 1_000_000; i++) {
      tv.enqueue({ type: "app.startup", device: { model: "Pixel 8", os: "android", os_version: "14" }, threats: ["Hooks"], attributes: { i } });
      if (i % 100_000 === 0) {
        await settle(); // let the storage write between bursts, as an app would
        peak = Math.max(peak, process.memoryUsage().heapUsed - before);
      }
    }
    const perEvent = ((performance.now() - t0) * 1000) / 1_000_000;
    await settle();
    gc!();
    const grown = process.memoryUsage().heapUsed - before;
    peak = Math.max(peak, grown);
    const st = tv.stats();
    await tv.shutdown(0).catch(() => undefined);
    let disk = 0;
    for (const f of readdirSync(dir)) disk += statSync(join(dir, f)).size;
    console.log(`flood: ${st.pending} events pending (${(st.bytes / 1048576).toFixed(1)} MiB), ${dropped} dropped, heap +${(grown / 1048576).toFixed(1)} MiB (peak sample +${(peak / 1048576).toFixed(1)} MiB), disk ${(disk / 1048576).toFixed(1)} MiB, ${perEvent.toFixed(2)} us an enqueue`);
    // The batch in flight (500 events) is kept beside the capped queue.
    assert.ok(st.bytes <= cap, `queue bytes ${st.bytes} > ${cap}`);
    assert.equal(st.queued, 1_000_000);
    assert.equal(st.pending + dropped, 1_000_000);
    // Unbounded, 1 M events would hold about 375 MB (JSON, ids, entries).
    assert.ok(grown < 5 * cap, `heap grew ${(grown / 1048576).toFixed(1)} MiB`);
    assert.ok(disk <= cap * 1.2, `stored ${disk} bytes`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
