package collector

// DecodeCareful exposes the slow decoding path so tests can check that the
// fast path accepts exactly what it accepts.
var DecodeCareful = decodeCareful
