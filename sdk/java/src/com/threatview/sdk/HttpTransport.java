package com.threatview.sdk;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.Charset;
import java.util.Collections;
import java.util.HashSet;
import java.util.Set;

/** HttpTransport posts with HttpURLConnection (on Android, its OkHttp-backed one). */
final class HttpTransport implements Transport {
    private static final Charset UTF8 = Charset.forName("UTF-8");
    private final URL url;
    private final String auth;
    private final int timeoutMs;
    private final String userAgent;
    private final Set<HttpURLConnection> inFlight = Collections.synchronizedSet(new HashSet<HttpURLConnection>());

    HttpTransport(String endpoint, String token, int timeoutMs, String userAgent) throws IOException {
        String e = endpoint.endsWith("/") ? endpoint.substring(0, endpoint.length() - 1) : endpoint;
        this.url = new URL(e + "/v1/events");
        this.auth = "Bearer " + token;
        this.timeoutMs = timeoutMs;
        this.userAgent = userAgent;
    }

    @Override
    public Response post(byte[] gz, String key) throws IOException {
        HttpURLConnection c = (HttpURLConnection) url.openConnection();
        inFlight.add(c);
        try {
            c.setRequestMethod("POST");
            c.setDoOutput(true);
            c.setUseCaches(false);
            c.setInstanceFollowRedirects(false);
            c.setConnectTimeout(timeoutMs);
            c.setReadTimeout(timeoutMs);
            c.setFixedLengthStreamingMode(gz.length);
            c.setRequestProperty("Authorization", auth);
            c.setRequestProperty("Content-Type", "application/json");
            c.setRequestProperty("Content-Encoding", "gzip");
            c.setRequestProperty("Idempotency-Key", key);
            c.setRequestProperty("User-Agent", userAgent);
            OutputStream out = c.getOutputStream();
            try {
                out.write(gz);
            } finally {
                out.close();
            }
            int status = c.getResponseCode();
            InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream();
            String body = "";
            if (in != null) {
                try {
                    body = readCapped(in, 64 << 10);
                } finally {
                    in.close();
                }
            }
            return new Response(status, c.getHeaderField("Retry-After"), body);
        } catch (IOException e) {
            // No answer (or a cut one): drop this connection, not a pooled one.
            c.disconnect();
            throw e;
        } finally {
            inFlight.remove(c);
        }
    }

    @Override
    public void abort() {
        synchronized (inFlight) {
            for (HttpURLConnection c : inFlight) {
                c.disconnect();
            }
        }
    }

    private static String readCapped(InputStream in, int max) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] b = new byte[4096];
        int n;
        while ((n = in.read(b)) > 0) {
            if (out.size() < max) {
                out.write(b, 0, Math.min(n, max - out.size()));
            }
        }
        return new String(out.toByteArray(), UTF8);
    }
}
