package com.threatview.sdk;

import java.lang.reflect.Array;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Json is the SDK's own minimal JSON writer and reader: the SDK has no
 * dependencies, and Android's org.json is not on a plain JVM.
 */
final class Json {
    private Json() {}

    /** MAX_DEPTH bounds nesting on both sides, as the collector does (32 levels inside an event). */
    static final int MAX_DEPTH = 64;

    /**
     * write appends v as JSON. Maps become objects (keys by toString),
     * collections and arrays become arrays, numbers and booleans stay
     * themselves, Dates become RFC 3339 UTC strings, anything else its
     * toString(). Non-finite doubles become null (JSON has no NaN).
     */
    static void write(StringBuilder sb, Object v) {
        write(sb, v, 0);
    }

    static String toJson(Object v) {
        StringBuilder sb = new StringBuilder(128);
        write(sb, v, 0);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object v, int depth) {
        if (depth > MAX_DEPTH) {
            throw new IllegalArgumentException("nested deeper than " + MAX_DEPTH + " levels");
        }
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String) {
            quote(sb, (String) v);
        } else if (v instanceof Boolean) {
            sb.append(((Boolean) v).booleanValue() ? "true" : "false");
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                sb.append("null");
            } else if (d == Math.rint(d) && Math.abs(d) < 1e15) {
                sb.append((long) d);
            } else {
                sb.append(d);
            }
        } else if (v instanceof Number) {
            sb.append(v.toString());
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                quote(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue(), depth + 1);
            }
            sb.append('}');
        } else if (v instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Collection<?>) v) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(sb, o, depth + 1);
            }
            sb.append(']');
        } else if (v.getClass().isArray()) {
            sb.append('[');
            int n = Array.getLength(v);
            for (int i = 0; i < n; i++) {
                if (i > 0) {
                    sb.append(',');
                }
                write(sb, Array.get(v, i), depth + 1);
            }
            sb.append(']');
        } else if (v instanceof Date) {
            quote(sb, Time.rfc3339(((Date) v).getTime()));
        } else {
            quote(sb, v.toString());
        }
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    /** quote appends s as a JSON string; control characters, quotes, backslashes and U+2028/9 are escaped. */
    static void quote(StringBuilder sb, String s) {
        sb.append('"');
        int n = s.length();
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (c < 0x20 || c == 0x2028 || c == 0x2029
                            || (Character.isSurrogate(c) && !pairedSurrogate(s, i))) {
                        // A lone surrogate is not valid UTF-8: write its escape.
                        sb.append("\\u").append(HEX[c >> 12 & 15]).append(HEX[c >> 8 & 15])
                                .append(HEX[c >> 4 & 15]).append(HEX[c & 15]);
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    private static boolean pairedSurrogate(String s, int i) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c)) {
            return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
        }
        return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
    }

    /**
     * parse reads one JSON value: objects as LinkedHashMap, arrays as
     * ArrayList, numbers as Long when integral and in range, else Double.
     * It throws IllegalArgumentException on anything that is not JSON.
     */
    static Object parse(String s) {
        Parser p = new Parser(s);
        p.ws();
        Object v = p.value(0);
        p.ws();
        if (p.i != s.length()) {
            throw p.err("trailing data");
        }
        return v;
    }

    private static final class Parser {
        final String s;
        int i;

        Parser(String s) {
            this.s = s;
        }

        IllegalArgumentException err(String what) {
            return new IllegalArgumentException("json: " + what + " at offset " + i);
        }

        void ws() {
            while (i < s.length()) {
                char c = s.charAt(i);
                if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
                    return;
                }
                i++;
            }
        }

        char peek() {
            if (i >= s.length()) {
                throw err("unexpected end");
            }
            return s.charAt(i);
        }

        void expect(String lit) {
            if (!s.startsWith(lit, i)) {
                throw err("expected " + lit);
            }
            i += lit.length();
        }

        Object value(int depth) {
            if (depth > 1000) {
                throw err("too deep");
            }
            char c = peek();
            switch (c) {
                case '{': {
                    i++;
                    Map<String, Object> m = new LinkedHashMap<String, Object>();
                    ws();
                    if (peek() == '}') {
                        i++;
                        return m;
                    }
                    while (true) {
                        ws();
                        if (peek() != '"') {
                            throw err("expected a key");
                        }
                        String k = string();
                        ws();
                        expect(":");
                        ws();
                        m.put(k, value(depth + 1));
                        ws();
                        char d = peek();
                        i++;
                        if (d == '}') {
                            return m;
                        }
                        if (d != ',') {
                            i--;
                            throw err("expected , or }");
                        }
                    }
                }
                case '[': {
                    i++;
                    List<Object> l = new ArrayList<Object>();
                    ws();
                    if (peek() == ']') {
                        i++;
                        return l;
                    }
                    while (true) {
                        ws();
                        l.add(value(depth + 1));
                        ws();
                        char d = peek();
                        i++;
                        if (d == ']') {
                            return l;
                        }
                        if (d != ',') {
                            i--;
                            throw err("expected , or ]");
                        }
                    }
                }
                case '"':
                    return string();
                case 't':
                    expect("true");
                    return Boolean.TRUE;
                case 'f':
                    expect("false");
                    return Boolean.FALSE;
                case 'n':
                    expect("null");
                    return null;
                default:
                    return number();
            }
        }

        String string() {
            i++; // opening quote
            StringBuilder sb = null;
            int start = i;
            while (true) {
                char c = peek();
                if (c == '"') {
                    String out = sb == null ? s.substring(start, i) : sb.append(s, start, i).toString();
                    i++;
                    return out;
                }
                if (c < 0x20) {
                    throw err("control character in string");
                }
                if (c == '\\') {
                    if (sb == null) {
                        sb = new StringBuilder();
                    }
                    sb.append(s, start, i);
                    i++;
                    char e = peek();
                    i++;
                    switch (e) {
                        case '"': sb.append('"'); break;
                        case '\\': sb.append('\\'); break;
                        case '/': sb.append('/'); break;
                        case 'b': sb.append('\b'); break;
                        case 'f': sb.append('\f'); break;
                        case 'n': sb.append('\n'); break;
                        case 'r': sb.append('\r'); break;
                        case 't': sb.append('\t'); break;
                        case 'u':
                            if (i + 4 > s.length()) {
                                throw err("short \\u escape");
                            }
                            try {
                                sb.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                            } catch (NumberFormatException ex) {
                                throw err("bad \\u escape");
                            }
                            i += 4;
                            break;
                        default:
                            throw err("bad escape");
                    }
                    start = i;
                    continue;
                }
                i++;
            }
        }

        Object number() {
            int start = i;
            if (i < s.length() && s.charAt(i) == '-') {
                i++;
            }
            boolean integral = true;
            int digits = 0;
            while (i < s.length()) {
                char c = s.charAt(i);
                if (c >= '0' && c <= '9') {
                    digits++;
                } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
                    integral = false;
                } else {
                    break;
                }
                i++;
            }
            if (digits == 0) {
                throw err("unexpected character");
            }
            String t = s.substring(start, i);
            try {
                if (integral && t.length() < 19) {
                    return Long.valueOf(t);
                }
                return Double.valueOf(t);
            } catch (NumberFormatException ex) {
                throw err("bad number " + t);
            }
        }
    }
}
