// Threat View's client for JavaScript runtimes (React Native, Capacitor,
// browsers, Node). enqueue() returns at once; a bounded queue (in memory or
// in a Storage) feeds one sender that batches, gzips and retries each batch
// until the collector accepts it or definitely refuses it.
import { memoryStorage, type Storage } from "./storage.js";
import { uuidv7 } from "./uuid.js";

export * from "./storage.js";
export * from "./freerasp.js";
export { uuidv7 } from "./uuid.js";

/** Threat is a threat seen, in its object form (a bare string is the other form). */
export interface Threat {
  type: string;
  [key: string]: unknown;
}

/**
 * Event is one event as the collector's contract defines it. `event_id` is
 * set by enqueue when absent; `occurred_at` defaults to the time of
 * enqueue; `sent_at` is added at every attempt (the collector corrects the
 * device's clock skew with it). `session`, `user`, `device.language` and
 * `location` are passed through: send them only to a collector that takes
 * them (it pseudonymises the user id and coarsens the location).
 */
export interface Event {
  type: string;
  event_id?: string;
  occurred_at?: string | Date;
  app?: { id: string; version?: string };
  device?: {
    id?: string;
    model?: string;
    manufacturer?: string;
    os?: string;
    os_version?: string;
    language?: string;
  };
  threats?: Array<string | Threat>;
  attributes?: Record<string, unknown>;
  session?: { id: string };
  user?: { id: string };
  location?: { lat: number; lon: number; accuracy_m?: number };
}

/** DropReason says why events were given up. */
export type DropReason =
  | "rejected" // the collector refused them with a 4xx other than 408/429: never retried
  | "queue_full" // the queue's count or byte cap: the oldest queued events go first
  | "expired" // queued longer than maxAgeMs
  | "invalid" // not an event (no type or app.id, not serialisable, over 32 KiB), or an unreadable stored line
  | "opted_out" // the queue was dropped by optOut(), or enqueued while opted out
  | "retries_exhausted" // maxAttempts failed attempts
  | "closed"; // shutdown() ended before delivery and the storage is not durable

/** Drop reports events the client gave up on. */
export interface Drop {
  reason: DropReason;
  count: number;
  /** The event ids (empty for events that never got one). */
  eventIds: string[];
  /** The collector's answer, for "rejected" (and the last one for "retries_exhausted"). */
  status?: number;
  code?: string;
  message?: string;
}

/** Clock is the time the client runs on (tests pass a fake one). */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Config configures a ThreatView client; only endpoint and token are required. */
export interface Config {
  /** The collector's base URL, e.g. `https://collector.example.com`; events go to `/v1/events`. */
  endpoint: string;
  /** The app's token (Authorization: Bearer). */
  token: string;
  /** app.id (the token's app) and version, set on events that have no app. */
  app?: { id: string; version?: string };
  /** Device fields set on events where they are absent. */
  device?: Event["device"];
  /** A session id for this run, set on events without one; `true` makes a new one (a UUIDv7). */
  sessionId?: string | boolean;
  /** Where queued events wait: memoryStorage() (default), fileStorage(dir), asyncStorage(...), preferencesStorage(...). */
  storage?: Storage;
  /** Keys in storage start with this (default "threatview"). */
  storageKey?: string;
  /** Send when this many events are queued (default 100, at most 500). */
  flushAt?: number;
  /** How many requests may be in flight at once (default 2, at most 8). */
  concurrency?: number;
  /** The most events one request carries (default and at most 500, the collector's limit). */
  maxBatchEvents?: number;
  /** Send what is queued at least this often (default 5,000 ms). */
  flushIntervalMs?: number;
  /** Caps of the queue: events (default 10,000), bytes of JSON (default 5 MiB), age (default 7 days). */
  maxEvents?: number;
  maxBytes?: number;
  maxAgeMs?: number;
  /** Write newly queued events to storage at most this often (default 250 ms; 1,000 events write at once). */
  persistIntervalMs?: number;
  /** Backoff between failed attempts: from minBackoffMs (200) doubling to maxBackoffMs (30,000). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Give a batch up after this many failed attempts (default 0: never). */
  maxAttempts?: number;
  /** Abort a request after this long (default 30,000 ms). */
  timeoutMs?: number;
  /** Start opted out (default false); optOut()/optIn() change it and the choice is stored. */
  optedOut?: boolean;
  /**
   * How request bodies are gzipped: by default CompressionStream where the
   * platform has it (browsers, Node 18+), else bodies go plain. Pass a
   * function (e.g. pako's gzip, or zlibGzip from "@threatview/sdk/node"), or
   * false to send plain.
   */
  compress?: ((data: Uint8Array) => Promise<Uint8Array> | Uint8Array) | false;
  /** Called with every drop; must not throw (what it throws is ignored). */
  onDrop?: (drop: Drop) => void;
  /** The fetch to use (default globalThis.fetch): pin certificates or proxy here. */
  fetch?: typeof fetch;
  /** For tests: the clock and the random source of jitter. */
  clock?: Clock;
  random?: () => number;
}

