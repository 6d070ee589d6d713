package com.threatview.sdk;

/**
 * Clock is the SDK's source of time and its way of waiting between
 * attempts; tests replace it with a fake that advances on sleep.
 */
interface Clock {
    /** nowMillis is the wall clock, ms since the epoch (event times, Retry-After dates, ages). */
    long nowMillis();

    /** sleep waits ms milliseconds; it throws InterruptedException when the SDK is closing. */
    void sleep(long ms) throws InterruptedException;

    /** SYSTEM is the real clock. */
    Clock SYSTEM = new Clock() {
        @Override
        public long nowMillis() {
            return System.currentTimeMillis();
        }

        @Override
        public void sleep(long ms) throws InterruptedException {
            if (ms > 0) {
                Thread.sleep(ms);
            }
        }
    };
}
