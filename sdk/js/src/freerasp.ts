// The freeRASP adapter: freeRASP (Talsec) hands each threat it detects to
// a callback of the app; these turn the callbacks into our events. The
// threat type is freeRASP's own name of the check, verbatim
// ("PrivilegedAccess"), which the renderer's taxonomy maps to a category.

/** FREERASP_THREATS are freeRASP's 18 threat names, verbatim. */
export const FREERASP_THREATS = [
  "AppIntegrity",
  "PrivilegedAccess",
  "Debug",
  "Hooks",
  "Passcode",
  "Simulator",
  "SecureHardwareNotAvailable",
  "SystemVPN",
  "DeviceBinding",
  "DeviceID",
  "UnofficialStore",
  "ObfuscationIssues",
  "DevMode",
  "Malware",
  "ADBEnabled",
  "Screenshot",
  "ScreenRecording",
  "MultiInstance",
] as const;

/** FreeRaspThreat is one of freeRASP's threat names. */
export type FreeRaspThreat = (typeof FREERASP_THREATS)[number];

/** FREERASP_EVENT_TYPE is the type of the events the adapter makes. */
export const FREERASP_EVENT_TYPE = "threat.detected";

/**
 * FreeRaspActions are freeRASP's callbacks as its React Native and Capacitor
 * plugins name them (`useFreeRasp(config, actions)`,
 * `startFreeRASP(config, actions)`).
 */
export interface FreeRaspActions {
  privilegedAccess: () => void;
  debug: () => void;
  simulator: () => void;
  appIntegrity: () => void;
  unofficialStore: () => void;
  hooks: () => void;
  deviceBinding: () => void;
  deviceID: () => void;
  passcode: () => void;
  secureHardwareNotAvailable: () => void;
  obfuscationIssues: () => void;
  devMode: () => void;
  systemVPN: () => void;
  malware: (suspiciousApps?: ReadonlyArray<{ packageInfo?: { packageName?: string } }>) => void;
  adbEnabled: () => void;
  screenshot: () => void;
  screenRecording: () => void;
  multiInstance: () => void;
}

/** The callback's name: the threat name with a lower-case first letter ("ADBEnabled" → "adbEnabled"). */
function actionName(t: FreeRaspThreat): keyof FreeRaspActions {
  return (t === "ADBEnabled" ? "adbEnabled" : t[0].toLowerCase() + t.slice(1)) as keyof FreeRaspActions;
}

/** The threat event of one freeRASP callback. */
export interface FreeRaspEvent {
  type: string;
  threats: string[];
  attributes: Record<string, unknown>;
}

/** The most suspicious package names a Malware event carries. */
const maxPackages = 20;

/**
 * freeRaspEvent is the event of the freeRASP threat `name`. For Malware,
 * the suspicious apps' package names (at most 20) and their count are
 * attributes; nothing else about them is sent.
 */
export function freeRaspEvent(name: FreeRaspThreat | string, suspiciousApps?: ReadonlyArray<{ packageInfo?: { packageName?: string } }>): FreeRaspEvent {
  const attributes: Record<string, unknown> = { source: "freerasp" };
  if (suspiciousApps && suspiciousApps.length > 0) {
    attributes.suspicious_apps = suspiciousApps.length;
    attributes.packages = suspiciousApps
      .slice(0, maxPackages)
      .map((a) => a?.packageInfo?.packageName)
      .filter((p): p is string => typeof p === "string");
  }
  return { type: FREERASP_EVENT_TYPE, threats: [name], attributes };
}

/**
 * freeRaspActions returns freeRASP's 18 callbacks, each enqueueing its
 * threat event on `client` (which returns at once and never throws, so
 * freeRASP's thread is not held up). Pass `also` to keep the app's own
 * reactions: they run after the event is queued.
 *
 *     useFreeRasp(config, freeRaspActions(tv));
 */
export function freeRaspActions(
  client: { enqueue(event: FreeRaspEvent): unknown },
  also: Partial<FreeRaspActions> = {},
): FreeRaspActions {
  const out: Record<string, (...a: never[]) => void> = {};
  for (const t of FREERASP_THREATS) {
    const name = actionName(t);
    const own = also[name] as ((...a: unknown[]) => void) | undefined;
    out[name] = (...args: unknown[]) => {
      const apps = t === "Malware" && Array.isArray(args[0]) ? (args[0] as ReadonlyArray<{ packageInfo?: { packageName?: string } }>) : undefined;
      client.enqueue(freeRaspEvent(t, apps));
      if (own) own(...args);
    };
  }
  return out as unknown as FreeRaspActions;
}