/** Stats are the client's counters since it was made. */
export interface Stats {
  queued: number; // events taken by enqueue
  delivered: number; // events the collector accepted
  dropped: number; // events reported to onDrop
  requests: number; // requests sent, retries included
  retries: number; // requests failed and retried (408, 429, 5xx, network)
  throttled: number; // 429 answers
  pending: number; // queued and not yet delivered or dropped
  bytes: number; // bytes of JSON of the pending events
  storageErrors: number; // storage calls that failed (the events stay in memory)
  lastError: string;
}

// Limits of the collector's contract; batches keep under them.
const maxBatchEvents = 500;
const maxEventBytes = 32 << 10;
const maxRequestBytes = (1 << 20) - (16 << 10);
// What `"sent_at":"<ISO time>",` adds to an event.
const sentAtRoom = '"sent_at":"2026-01-02T15:04:05.000Z",'.length;
// The largest value the queue writes to storage (AsyncStorage on Android
// refuses rows over 2 MB).
const maxSegmentBytes = 256 << 10;
const persistAtOnce = 1000;

const uuidRE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

// Entry is one queued event: its JSON (event_id first), when it was queued.
interface Entry {
  id: string;
  json: string;
  bytes: number;
  t: number;
  seq: number;
  seg: Segment | null;
}

// Segment is a group of entries written to storage under one key; the key
// goes when its last entry is resolved.
interface Segment {
  key: string;
  live: number;
}

// Batch is a request's events, its Idempotency-Key (the same on every
// retry) and its failed attempts so far.
interface Batch {
  entries: Entry[];
  key: string;
  attempt: number;
}

// Outcome is what one attempt came to.
type Outcome =
  | { kind: "deliver" }
  | { kind: "retry"; afterMs: number; status: number; message: string; throttled: boolean }
  | { kind: "drop"; index: number; status: number; code: string; message: string };

const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** utf8Length is the UTF-8 size of s (lone surrogates count 3, as TextEncoder writes them). */
export function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 2; // a pair: 4 bytes for 2 code units
      i++;
    } else n += 2;
  }
  return n;
}

/**
 * retryAfterMs reads a Retry-After header: seconds, or an HTTP date; -1
 * when there is none or it cannot be read.
 */
export function retryAfterMs(v: string | null, now: number): number {
  if (!v) return -1;
  const s = v.trim();
  if (/^\d+$/.test(s)) return Number(s) * 1000;
  const t = Date.parse(s);
  return Number.isNaN(t) ? -1 : Math.max(0, t - now);
}

/**
 * classify turns an answer into what to do with the batch (the wire
 * vectors' `answers`): 2xx delivered; 408, 429, 5xx retried, never sooner
 * than Retry-After; 403, 413 or 422 naming one event of the batch drop
 * that event alone; any other 4xx drops the batch.
 */
