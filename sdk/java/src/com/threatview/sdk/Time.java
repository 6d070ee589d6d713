package com.threatview.sdk;

/** Time formats instants as RFC 3339 in UTC, without the thread-unsafe SimpleDateFormat. */
final class Time {
    private Time() {}

    /** rfc3339 formats ms since the epoch as 2006-01-02T15:04:05.000Z. */
    static String rfc3339(long ms) {
        long days = Math.floorDiv(ms, 86400000L);
        long msOfDay = Math.floorMod(ms, 86400000L);
        // Days to civil date (Howard Hinnant's algorithm).
        long z = days + 719468;
        long era = Math.floorDiv(z, 146097);
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
