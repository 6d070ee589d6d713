import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { FREERASP_THREATS, freeRaspActions, freeRaspEvent, type FreeRaspEvent } from "../src/index.js";

const vectors = JSON.parse(readFileSync(new URL("../../../testdata/vectors.json", import.meta.url), "utf8"));

test("the adapter knows freeRASP's 18 names, verbatim", () => {
  assert.deepEqual([...FREERASP_THREATS], vectors.freerasp.names);
});

test("each of the 18 callbacks enqueues its threat event, and the app's own reaction still runs", () => {
  const got: FreeRaspEvent[] = [];
  let own = 0;
  const actions = freeRaspActions({ enqueue: (e) => got.push(e) }, { debug: () => own++ });
  const keys = Object.keys(actions);
  assert.equal(keys.length, 18);
  for (const k of keys) (actions as unknown as Record<string, () => void>)[k]();
  assert.equal(own, 1);
  assert.deepEqual(got.map((e) => e.threats[0]).sort(), [...vectors.freerasp.names].sort());
  for (const e of got) assert.equal(e.type, vectors.freerasp.event_type);
  // Callback names as freeRASP's React Native and Capacitor plugins spell them.
  for (const k of ["privilegedAccess", "adbEnabled", "systemVPN", "deviceID", "secureHardwareNotAvailable", "multiInstance"]) assert.ok(k in actions, k);
});

test("the example event of the vectors", () => {
  const ex = vectors.freerasp.example;
  assert.deepEqual(freeRaspEvent(ex.callback), ex.event);
});

test("Malware carries the suspicious apps' count and package names only", () => {
  const got: FreeRaspEvent[] = [];
  freeRaspActions({ enqueue: (e) => got.push(e) }).malware([
    { packageInfo: { packageName: "com.evil.one", appName: "Evil" } as never },
    { packageInfo: { packageName: "com.evil.two" } },
  ]);
  assert.deepEqual(got[0].attributes, { source: "freerasp", suspicious_apps: 2, packages: ["com.evil.one", "com.evil.two"] });
});