export function classify(status: number, retryAfter: number, body: string, batchSize: number): Outcome {
  if (status >= 200 && status < 300) return { kind: "deliver" };
  let code = "";
  let message = "";
  let index = -1;
  try {
    const e = JSON.parse(body)?.error;
    if (e && typeof e === "object") {
      code = typeof e.code === "string" ? e.code : "";
      message = typeof e.message === "string" ? e.message : "";
      const i = e.details?.index;
      if (Number.isInteger(i) && i >= 0 && i < batchSize) index = i;
    }
  } catch {
    // Not our JSON: a proxy's page. The status decides.
  }
  if (status === 408 || status === 429 || status >= 500 || status < 400) {
    return { kind: "retry", afterMs: retryAfter, status, message: message || `HTTP ${status}`, throttled: status === 429 };
  }
  if (status !== 403 && status !== 413 && status !== 422) index = -1;
  return { kind: "drop", index, status, code, message };
}

function defaultCompress(): ((d: Uint8Array) => Promise<Uint8Array>) | undefined {
  const CS = (globalThis as { CompressionStream?: typeof CompressionStream }).CompressionStream;
  if (typeof CS !== "function") return undefined;
  return async (data) => {
    const cs = new CS("gzip");
    const w = cs.writable.getWriter();
    void w.write(data).catch(() => undefined);
    void w.close().catch(() => undefined);
    const r = cs.readable.getReader();
    const parts: Uint8Array[] = [];
    let n = 0;
    for (;;) {
      const { done, value } = await r.read();
      if (done) break;
      parts.push(value);
      n += value.length;
    }
    const out = new Uint8Array(n);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  };
}

/**
 * ThreatView is the client. Make one per app run:
 *
 *     const tv = new ThreatView({ endpoint, token, app: { id: "my-app" } });
 *     tv.enqueue({ type: "app.startup", threats: ["Hooks"] });
 *     await tv.flush();
 */
export class ThreatView {
  private readonly url: string;
  private readonly token: string;
  private readonly app?: { id: string; version?: string };
  private readonly device?: Event["device"];
  private readonly session?: string;
  private readonly storage: Storage;
  private readonly durable: boolean;
  private readonly prefix: string;
  private readonly flushAt: number;
  private readonly maxBatch: number;
  private readonly concurrency: number;
  private readonly flushIntervalMs: number;
  private readonly maxEvents: number;
  private readonly maxBytes: number;
  private readonly maxAgeMs: number;
  private readonly persistIntervalMs: number;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly maxAttempts: number;
  private readonly timeoutMs: number;
  private readonly compress?: (d: Uint8Array) => Promise<Uint8Array> | Uint8Array;
  private readonly onDrop?: (d: Drop) => void;
  private readonly fetchFn: typeof fetch;
  private readonly clock: Clock;
  private readonly random: () => number;

  // The queue: q[head:] in the order queued; the batches being sent are out of it.
  private q: Entry[] = [];
  private head = 0;
  private inflight: Batch[] = [];
  private workers = 0;
  private pendingBytes = 0;
  private seq = 0;
  private loaded = false;
  private optedOut: boolean;
  private closed = false;
  private force = false; // send what is queued without waiting for flushAt
  private intervalTimer: unknown = null;
  private persistTimer: unknown = null;
  private unpersisted = 0;
  private persistQueued = false;
  private sleepers = new Set<() => void>();
  private aborts = new Set<AbortController>();
  private storageChain: Promise<void> = Promise.resolve();
  private waiters: Array<{ seq: number; done: (ok: boolean) => void }> = [];
  private readonly counters = { queued: 0, delivered: 0, dropped: 0, requests: 0, retries: 0, throttled: 0, storageErrors: 0 };
  private lastError = "";

