package com.threatview.sdk;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/** MemoryStorage keeps the queue in memory: lost when the process ends. */
public final class MemoryStorage implements Storage {
    private final ArrayDeque<Entry> q = new ArrayDeque<Entry>();
    private long bytes;

    @Override
    public synchronized void append(List<Entry> entries) {
        for (Entry e : entries) {
            q.addLast(e);
            bytes += e.json.length;
        }
    }

    @Override
    public synchronized List<Entry> peek(int maxCount, long maxBytes) {
        List<Entry> out = new ArrayList<Entry>(Math.min(maxCount, q.size()));
        long b = 0;
        Iterator<Entry> it = q.iterator();
        while (it.hasNext() && out.size() < maxCount) {
            Entry e = it.next();
            if (!out.isEmpty() && b + e.json.length > maxBytes) {
                break;
            }
            b += e.json.length;
            out.add(e);
        }
        return out;
    }

    @Override
    public synchronized void remove(int n) {
        for (int i = 0; i < n && !q.isEmpty(); i++) {
            bytes -= q.removeFirst().json.length;
        }
    }

    @Override
    public synchronized void clear() {
        q.clear();
        bytes = 0;
    }

    @Override
    public synchronized int size() {
        return q.size();
    }

    @Override
    public synchronized long bytes() {
        return bytes;
    }

    @Override
    public void sync() {}

    @Override
    public void close() {}
}
