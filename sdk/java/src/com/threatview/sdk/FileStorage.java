package com.threatview.sdk;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.RandomAccessFile;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.Charset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * FileStorage keeps the queue in a directory: segment files of lines
 * "enqueuedAt TAB json LF" appended in order, and a small "head" file
 * naming the first line not yet delivered. Delivered segments are
 * deleted; an empty queue leaves one empty segment. A line cut short by a
 * crash (never handed to the collector) is cut off when the directory is
 * opened. One FileStorage at a time may use a directory (a file lock).
 */
public final class FileStorage implements Storage {
    private static final Charset ASCII = Charset.forName("US-ASCII");
    private static final String PREFIX = "q-";
    private static final String SUFFIX = ".log";

    private final File dir;
    private final long segmentBytes;
    private final List<Long> segs = new ArrayList<Long>(); // ascending
    private final RandomAccessFile lockFile;
    private final FileLock lock;
    private long headSeg;
    private long headOff;
    private long tailSeg;
    private long tailSize;
    private FileOutputStream tailOut;
    private int count;
    private long bytes;
    private final ByteArrayOutputStream buf = new ByteArrayOutputStream(64 << 10);

    // Where each entry of the last peek ends, and its JSON size.
    private long[] peekSeg = new long[0];
    private long[] peekOff = new long[0];
    private long[] peekLen = new long[0];
    private int peekN;

    /** FileStorage opens (or creates) the queue in dir, with segments of about 1 MiB. */
    public FileStorage(File dir) throws IOException {
        this(dir, 1 << 20);
    }

    /** FileStorage opens (or creates) the queue in dir, starting a new segment file past segmentBytes. */
    public FileStorage(File dir, long segmentBytes) throws IOException {
        this.dir = dir;
        this.segmentBytes = segmentBytes;
        if (!dir.isDirectory() && !dir.mkdirs()) {
            throw new IOException("cannot create queue directory " + dir);
        }
        lockFile = new RandomAccessFile(new File(dir, "lock"), "rw");
        FileLock l;
        try {
            l = lockFile.getChannel().tryLock();
        } catch (OverlappingFileLockException e) {
            l = null;
        }
        if (l == null) {
            lockFile.close();
            throw new IOException("queue directory " + dir + " is in use by another ThreatView");
        }
        lock = l;
        try {
            open();
        } catch (IOException e) {
            lock.release();
            lockFile.close();
            throw e;
        }
    }

    private File segFile(long n) {
        return new File(dir, PREFIX + String.format("%019d", n) + SUFFIX);
    }

    private void open() throws IOException {
        String[] names = dir.list();
        if (names != null) {
            for (String n : names) {
                if (n.startsWith(PREFIX) && n.endsWith(SUFFIX)) {
                    try {
                        segs.add(Long.parseLong(n.substring(PREFIX.length(), n.length() - SUFFIX.length())));
                    } catch (NumberFormatException ignored) {
                        // not ours
                    }
                }
            }
        }
        java.util.Collections.sort(segs);
        if (segs.isEmpty()) {
            segs.add(1L);
            new FileOutputStream(segFile(1)).close();
        }
        headSeg = segs.get(0);
        headOff = 0;
        File hf = new File(dir, "head");
        if (hf.isFile()) {
            String[] f = new String(readAll(hf), ASCII).trim().split(" ");
            try {
                long s = Long.parseLong(f[0]);
                long o = Long.parseLong(f[1]);
                if (segs.contains(s)) {
                    headSeg = s;
                    headOff = o;
                }
            } catch (RuntimeException ignored) {
                // an unreadable head: send from the first segment again (ids keep it once)
            }
        }
        while (segs.get(0) < headSeg) {
            deleteSeg(segs.remove(0));
        }
        tailSeg = segs.get(segs.size() - 1);
        // Cut a torn last line (the process stopped mid-write).
        RandomAccessFile raf = new RandomAccessFile(segFile(tailSeg), "rw");
        try {
            long len = raf.length();
            long keep = len;
            while (keep > 0) {
                raf.seek(keep - 1);
                if (raf.read() == '\n') {
                    break;
                }
                keep--;
            }
            if (keep != len) {
                raf.setLength(keep);
            }
            tailSize = keep;
        } finally {
            raf.close();
        }
        if (headSeg == tailSeg && headOff > tailSize) {
            headOff = tailSize;
        }
        // Count what is queued.
        count = 0;
        bytes = 0;
        for (long s : segs) {
            InputStream in = openAt(s, s == headSeg ? headOff : 0);
            try {
                byte[] line;
                while ((line = readLine(in)) != null) {
                    count++;
                    bytes += jsonLen(line);
                }
            } finally {
                in.close();
            }
        }
        tailOut = new FileOutputStream(segFile(tailSeg), true);
    }