  constructor(cfg: Config) {
    this.url = String(cfg.endpoint ?? "").replace(/\/+$/, "") + "/v1/events";
    this.token = cfg.token;
    this.app = cfg.app;
    this.device = cfg.device;
    this.session = cfg.sessionId === true ? uuidv7() : typeof cfg.sessionId === "string" && cfg.sessionId ? cfg.sessionId : undefined;
    this.durable = cfg.storage !== undefined;
    this.storage = cfg.storage ?? memoryStorage();
    this.prefix = (cfg.storageKey ?? "threatview") + ".";
    this.flushAt = clamp(cfg.flushAt, 100, 1, maxBatchEvents);
    this.concurrency = clamp(cfg.concurrency, 2, 1, 8);
    this.maxBatch = clamp(cfg.maxBatchEvents, maxBatchEvents, 1, maxBatchEvents);
    this.flushIntervalMs = clamp(cfg.flushIntervalMs, 5000, 0, 24 * 3600e3);
    this.maxEvents = clamp(cfg.maxEvents, 10000, 1, Number.MAX_SAFE_INTEGER);
    this.maxBytes = clamp(cfg.maxBytes, 5 << 20, maxEventBytes, Number.MAX_SAFE_INTEGER);
    this.maxAgeMs = clamp(cfg.maxAgeMs, 7 * 24 * 3600e3, 1, Number.MAX_SAFE_INTEGER);
    this.persistIntervalMs = clamp(cfg.persistIntervalMs, 250, 0, 60e3);
    this.minBackoffMs = clamp(cfg.minBackoffMs, 200, 1, 3600e3);
    this.maxBackoffMs = clamp(cfg.maxBackoffMs, 30000, this.minBackoffMs, 24 * 3600e3);
    this.maxAttempts = clamp(cfg.maxAttempts, 0, 0, Number.MAX_SAFE_INTEGER);
    this.timeoutMs = clamp(cfg.timeoutMs, 30000, 1, 3600e3);
    this.compress = cfg.compress === false ? undefined : (cfg.compress ?? defaultCompress());
    this.onDrop = cfg.onDrop;
    this.fetchFn = cfg.fetch ?? ((...a: Parameters<typeof fetch>) => globalThis.fetch(...a));
    this.clock = cfg.clock ?? systemClock;
    this.random = cfg.random ?? Math.random;
    this.optedOut = cfg.optedOut === true;
    void this.load();
  }

  /**
   * enqueue queues one event and returns its event_id ("" when the event
   * was dropped at once, reported to onDrop). It never throws and never
   * waits: sending and storing happen later.
   */
  enqueue(event: Event): string {
    try {
      if (this.closed || this.optedOut) {
        this.report({ reason: this.closed ? "closed" : "opted_out", count: 1, eventIds: [] });
        return "";
      }
      const e = this.encode(event);
      if (!e) {
        this.report({ reason: "invalid", count: 1, eventIds: [] });
        return "";
      }
      this.q.push(e);
      this.pendingBytes += e.bytes;
      this.counters.queued++;
      this.enforceCaps(null);
      if (this.durable) {
        this.unpersisted++;
        this.schedulePersist();
      }
      this.schedule();
      return e.id;
    } catch (err) {
      this.lastError = String(err);
      return "";
    }
  }

  /**
   * flush sends everything queued so far and resolves true when all of it
   * is delivered or definitely refused (and reported), false when timeoutMs
   * passed first or the client was shut down with events left.
   */
  flush(timeoutMs?: number): Promise<boolean> {
    const target = this.seq;
    this.force = true;
    return new Promise<boolean>((resolve) => {
      let timer: unknown = null;
      const w = {
        seq: target,
        done: (ok: boolean) => {
          if (timer !== null) this.clock.clearTimeout(timer);
          resolve(ok);
        },
      };
      if (this.resolvedUpTo(target) || this.closed) return resolve(this.resolvedUpTo(target));
      this.waiters.push(w);
      if (timeoutMs !== undefined && timeoutMs >= 0) {
        timer = this.clock.setTimeout(() => {
          this.waiters = this.waiters.filter((x) => x !== w);
          resolve(false);
        }, timeoutMs);
      }
      this.pump();
    });
  }

  /**
   * shutdown stops taking events, flushes for at most timeoutMs (default
   * 10 s), and stops. With a durable storage what is left stays stored for
   * the next client; with memory storage it is reported as "closed".
   */
  async shutdown(timeoutMs = 10000): Promise<void> {
    if (this.closed) return;
    const ok = await this.flush(timeoutMs);
    this.closed = true;
    this.stopTimers();
    this.wakeAll();
    if (!ok) {
      if (this.durable) {
        this.persistNow();
      } else {
        const left = this.takeAll();
        this.resolve(left);
        if (left.length > 0) this.report({ reason: "closed", count: left.length, eventIds: left.map((e) => e.id) });
      }
    }
    await this.storageChain;
    this.notify(true);
  }

