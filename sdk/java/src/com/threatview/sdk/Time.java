package com.threatview.sdk;

/** Time formats instants as RFC 3339 in UTC, without the thread-unsafe SimpleDateFormat. */
final class Time {
    private Time() {}

    /** rfc3339 formats ms since the epoch as 2006-01-02T15:04:05.000Z. */
    static String rfc3339(long ms) {
        // Math.floorDiv is Java 8 but Android API 24: floor by hand for API 21.
        long days = ms / 86400000L;
        if (ms % 86400000L < 0) {
            days--;
        }
        long msOfDay = ms - days * 86400000L;
        // Days to civil date (Howard Hinnant's algorithm).
        long z = days + 719468;
        long era = (z >= 0 ? z : z - 146096) / 146097;
        long doe = z - era * 146097;
        long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        long y = yoe + era * 400;
        long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        long mp = (5 * doy + 2) / 153;
        long d = doy - (153 * mp + 2) / 5 + 1;
        long m = mp < 10 ? mp + 3 : mp - 9;
        if (m <= 2) {
            y++;
        }
        StringBuilder sb = new StringBuilder(24);
        pad(sb, y, 4).append('-');
        pad(sb, m, 2).append('-');
        pad(sb, d, 2).append('T');
        pad(sb, msOfDay / 3600000, 2).append(':');
        pad(sb, msOfDay / 60000 % 60, 2).append(':');
        pad(sb, msOfDay / 1000 % 60, 2).append('.');
        pad(sb, msOfDay % 1000, 3).append('Z');
        return sb.toString();
    }

    private static StringBuilder pad(StringBuilder sb, long v, int width) {
        String s = Long.toString(v);
        for (int i = s.length(); i < width; i++) {
            sb.append('0');
        }
        return sb.append(s);
    }
}
