// Test helpers: a fake clock the client's timers run on, and a scripted
// fake fetch that records every request.
import type { Clock } from "../src/index.js";

interface Timer {
  id: number;
  at: number;
  fn: () => void;
}

/** FakeClock runs timers only when advance() passes their time. */
export class FakeClock implements Clock {
  t = 1_800_000_000_000;
  private timers: Timer[] = [];
  private next = 1;
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.timers.push({ id, at: this.t + Math.max(0, ms), fn });
    return id;
  }
  clearTimeout(h: unknown): void {
    this.timers = this.timers.filter((x) => x.id !== h);
  }
  /** pending is how many timers wait. */
  pending(): number {
    return this.timers.length;
  }
  /** advance moves time by ms, running each due timer in order and letting promises settle after each. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await settle();
    for (;;) {
      this.timers.sort((a, b) => a.at - b.at || a.id - b.id);
      const tm = this.timers[0];
      if (!tm || tm.at > end) break;
      this.timers.shift();
      this.t = tm.at;
      tm.fn();
      await settle();
    }
    this.t = end;
    await settle();
  }
}

/** settle lets pending promise chains run (a few macrotask turns). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

/** Recorded is one request the fake fetch saw. */
export interface Recorded {
  at: number;
  headers: Record<string, string>;
  body: { events: Array<Record<string, unknown>> };
}

/** Answer is what the fake fetch answers (or "reset" to fail like a dropped connection). */
export type Answer = { status: number; headers?: Record<string, string>; body?: unknown } | "reset";

/** fakeFetch answers from script in order (the last answer repeats) and records each request. */
export function fakeFetch(clock: Clock, script: Answer[]): { fetch: typeof fetch; requests: Recorded[] } {
  const requests: Recorded[] = [];
  let i = 0;
  const f = async (_url: unknown, init?: RequestInit): Promise<Response> => {
    const headers = Object.fromEntries(Object.entries((init?.headers ?? {}) as Record<string, string>));
    requests.push({ at: clock.now(), headers, body: JSON.parse(String(init?.body)) });
    const a = script[Math.min(i++, script.length - 1)];
    if (a === "reset") throw new TypeError("fetch failed: socket hang up");
    const body = a.body === undefined ? "" : typeof a.body === "string" ? a.body : JSON.stringify(a.body);
    return new Response(a.status === 204 ? null : body, { status: a.status, headers: a.headers ?? {} });
  };
  return { fetch: f as typeof fetch, requests };
}

/** accepted is a 202 answer. */
export const accepted: Answer = { status: 202, body: { accepted: 1, ids: [] } };
