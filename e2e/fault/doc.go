// Package fault is the end-to-end fault suite (build tag `fault`): under
// steady load from the event simulator it kills or restarts each part of
// the running stack in turn and checks the promises afterwards — every 202
// stored exactly once, rollups equal to count(*), one audit row per accepted
// request, no 202 while the broker is down, and every service recovered by
// itself. `make test` runs the short version; `make chaos` (CHAOS_LONG=1)
// the long one, which writes its table into docs/reliability.md.
package fault
