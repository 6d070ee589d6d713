// UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then a 12-bit counter
// that keeps ids made in the same millisecond in order, then random bits.
// The collector and the processor treat the id as the event's identity, so
// it is made once, before the event is queued, and kept on every retry.

const HEX: string[] = [];
for (let i = 0; i < 256; i++) HEX.push((i < 16 ? "0" : "") + i.toString(16));

const POOL = 4096;
let pool = new Uint8Array(0);
let poolAt = POOL;

interface CryptoLike {
  getRandomValues(a: Uint8Array): Uint8Array;
}

function cryptoSource(): CryptoLike | undefined {
  const c = (globalThis as { crypto?: CryptoLike }).crypto;
  return c && typeof c.getRandomValues === "function" ? c : undefined;
}

// randomBytes refills a pool in one call: getRandomValues per id costs
// more than the rest of the id.
function randomBytes(n: number): Uint8Array {
  if (poolAt + n > POOL) {
    pool = new Uint8Array(POOL);
    const c = cryptoSource();
    if (c) {
      // getRandomValues takes at most 65,536 bytes a call.
      c.getRandomValues(pool);
    } else {
      // Hermes without react-native-get-random-values: ids stay unique
      // enough for deduplication (the time prefix carries most of it).
      for (let i = 0; i < POOL; i++) pool[i] = (Math.random() * 256) | 0;
    }
    poolAt = 0;
  }
  const out = pool.subarray(poolAt, poolAt + n);
  poolAt += n;
  return out;
}

let lastMs = -1;
let counter = 0;

/**
 * uuidv7 returns a new time-ordered UUID (version 7) in lower case. Ids made
 * by one process are strictly increasing, also within one millisecond and
 * when the clock steps back.
 */
export function uuidv7(nowMs: number = Date.now()): string {
  const r = randomBytes(10);
  let ms = Math.floor(nowMs);
  if (ms > lastMs) {
    lastMs = ms;
    counter = ((r[0] << 4) | (r[1] >> 4)) & 0x3ff; // start low: room to count up
  } else {
    ms = lastMs;
    counter++;
    if (counter > 0xfff) {
      lastMs = ++ms;
      counter = 0;
    }
  }
  const hi = Math.floor(ms / 0x1000000); // top 24 bits of 48
  const lo = ms % 0x1000000;
  return (
    HEX[(hi >>> 16) & 0xff] + HEX[(hi >>> 8) & 0xff] + HEX[hi & 0xff] +
    HEX[(lo >>> 16) & 0xff] + "-" + HEX[(lo >>> 8) & 0xff] + HEX[lo & 0xff] + "-" +
    HEX[0x70 | (counter >>> 8)] + HEX[counter & 0xff] + "-" +
    HEX[0x80 | (r[2] & 0x3f)] + HEX[r[3]] + "-" +
    HEX[r[4]] + HEX[r[5]] + HEX[r[6]] + HEX[r[7]] + HEX[r[8]] + HEX[r[9]]
  );
}
