package com.threatview.sdk;

import java.io.ByteArrayOutputStream;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URL;
import java.nio.charset.Charset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * StormProxy stands between the SDK and the real collector on 127.0.0.1
 * and misbehaves by plan: a 503 without forwarding, a 503 after the
 * collector accepted (the outcome the client cannot know), a connection
 * closed before or after forwarding. One request per connection.
 */
final class StormProxy implements Closeable {
    enum Mode { UNAVAILABLE, FORWARD_THEN_503, FORWARD_THEN_DROP, DROP, FORWARD, SLOW, HANG }

    interface Plan {
        Mode mode(int n);
    }

    private static final Charset ASCII = Charset.forName("US-ASCII");
    private final ServerSocket ss;
    private final String upstream;
    private final Plan plan;
    final AtomicInteger requests = new AtomicInteger();
    final List<String> log = Collections.synchronizedList(new ArrayList<String>());
    private volatile boolean closed;

    StormProxy(String upstream, Plan plan) throws IOException {
        this.upstream = upstream.endsWith("/") ? upstream.substring(0, upstream.length() - 1) : upstream;
        this.plan = plan;
        this.ss = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1"));
        Thread t = new Thread(new Runnable() {
            public void run() {
                accept();
            }
        }, "storm-proxy");
        t.setDaemon(true);
        t.start();
    }

    String url() {
        return "http://127.0.0.1:" + ss.getLocalPort();
    }

    private void accept() {
        while (!closed) {
            final Socket s;
            try {
                s = ss.accept();
            } catch (IOException e) {
                return;
            }
            Thread t = new Thread(new Runnable() {
                public void run() {
                    try {
                        handle(s);
                    } catch (IOException ignored) {
                        // the client went away
                    } finally {
                        try {
                            s.close();
                        } catch (IOException ignored) {
                            // closed
                        }
                    }
                }
            }, "storm-proxy-conn");
            t.setDaemon(true);
            t.start();
        }
    }

    private void handle(Socket s) throws IOException {
        s.setSoTimeout(20000);
        InputStream in = s.getInputStream();
        String head = readHead(in);
        if (head == null) {
            return;
        }
        String[] lines = head.split("\r\n");
        String path = lines[0].split(" ")[1];
        Map<String, String> h = new LinkedHashMap<String, String>();
        for (int i = 1; i < lines.length; i++) {
            int c = lines[i].indexOf(':');
            if (c > 0) {
                h.put(lines[i].substring(0, c).trim().toLowerCase(Locale.ROOT), lines[i].substring(c + 1).trim());
            }
        }
        int len = Integer.parseInt(h.containsKey("content-length") ? h.get("content-length") : "0");
        byte[] body = new byte[len];
        int off = 0;
        while (off < len) {
            int n = in.read(body, off, len - off);
            if (n < 0) {
                return;
            }
            off += n;
        }
        int n = requests.getAndIncrement();
        Mode m = plan.mode(n);
        log.add(n + " " + m + " key=" + h.get("idempotency-key"));
        OutputStream out = s.getOutputStream();
        switch (m) {
            case UNAVAILABLE:
                respond(out, 503, n == 0 ? "1" : null, "{\"error\":{\"code\":\"unavailable\",\"message\":\"proxy storm\"}}");
                return;
            case DROP:
                return; // closed without an answer
            default:
                break;
        }
        if (m == Mode.HANG) {
            try {
                Thread.sleep(60000);
            } catch (InterruptedException e) {
                // closing
            }
            return;
        }
        if (m == Mode.SLOW) {
            try {
                Thread.sleep(300);
            } catch (InterruptedException e) {
                return;
            }
        }
        HttpURLConnection c = (HttpURLConnection) new URL(upstream + path).openConnection();
        c.setRequestMethod("POST");
        c.setDoOutput(true);
        c.setConnectTimeout(10000);
        c.setReadTimeout(20000);
        for (String k : new String[] {"authorization", "content-type", "content-encoding", "idempotency-key", "user-agent"}) {
            if (h.containsKey(k)) {
                c.setRequestProperty(k, h.get(k));
            }
        }
        c.setFixedLengthStreamingMode(len);
        OutputStream up = c.getOutputStream();
        up.write(body);
        up.close();
        int status = c.getResponseCode();
        InputStream rin = status >= 400 ? c.getErrorStream() : c.getInputStream();
        ByteArrayOutputStream rb = new ByteArrayOutputStream();
        if (rin != null) {
            byte[] b = new byte[8192];
            int k;
            while ((k = rin.read(b)) > 0) {
                rb.write(b, 0, k);
            }
            rin.close();
        }
        log.add(n + " upstream " + status);
        if (m == Mode.FORWARD_THEN_DROP) {
            return;
        }
        if (m == Mode.FORWARD_THEN_503) {
            respond(out, 503, null, "{\"error\":{\"code\":\"outcome_unknown\",\"message\":\"proxy ate the answer\"}}");
            return;
        }
        respond(out, status, c.getHeaderField("Retry-After"), new String(rb.toByteArray(), Charset.forName("UTF-8")));
    }

    private static String readHead(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int state = 0;
        int c;
        while ((c = in.read()) >= 0) {
            b.write(c);
            state = (c == '\r' && (state == 0 || state == 2)) ? state + 1 : (c == '\n' && (state == 1 || state == 3)) ? state + 1 : 0;
            if (state == 4) {
                return new String(b.toByteArray(), ASCII);
            }
        }
        return null;
    }

    private static void respond(OutputStream out, int status, String retryAfter, String body) throws IOException {
        byte[] b = body.getBytes(Charset.forName("UTF-8"));
        StringBuilder sb = new StringBuilder();
        sb.append("HTTP/1.1 ").append(status).append(status == 202 ? " Accepted" : " Status").append("\r\n");
        sb.append("Content-Type: application/json\r\nConnection: close\r\n");
        if (retryAfter != null) {
            sb.append("Retry-After: ").append(retryAfter).append("\r\n");
        }
        sb.append("Content-Length: ").append(b.length).append("\r\n\r\n");
        out.write(sb.toString().getBytes(ASCII));
        out.write(b);
        out.flush();
    }

    @Override
    public void close() throws IOException {
        closed = true;
        ss.close();
    }
}
