package com.threatview.sdk;

/**
 * DropListener hears of every event the SDK gives up on. It is called on
 * the thread that found out (the app's for a refused enqueue, else the
 * SDK's sender); it must return quickly and must not call enqueue.
 * Whatever it throws is ignored.
 */
public interface DropListener {
    /** onDrop is called once per group of events dropped together. */
    void onDrop(Drop drop);
}