    private static byte[] readAll(File f) throws IOException {
        FileInputStream in = new FileInputStream(f);
        try {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] b = new byte[256];
            int n;
            while ((n = in.read(b)) > 0) {
                out.write(b, 0, n);
            }
            return out.toByteArray();
        } finally {
            in.close();
        }
    }

    private InputStream openAt(long seg, long off) throws IOException {
        FileInputStream in = new FileInputStream(segFile(seg));
        in.getChannel().position(off);
        rpos = 0;
        rlim = 0;
        return in;
    }

    private byte[] line = new byte[1024];
    private int lineLen;
    private final byte[] rbuf = new byte[64 << 10];
    private int rpos;
    private int rlim;

    /** readLine reads up to LF into a shared buffer; null at EOF (a line without LF is not returned). */
    private byte[] readLine(InputStream in) throws IOException {
        lineLen = 0;
        while (true) {
            if (rpos == rlim) {
                rlim = in.read(rbuf, 0, rbuf.length);
                rpos = 0;
                if (rlim <= 0) {
                    rlim = 0;
                    return null;
                }
            }
            int i = rpos;
            while (i < rlim && rbuf[i] != '\n') {
                i++;
            }
            int n = i - rpos;
            if (lineLen + n > line.length) {
                line = Arrays.copyOf(line, Math.max(line.length * 2, lineLen + n));
            }
            System.arraycopy(rbuf, rpos, line, lineLen, n);
            lineLen += n;
            if (i < rlim) {
                rpos = i + 1;
                return line;
            }
            rpos = rlim;
        }
    }

    private int tab() {
        for (int i = 0; i < lineLen && i < 21; i++) {
            if (line[i] == '\t') {
                return i;
            }
        }
        return -1;
    }

    private int jsonLen(byte[] l) {
        return lineLen - tab() - 1;
    }

    private Entry entry() {
        int t = tab();
        long ts = -1;
        if (t > 0) {
            try {
                ts = Long.parseLong(new String(line, 0, t, ASCII));
            } catch (NumberFormatException e) {
                ts = -1;
            }
        }
        return new Entry(ts, Arrays.copyOfRange(line, t + 1, lineLen));
    }

    @Override
    public synchronized void append(List<Entry> entries) throws IOException {
        buf.reset();
        int n = 0;
        long b = 0;
        for (Entry e : entries) {
            byte[] ts = Long.toString(e.enqueuedAt).getBytes(ASCII);
            int len = ts.length + 2 + e.json.length;
            if (tailSize + buf.size() > 0 && tailSize + buf.size() + len > segmentBytes) {
                writeBuf(n, b);
                n = 0;
                b = 0;
                rotate();
            }
            buf.write(ts, 0, ts.length);
            buf.write('\t');
            buf.write(e.json, 0, e.json.length);
            buf.write('\n');
            n++;
            b += e.json.length;
        }
        writeBuf(n, b);
    }

    private void writeBuf(int n, long b) throws IOException {
        if (buf.size() == 0) {
            return;
        }
        try {
            buf.writeTo(tailOut);
        } catch (IOException e) {
            // Part of the chunk may be on disk: cut back to the last whole line we counted.
            tailOut.getChannel().truncate(tailSize);
            buf.reset();
            throw e;
        }
        tailSize += buf.size();
        count += n;
        bytes += b;
        buf.reset();
    }

    private void rotate() throws IOException {
        tailOut.close();
        tailSeg++;
        segs.add(tailSeg);
        tailOut = new FileOutputStream(segFile(tailSeg), true);
        tailSize = 0;
    }

    @Override
    public synchronized List<Entry> peek(int maxCount, long maxBytes) throws IOException {
        List<Entry> out = new ArrayList<Entry>();
        if (peekSeg.length < maxCount) {
            int cap = Math.min(maxCount, Math.max(count, 16));
            peekSeg = new long[cap];
            peekOff = new long[cap];
            peekLen = new long[cap];
        }
        peekN = 0;
        long b = 0;
        outer:
        for (long s : segs) {
            if (s < headSeg) {
                continue;
            }
            long off = s == headSeg ? headOff : 0;
            long end = s == tailSeg ? tailSize : Long.MAX_VALUE;
            InputStream in = openAt(s, off);
            try {
                while (out.size() < maxCount && off < end) {
                    if (readLine(in) == null) {
                        break;
                    }
                    int jl = jsonLen(line);
                    if (!out.isEmpty() && b + jl > maxBytes) {
                        break outer;
                    }
                    off += lineLen + 1;
                    b += jl;
                    out.add(entry());
                    if (peekN == peekSeg.length) {
                        int cap = Math.min(maxCount, peekN * 2);
                        peekSeg = Arrays.copyOf(peekSeg, cap);
                        peekOff = Arrays.copyOf(peekOff, cap);
                        peekLen = Arrays.copyOf(peekLen, cap);
                    }
                    peekSeg[peekN] = s;
                    peekOff[peekN] = off;
                    peekLen[peekN] = jl;
                    peekN++;
                }
                if (out.size() >= maxCount) {
                    break;
                }
            } finally {
                in.close();
            }
        }
        return out;
    }

    @Override
    public synchronized void remove(int n) throws IOException {
        if (n <= 0) {
            return;
        }
        if (n > peekN) {
            throw new IllegalStateException("remove(" + n + ") after a peek of " + peekN);
        }
        long s = peekSeg[n - 1];
        long o = peekOff[n - 1];
        for (int i = 0; i < n; i++) {
            bytes -= peekLen[i];
        }
        count -= n;
        peekN = 0;
        if (count == 0) {
            // Everything delivered: start afresh, so old segments free their space.
            reset();
            return;
        }
        while (segs.get(0) < s) {
            deleteSeg(segs.remove(0));
        }
        if (s != tailSeg && o >= segFile(s).length()) {
            deleteSeg(segs.remove(0));
            setHead(segs.get(0), 0);
        } else {
            setHead(s, o);
        }
    }

    private void setHead(long s, long o) throws IOException {
        headSeg = s;
        headOff = o;
        File tmp = new File(dir, "head.tmp");
        FileOutputStream out = new FileOutputStream(tmp);
        try {
            out.write((s + " " + o + "\n").getBytes(ASCII));
        } finally {
            out.close();
        }
        if (!tmp.renameTo(new File(dir, "head"))) {
            throw new IOException("cannot replace " + new File(dir, "head"));
        }
    }

    private void deleteSeg(long s) {
        File f = segFile(s);
        if (f.exists() && !f.delete()) {
            f.deleteOnExit();
        }
    }

    @Override
    public synchronized void clear() throws IOException {
        peekN = 0;
        reset();
    }

    private void reset() throws IOException {
        tailOut.close();
        for (long x : segs) {
            deleteSeg(x);
        }
        segs.clear();
        tailSeg++;
        segs.add(tailSeg);
        tailOut = new FileOutputStream(segFile(tailSeg), true);
        tailSize = 0;
        count = 0;
        bytes = 0;
        setHead(tailSeg, 0);
    }

    @Override
    public synchronized int size() {
        return count;
    }

    @Override
    public synchronized long bytes() {
        return bytes;
    }

    @Override
    public synchronized void sync() throws IOException {
        tailOut.getFD().sync();
    }

    @Override
    public synchronized void close() throws IOException {
        try {
            tailOut.close();
        } finally {
            lock.release();
            lockFile.close();
        }
    }

    /** diskBytes is the size of the segment files, for tests and footprint checks. */
    synchronized long diskBytes() {
        long n = 0;
        for (long s : segs) {
            n += segFile(s).length();
        }
        return n;
    }
}
