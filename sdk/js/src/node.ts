// Node-only parts: a file-backed Storage and gzip through node:zlib. Kept
// out of the main entry so React Native and browser bundles never see
// node: imports.
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { gzip } from "node:zlib";
import type { Storage } from "./storage.js";

/**
 * fileStorage keeps the queue in dir, one file a key (written to a temporary
 * file and renamed, so a crash leaves the old value or the new one, never
 * half of one). One client at a time may use a directory.
 */
export function fileStorage(dir: string): Storage {
  let made: Promise<unknown> | undefined;
  const ready = () => (made ??= mkdir(dir, { recursive: true }));
  const path = (k: string) => join(dir, encodeURIComponent(k));
  return {
    async getItem(k) {
      try {
        return await readFile(path(k), "utf8");
      } catch (e) {
        if ((e as { code?: string }).code === "ENOENT") return null;
        throw e;
      }
    },
    async setItem(k, v) {
      await ready();
      const p = path(k);
      await writeFile(p + ".tmp", v);
      await rename(p + ".tmp", p);
    },
    async removeItem(k) {
      await rm(path(k), { force: true });
    },
    async getAllKeys() {
      await ready();
      return (await readdir(dir)).filter((n) => !n.endsWith(".tmp")).map((n) => decodeURIComponent(n));
    },
  };
}

/**
 * zlibGzip compresses with node:zlib (faster than CompressionStream on
 * Node): `compress: zlibGzip`.
 */
export function zlibGzip(data: Uint8Array): Promise<Uint8Array> {
  return new Promise((resolve, reject) => gzip(data, { level: 6 }, (err, out) => (err ? reject(err) : resolve(out))));
}