  /**
   * optOut stops sending, drops everything queued (reported as
   * "opted_out") and drops what is enqueued later, until optIn(). The
   * choice is kept in the storage.
   */
  optOut(): void {
    try {
      this.optedOut = true;
      this.wakeAll();
      const left = this.takeAll();
      this.resolve(left);
      if (left.length > 0) this.report({ reason: "opted_out", count: left.length, eventIds: left.map((e) => e.id) });
      this.stopTimers();
      this.store((s) => s.setItem(this.prefix + "optout", "1"));
      this.notify(true);
    } catch (err) {
      this.lastError = String(err);
    }
  }

  /** optIn undoes optOut: events enqueued from now on are sent. */
  optIn(): void {
    this.optedOut = false;
    this.store((s) => s.removeItem(this.prefix + "optout"));
  }

  /** isOptedOut reports the opt-out switch. */
  isOptedOut(): boolean {
    return this.optedOut;
  }

  /** stats returns the client's counters. */
  stats(): Stats {
    const pending = this.q.length - this.head + this.inflightCount();
    return { ...this.counters, pending, bytes: this.pendingBytes, lastError: this.lastError };
  }

  // encode makes the queued form of an event: its JSON with event_id
  // first (so a stored line names its id), app, device and session filled
  // in, occurred_at set; null when it is not an event the collector takes.
  private encode(event: Event): Entry | null {
    if (!event || typeof event !== "object" || typeof event.type !== "string" || event.type === "") return null;
    const now = this.clock.now();
    const id = typeof event.event_id === "string" && uuidRE.test(event.event_id) ? event.event_id.toLowerCase() : uuidv7(now);
    const o: Record<string, unknown> = { event_id: id };
    for (const k in event) {
      if (k !== "event_id" && k !== "sent_at") o[k] = (event as unknown as Record<string, unknown>)[k];
    }
    const app = event.app ?? this.app;
    if (!app || typeof app.id !== "string" || app.id === "") return null;
    o.app = app;
    if (this.device) o.device = event.device ? { ...this.device, ...event.device } : this.device;
    if (this.session && !event.session) o.session = { id: this.session };
    const at = event.occurred_at;
    o.occurred_at = at instanceof Date ? at.toISOString() : typeof at === "string" ? at : new Date(now).toISOString();
    let json: string;
    try {
      json = JSON.stringify(o);
    } catch {
      return null; // a cycle, a BigInt
    }
    if (typeof json !== "string") return null;
    const bytes = utf8Length(json);
    if (bytes + sentAtRoom > maxEventBytes) return null;
    return { id, json, bytes, t: now, seq: ++this.seq, seg: null };
  }

