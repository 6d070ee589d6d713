package com.threatview.sdk;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * FreeRaspAdapter turns freeRASP's Android threat callbacks into Threat
 * View events. Its methods have the names and shapes of freeRASP's
 * ThreatListener.ThreatDetected and ThreatListener.DeviceState, so an
 * app's listener forwards each callback in one line (this jar does not
 * depend on freeRASP, whose artifact is not on Maven Central):
 *
 * <pre>
 * final FreeRaspAdapter rasp = new FreeRaspAdapter(threatView, device);
 * ThreatListener.ThreatDetected l = new ThreatListener.ThreatDetected() {
 *     public void onRootDetected() { rasp.onRootDetected(); }
 *     ...
 * };
 * </pre>
 *
 * Each callback enqueues one event of type "threat.detected" whose
 * threats are the freeRASP cross-platform threat name, verbatim
 * ("PrivilegedAccess", "Hooks", ...), and whose attributes.source is
 * "freerasp". Calls never block and never throw, so freeRASP's thread is
 * never held up by telemetry.
 */
public final class FreeRaspAdapter {
    /** EVENT_TYPE is the type of the events the adapter makes. */
    public static final String EVENT_TYPE = "threat.detected";

    private static final String[][] CALLBACKS = {
        {"onRootDetected", "PrivilegedAccess"},
        {"onDebuggerDetected", "Debug"},
        {"onEmulatorDetected", "Simulator"},
        {"onTamperDetected", "AppIntegrity"},
        {"onUntrustedInstallationSourceDetected", "UnofficialStore"},
        {"onHookDetected", "Hooks"},
        {"onDeviceBindingDetected", "DeviceBinding"},
        {"onObfuscationIssuesDetected", "ObfuscationIssues"},
        {"onScreenshotDetected", "Screenshot"},
        {"onScreenRecordingDetected", "ScreenRecording"},
        {"onMultiInstanceDetected", "MultiInstance"},
        {"onMalwareDetected", "Malware"},
        {"onUnlockedDeviceDetected", "Passcode"},
        {"onHardwareBackedKeystoreNotAvailableDetected", "SecureHardwareNotAvailable"},
        {"onDeveloperModeDetected", "DevMode"},
        {"onADBEnabledDetected", "ADBEnabled"},
        {"onSystemVPNDetected", "SystemVPN"},
    };

    /** THREATS are freeRASP's 18 cross-platform threat names; DeviceID is reported on iOS only. */
    public static final List<String> THREATS;

    static {
        List<String> t = new ArrayList<String>();
        for (String[] c : CALLBACKS) {
            t.add(c[1]);
        }
        t.add("DeviceID");
        THREATS = Collections.unmodifiableList(t);
    }

    private final ThreatView tv;
    private final Map<String, ?> base;

    /**
     * FreeRaspAdapter sends through tv; base holds fields every event
     * carries (e.g. "device": {"model", "os", "os_version"}; "app" when the
     * builder has none). base is copied at each event, not kept live.
     */
    public FreeRaspAdapter(ThreatView tv, Map<String, ?> base) {
        this.tv = tv;
        this.base = base == null ? Collections.<String, Object>emptyMap() : new LinkedHashMap<String, Object>(base);
    }

    /** threatFor maps a freeRASP Android callback name to its threat name; null when unknown. */
    public static String threatFor(String callback) {
        for (String[] c : CALLBACKS) {
            if (c[0].equals(callback)) {
                return c[1];
            }
        }
        return null;
    }

    /** report enqueues a threat.detected event for a freeRASP threat name (e.g. from another platform's callback). */
    public void report(String threat) {
        report(threat, null);
    }

    private void report(String threat, Map<String, Object> extra) {
        try {
            Map<String, Object> ev = new LinkedHashMap<String, Object>(base);
            ev.put("type", EVENT_TYPE);
            ev.put("threats", Collections.singletonList(threat));
            Map<String, Object> attrs = new LinkedHashMap<String, Object>();
            Object a = base.get("attributes");
            if (a instanceof Map) {
                for (Map.Entry<?, ?> e : ((Map<?, ?>) a).entrySet()) {
                    attrs.put(String.valueOf(e.getKey()), e.getValue());
                }
            }
            attrs.put("source", "freerasp");
            if (extra != null) {
                attrs.putAll(extra);
            }
            ev.put("attributes", attrs);
            tv.enqueue(ev);
        } catch (Throwable ignored) {
            // never break freeRASP's callback thread
        }
    }

    // ThreatListener.ThreatDetected

    public void onRootDetected() {
        report("PrivilegedAccess");
    }

    public void onDebuggerDetected() {
        report("Debug");
    }

    public void onEmulatorDetected() {
        report("Simulator");
    }

    public void onTamperDetected() {
        report("AppIntegrity");
    }

    public void onUntrustedInstallationSourceDetected() {
        report("UnofficialStore");
    }

    public void onHookDetected() {
        report("Hooks");
    }

    public void onDeviceBindingDetected() {
        report("DeviceBinding");
    }

    public void onObfuscationIssuesDetected() {
        report("ObfuscationIssues");
    }

    public void onScreenshotDetected() {
        report("Screenshot");
    }

    public void onScreenRecordingDetected() {
        report("ScreenRecording");
    }

    public void onMultiInstanceDetected() {
        report("MultiInstance");
    }

    /**
     * onMalwareDetected takes freeRASP's List&lt;SuspiciousAppInfo&gt; as a
     * plain List (this jar cannot name the type); only the count is sent,
     * not which apps the person has installed.
     */
    public void onMalwareDetected(List<?> suspiciousApps) {
        Map<String, Object> extra = new LinkedHashMap<String, Object>();
        extra.put("suspicious_apps", suspiciousApps == null ? 0 : suspiciousApps.size());
        report("Malware", extra);
    }

    // ThreatListener.DeviceState

    public void onUnlockedDeviceDetected() {
        report("Passcode");
    }

    public void onHardwareBackedKeystoreNotAvailableDetected() {
        report("SecureHardwareNotAvailable");
    }

    public void onDeveloperModeDetected() {
        report("DevMode");
    }

    public void onADBEnabledDetected() {
        report("ADBEnabled");
    }

    public void onSystemVPNDetected() {
        report("SystemVPN");
    }
}
