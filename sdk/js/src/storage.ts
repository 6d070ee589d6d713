/**
 * Storage is where the queue keeps events that are not delivered yet: a
 * small asynchronous key-value store of strings. Every method may reject;
 * the client then keeps the events in memory and reports nothing lost.
 * `@react-native-async-storage/async-storage` fits it as is; the adapters
 * below fit `@capacitor/preferences` and any object with those methods.
 */
export interface Storage {
  getItem(key: string): Promise<string | null>;
  setItem(key: string, value: string): Promise<void>;
  removeItem(key: string): Promise<void>;
  getAllKeys(): Promise<readonly string[]>;
}

/**
 * memoryStorage keeps the queue in memory: nothing survives the process.
 * It is the default.
 */
export function memoryStorage(): Storage {
  const m = new Map<string, string>();
  return {
    getItem: async (k) => (m.has(k) ? (m.get(k) as string) : null),
    setItem: async (k, v) => {
      m.set(k, v);
    },
    removeItem: async (k) => {
      m.delete(k);
    },
    getAllKeys: async () => [...m.keys()],
  };
}

/**
 * AsyncStorageLike is the part of `@react-native-async-storage/async-storage`'s
 * default export the client uses, typed structurally so this package needs
 * no dependency on it.
 */
export interface AsyncStorageLike {
  getItem(key: string): Promise<string | null>;
  setItem(key: string, value: string): Promise<void>;
  removeItem(key: string): Promise<void>;
  getAllKeys(): Promise<readonly string[]>;
}

/**
 * asyncStorage adapts React Native's AsyncStorage:
 * `storage: asyncStorage(AsyncStorage)`. The queue writes values of at most
 * 256 KiB, under Android's 2 MB limit on one AsyncStorage row.
 */
export function asyncStorage(s: AsyncStorageLike): Storage {
  return {
    getItem: (k) => s.getItem(k),
    setItem: (k, v) => s.setItem(k, v),
    removeItem: (k) => s.removeItem(k),
    getAllKeys: () => s.getAllKeys(),
  };
}

/**
 * PreferencesLike is the part of `@capacitor/preferences`' `Preferences` the
 * client uses, typed structurally.
 */
export interface PreferencesLike {
  get(options: { key: string }): Promise<{ value: string | null }>;
  set(options: { key: string; value: string }): Promise<void>;
  remove(options: { key: string }): Promise<void>;
  keys(): Promise<{ keys: string[] }>;
}

/**
 * preferencesStorage adapts Capacitor's Preferences:
 * `storage: preferencesStorage(Preferences)`.
 */
export function preferencesStorage(p: PreferencesLike): Storage {
  return {
    getItem: async (key) => (await p.get({ key })).value,
    setItem: (key, value) => p.set({ key, value }),
    removeItem: (key) => p.remove({ key }),
    getAllKeys: async () => (await p.keys()).keys,
  };
}