  // enforceCaps drops the oldest queued events (not the batch in flight)
  // until the queue is within its caps.
  private enforceCaps(reason: DropReason | null): void {
    let n = this.q.length - this.head + this.inflightCount();
    const gone: Entry[] = [];
    while ((n > this.maxEvents || this.pendingBytes > this.maxBytes) && this.head < this.q.length) {
      const e = this.q[this.head++];
      this.pendingBytes -= e.bytes;
      n--;
      gone.push(e);
    }
    this.compact();
    if (gone.length > 0) {
      this.resolve(gone, false);
      this.report({ reason: reason ?? "queue_full", count: gone.length, eventIds: gone.map((e) => e.id) });
    }
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.q.length) {
      this.q = this.q.slice(this.head);
      this.head = 0;
    }
  }

  // schedule starts sending when enough is queued, else makes sure the
  // interval will.
  private schedule(): void {
    if (this.optedOut || this.closed) return;
    if (this.due()) {
      this.pump();
      return;
    }
    if (this.intervalTimer === null && this.q.length > this.head) {
      this.intervalTimer = this.clock.setTimeout(() => {
        this.intervalTimer = null;
        this.force = true;
        this.pump();
      }, this.flushIntervalMs);
    }
  }

  private due(): boolean {
    const n = this.q.length - this.head;
    return n > 0 && (this.force || n >= this.flushAt);
  }

  // pump starts senders, up to concurrency, while batches are due.
  private pump(): void {
    while (this.workers < this.concurrency && this.loaded && !this.optedOut && !this.closed && this.due()) {
      this.workers++;
      void this.run().finally(() => {
        this.workers--;
        if (this.q.length === this.head && this.inflight.length === 0) this.force = false;
        this.notify(false);
        if (!this.closed) this.schedule();
      });
    }
  }

  // run is one sender: it sends batches while there is something due.
  private async run(): Promise<void> {
    let b: Batch | null = null;
    for (;;) {
      if (this.optedOut || this.closed) return;
      if (!b) {
        if (!this.due()) return;
        const entries = this.take();
        if (!entries) continue;
        b = { entries, key: "tv-" + uuidv7(this.clock.now()), attempt: 0 };
        this.inflight.push(b);
      }
      const batch = b.entries;
      const out = await this.send(b);
      if (!this.inflight.includes(b) || this.closed) return; // opted out or shut down meanwhile
      b.attempt++;
      if (out.kind === "deliver") {
        this.settle(b);
        b = null;
        this.counters.delivered += batch.length;
        this.resolve(batch);
      } else if (out.kind === "drop") {
        const gone = out.index >= 0 ? [batch[out.index]] : batch;
        const rest = out.index >= 0 ? batch.filter((_, i) => i !== out.index) : [];
        this.resolve(gone);
        this.report({ reason: "rejected", count: gone.length, eventIds: gone.map((e) => e.id), status: out.status, code: out.code, message: out.message });
        if (rest.length > 0) {
          b.entries = rest;
          b.key = "tv-" + uuidv7(this.clock.now()); // a new request: its own key
          b.attempt = 0;
        } else {
          this.settle(b);
          b = null;
        }
      } else {
        this.lastError = out.message;
        if (out.throttled) this.counters.throttled++;
        if (this.maxAttempts > 0 && b.attempt >= this.maxAttempts) {
          this.settle(b);
          b = null;
          this.resolve(batch);
          this.report({ reason: "retries_exhausted", count: batch.length, eventIds: batch.map((e) => e.id), status: out.status, message: out.message });
        } else {
          this.counters.retries++;
          await this.sleep(this.backoff(b.attempt, out.afterMs));
        }
      }
      this.notify(false);
    }
  }

  private settle(b: Batch): void {
    this.inflight = this.inflight.filter((x) => x !== b);
  }

  private inflightCount(): number {
    let n = 0;
    for (const b of this.inflight) n += b.entries.length;
    return n;
  }

  private wakeAll(): void {
    for (const ac of this.aborts) ac.abort();
    for (const wake of [...this.sleepers]) wake();
  }

  // backoff is the wait before the next attempt: exponential, jittered
  // between half and all of it, and never shorter than Retry-After (plus
  // up to 10 %).
  private backoff(attempt: number, retryAfter: number): number {
    const exp = Math.min(this.maxBackoffMs, this.minBackoffMs * 2 ** Math.min(30, attempt - 1));
    let wait = exp / 2 + (this.random() * exp) / 2;
    if (retryAfter >= 0) wait = Math.max(wait, retryAfter * (1 + this.random() * 0.1));
    return Math.ceil(wait);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        if (this.sleepers.delete(wake)) this.clock.clearTimeout(timer);
        resolve();
      };
      const timer = this.clock.setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }

  // take cuts the next batch from the queue's head, dropping expired
  // events on the way: at most maxBatchEvents and under 1 MiB with sent_at.
  private take(): Entry[] | null {
    const now = this.clock.now();
    const out: Entry[] = [];
    const expired: Entry[] = [];
    let size = '{"events":[]}'.length;
    while (this.head < this.q.length && out.length < this.maxBatch) {
      const e = this.q[this.head];
      if (now - e.t > this.maxAgeMs) {
        expired.push(e);
        this.head++;
        this.pendingBytes -= e.bytes;
        continue;
      }
      const add = e.bytes + sentAtRoom + 1;
      if (out.length > 0 && size + add > maxRequestBytes) break;
      size += add;
      out.push(e);
      this.head++;
    }
    this.compact();
    if (expired.length > 0) {
      this.resolve(expired, false);
      this.report({ reason: "expired", count: expired.length, eventIds: expired.map((e) => e.id) });
    }
    return out.length > 0 ? out : null;
  }

  private takeAll(): Entry[] {
    const left = this.inflight.flatMap((b) => b.entries).concat(this.q.slice(this.head));
    this.inflight = [];
    this.q = [];
    this.head = 0;
    return left;
  }

  // send makes one attempt at a batch.
  private async send(b: Batch): Promise<Outcome> {
    const batch = b.entries;
    const sentAt = '{"sent_at":"' + new Date(this.clock.now()).toISOString() + '",';
    let text = '{"events":[';
    for (let i = 0; i < batch.length; i++) {
      if (i > 0) text += ",";
      text += sentAt + batch[i].json.slice(1);
    }
    text += "]}";
    const headers: Record<string, string> = {
      "Content-Type": "application/json",
      Authorization: "Bearer " + this.token,
      "Idempotency-Key": b.key,
    };
    let body: string | Uint8Array = text;
    if (this.compress && typeof TextEncoder === "function") {
      try {
        body = await this.compress(new TextEncoder().encode(text));
        headers["Content-Encoding"] = "gzip";
      } catch {
        body = text; // a platform whose gzip fails sends plain
      }
    }
    this.counters.requests++;
    const ac = typeof AbortController === "function" ? new AbortController() : null;
    if (ac) this.aborts.add(ac);
    const timer = this.clock.setTimeout(() => ac?.abort(), this.timeoutMs);
    try {
      const res = await this.fetchFn(this.url, { method: "POST", headers, body: body as BodyInit, signal: ac?.signal });
      const answer = await res.text().catch(() => "");
      return classify(res.status, retryAfterMs(res.headers.get("Retry-After"), this.clock.now()), answer, batch.length);
    } catch (err) {
      return { kind: "retry", afterMs: -1, status: 0, message: "network: " + String((err as Error)?.message ?? err), throttled: false };
    } finally {
      this.clock.clearTimeout(timer);
      if (ac) this.aborts.delete(ac);
    }
  }

  // resolve ends events (delivered or dropped): their bytes leave the
  // count, and a stored segment goes with its last event.
  private resolve(entries: Entry[], countBytes = true): void {
    for (const e of entries) {
      if (countBytes) this.pendingBytes -= e.bytes;
      const s = e.seg;
      if (s && --s.live === 0) this.store((st) => st.removeItem(s.key));
      e.seg = null;
    }
  }

  private report(d: Drop): void {
    this.counters.dropped += d.count;
    if (!this.onDrop) return;
    try {
      this.onDrop(d);
    } catch {
      // onDrop must not break the client.
    }
  }

  private resolvedUpTo(seq: number): boolean {
    if (!this.loaded && !this.optedOut && !this.closed) return false;
    for (const b of this.inflight) if (b.entries[0].seq <= seq) return false;
    return this.head === this.q.length || this.q[this.head].seq > seq;
  }

  // notify resolves the flushes that are done (all of them when final).
  private notify(final: boolean): void {
    if (this.waiters.length === 0) return;
    const keep: typeof this.waiters = [];
    for (const w of this.waiters) {
      if (this.resolvedUpTo(w.seq) || this.optedOut) w.done(true);
      else if (final) w.done(false);
      else keep.push(w);
    }
    this.waiters = keep;
  }

  private stopTimers(): void {
    if (this.intervalTimer !== null) this.clock.clearTimeout(this.intervalTimer);
    if (this.persistTimer !== null) this.clock.clearTimeout(this.persistTimer);
    this.intervalTimer = this.persistTimer = null;
  }

  // store runs storage calls one after another; a failure is counted and
  // the events stay in memory.
  private store(op: (s: Storage) => Promise<unknown>): void {
    this.storageChain = this.storageChain.then(
      () =>
        op(this.storage).then(
          () => undefined,
          (err) => {
            this.counters.storageErrors++;
            this.lastError = "storage: " + String(err);
          },
        ),
      () => undefined,
    );
  }

  private schedulePersist(): void {
    if (this.unpersisted >= persistAtOnce) {
      this.persistNow();
      return;
    }
    if (this.persistTimer === null) {
      this.persistTimer = this.clock.setTimeout(() => {
        this.persistTimer = null;
        this.persistNow();
      }, this.persistIntervalMs);
    }
  }

  // persistNow has the queued events not yet stored (the queue's tail)
  // written at the storage's next turn. What is written is decided then,
  // so a burst of enqueues costs one write of what is still queued, and
  // nothing is held for events dropped meanwhile.
  private persistNow(): void {
    if (this.persistTimer !== null) {
      this.clock.clearTimeout(this.persistTimer);
      this.persistTimer = null;
    }
    this.unpersisted = 0;
    if (this.persistQueued) return;
    this.persistQueued = true;
    this.store(async (s) => {
      this.persistQueued = false;
      await this.writeTail(s);
    });
  }

  // writeTail writes the events not yet stored (the batch in flight may
  // hold some, the queue's tail the others) in segments of at most 256 KiB.
  // Segments are cut before the first await: the queue moves meanwhile.
  private async writeTail(s: Storage): Promise<void> {
    // A batch's events get segments of their own, so the events dropped
    // from the queue's head meanwhile do not keep them.
    const groups = this.inflight.map((b) => b.entries.filter((e) => e.seg === null));
    let from = this.q.length;
    while (from > this.head && this.q[from - 1].seg === null) from--;
    groups.push(this.q.slice(from));
    const segs: Array<{ seg: Segment; text: string }> = [];
    for (const todo of groups) {
      for (let i = 0; i < todo.length; ) {
        const seg: Segment = { key: this.prefix + "q." + uuidv7(this.clock.now()), live: 0 };
        let text = "";
        while (i < todo.length && (text === "" || text.length + todo[i].bytes < maxSegmentBytes)) {
          const e = todo[i++];
          e.seg = seg;
          seg.live++;
          text += e.t + " " + e.json + "\n";
        }
        segs.push({ seg, text });
      }
    }
    for (const { seg, text } of segs) {
      if (seg.live > 0) await s.setItem(seg.key, text);
    }
  }

  // load reads the opt-out switch and the events a previous client left in
  // the storage; they go first.
  private async load(): Promise<void> {
    try {
      const keys = await this.storage.getAllKeys();
      if (keys.includes(this.prefix + "optout")) this.optedOut = true;
      const segs = keys.filter((k) => k.startsWith(this.prefix + "q.")).sort();
      if (this.optedOut) {
        for (const k of segs) this.store((s) => s.removeItem(k));
      } else if (segs.length > 0) {
        const restored: Entry[] = [];
        let bad = 0;
        for (const key of segs) {
          const text = await this.storage.getItem(key);
          const seg: Segment = { key, live: 0 };
          for (const line of (text ?? "").split("\n")) {
            if (line === "") continue;
            const sp = line.indexOf(" ");
            const t = Number(line.slice(0, sp));
            const json = line.slice(sp + 1);
            const id = json.slice(13, 49);
            if (sp <= 0 || !Number.isFinite(t) || !json.startsWith('{"event_id":"') || !uuidRE.test(id)) {
              bad++; // a line cut short by a crash, or an edit
              continue;
            }
            seg.live++;
            restored.push({ id, json, bytes: utf8Length(json), t, seq: 0, seg });
          }
          if (seg.live === 0) this.store((s) => s.removeItem(key));
        }
        let s = -restored.length;
        for (const e of restored) {
          e.seq = s++;
          this.pendingBytes += e.bytes;
        }
        this.q = restored.concat(this.q.slice(this.head));
        this.head = 0;
        if (bad > 0) this.report({ reason: "invalid", count: bad, eventIds: [] });
        this.enforceCaps(null);
      }
    } catch (err) {
      this.counters.storageErrors++;
      this.lastError = "storage: " + String(err);
    }
    this.loaded = true;
    if (this.optedOut) {
      const left = this.takeAll();
      this.resolve(left);
      if (left.length > 0) this.report({ reason: "opted_out", count: left.length, eventIds: left.map((e) => e.id) });
    }
    this.notify(false);
    this.schedule();
  }
}

function clamp(v: number | undefined, def: number, min: number, max: number): number {
  if (typeof v !== "number" || !Number.isFinite(v)) return def;
  return Math.min(max, Math.max(min, Math.floor(v)));
}
