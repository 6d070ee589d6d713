package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"threatview/platform/wire"
	"threatview/processor"
)

// The write path, one transaction per batch (or per request, under its
// savepoint, in WriteRequests):
//
//  1. prepare, in Go: repeats of an (id, app) within the batch dropped (the
//     earliest received_at kept), each event's threat types computed once;
//  2. COPY into the session's batch_events;
//  3. events.lock_apps: the batch's apps locked in a fixed order, so two
//     writers never both miss each other's copy of a re-sent id, and a
//     suppression waits for the write in flight (migration 000014);
//  4. insertSQL (insertOutboxSQL when the outbox is on and an event has a
//     threat): events, facts, device models, investigation rollups and the
//     outbox, for the rows actually inserted, which it returns;
//  5. the rollups, from those rows: one upsert per rollup table that has
//     rows, each row once per distinct (app, bucket, key), in key order.
//
// So the rollups equal count(*) over events.events at every commit, with no
// queue and no aggregator between them.

// prepared is a batch ready for COPY.
type prepared struct {
	events  []wire.Event
	threats [][]string // per event, facts.threat_types' answer
	apps    []string   // distinct
	threat  bool       // some event has a threat type
}

var noThreats = []string{}

// eventKey is an event's identity: its id as PostgreSQL compares it (the
// 16 bytes: the wire allows upper-case hex), and its app.
type eventKey struct {
	id  [16]byte
	app string
}

func keyOf(e *wire.Event) eventKey {
	u, _ := parseUUID(e.ID) // not a UUID: the COPY refuses it (errEncode)
	return eventKey{u.Bytes, e.App.ID}
}

// prepare drops the repeats of an (id, app) within events, keeping the
// earliest received_at (the first of equals), and computes the threat types.
func prepare(events []wire.Event) prepared {
	p := prepared{events: events}
	seen := make(map[eventKey]int, len(events))
	apps := map[string]struct{}{}
	var drop []bool
	for i := range events {
		k := keyOf(&events[i])
		j, dup := seen[k]
		if !dup {
			seen[k] = i
			apps[k.app] = struct{}{}
			continue
		}
		if drop == nil {
			drop = make([]bool, len(events))
		}
		if events[i].ReceivedAt.Before(events[j].ReceivedAt) {
			drop[j] = true
			seen[k] = i
		} else {
			drop[i] = true
		}
	}
	if drop != nil {
		p.events = make([]wire.Event, 0, len(seen))
		for i := range events {
			if !drop[i] {
				p.events = append(p.events, events[i])
			}
		}
	}
	p.threats = make([][]string, len(p.events))
	for i := range p.events {
		if p.threats[i] = threatTypes(p.events[i].Threats); p.threats[i] == nil {
			p.threats[i] = noThreats // '{}', not NULL
		}
		p.threat = p.threat || len(p.threats[i]) > 0
	}
	p.apps = make([]string, 0, len(apps))
	for a := range apps {
		p.apps = append(p.apps, a)
	}
	return p
}

// threatTypes is facts.threat_types (migration 000003) in Go: the distinct
// types of the threats array, in byte order (the events database's
// collation is C), each cut to 128 characters, empty ones left out. A
// threat is a string (its type) or an object whose "type" is a string;
// anything else, and a threats value that is not an array, counts nothing.
// TestThreatTypes_MatchesSQL holds the two together.
func threatTypes(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil
	}
	var out []string
	for _, el := range elems {
		var t string
		switch firstByte(el) {
		case '"':
			if json.Unmarshal(el, &t) != nil {
				continue
			}
		case '{':
			// A map, not a struct: the key is matched exactly, and a
			// repeated key keeps its last value, as jsonb does.
			var obj map[string]json.RawMessage
			if json.Unmarshal(el, &obj) != nil || firstByte(obj["type"]) != '"' || json.Unmarshal(obj["type"], &t) != nil {
				continue
			}
		default:
			continue
		}
		if t = cutRunes(t, 128); t != "" {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// cutRunes is PostgreSQL's left(s, n).
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}

// insert writes events in tx (steps 1-5 above) and returns how many it
// stored. since is the earliest received_at the duplicate probe looks at.
func (s *Store) insert(ctx context.Context, tx pgx.Tx, events []wire.Event, since time.Time) (int, error) {
	p := prepare(events)
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"batch_events"}, batchColumns, &rows{events: p.events, threats: p.threats, i: -1}); err != nil {
		return 0, fmt.Errorf("copy: %w", err)
	}
	// An earlier copy was stored by a processor whose clock let its
	// received_at be at most MaxReceivedAhead past that processor's now.
	_, hi := receivedRange(p.events)
	if now := time.Now(); now.After(hi) {
		hi = now
	}
	until := hi.Add(processor.MaxReceivedAhead)
	stmt := insertSQL
	if s.outbox && p.threat {
		stmt = insertOutboxSQL
	}
	b := &pgx.Batch{}
	b.Queue("SELECT events.lock_apps($1)", p.apps)
	b.Queue(stmt, since, until)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return 0, fmt.Errorf("lock apps: %w", err)
	}
	index := make(map[eventKey]int, len(p.events))
	for i := range p.events {
		index[keyOf(&p.events[i])] = i
	}
	var acc rollupAcc
	res, err := br.Query()
	if err == nil {
		var id [16]byte
		var app string
		var model int32
		_, err = pgx.ForEachRow(res, []any{&id, &app, &model}, func() error {
			i, ok := index[eventKey{id, app}]
			if !ok {
				return fmt.Errorf("inserted row %x of app %q is not in the batch", id, app)
			}
			acc.add(&p.events[i], model, p.threats[i])
			return nil
		})
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("insert: %w", err)
	}
	if acc.n > 0 {
		if err := tx.SendBatch(ctx, acc.batch()).Close(); err != nil {
			return 0, fmt.Errorf("roll up %d events: %w", acc.n, err)
		}
	}
	return acc.n, nil
}

// The rollups: four dimensions by three grains, each per app and over all
// apps (facts.all_apps_*). A bucket is UTC, of the (skew-corrected)
// occurred_at; a threat rollup counts an event once per distinct type.
var (
	rollupDims = []struct{ name, col, typ string }{
		{"country", "country", "char(2)"},
		{"device_model", "device_model_id", "integer"},
		{"os", "os", "text"},
		{"threat", "threat", "text"},
	}
	rollupGrains = []struct {
		name, typ string
		bucket    func(time.Time) time.Time
	}{
		{"hour", "timestamptz", func(t time.Time) time.Time { return t.UTC().Truncate(time.Hour) }},
		{"day", "date", func(t time.Time) time.Time {
			t = t.UTC()
			return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		}},
		{"month", "date", func(t time.Time) time.Time {
			t = t.UTC()
			return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		}},
	}
	// rollupSQL[d][g] is the per-app upsert of dimension d and grain g,
	// rollupSQL[d][g+3] the all-apps one; the rows come as arrays in the
	// order the rows are locked in (the same order an erasure's decrement
	// locks them, so the two never deadlock).
	rollupSQL = func() [4][6]string {
		var out [4][6]string
		for d, dim := range rollupDims {
			for g, gr := range rollupGrains {
				table := fmt.Sprintf("events_by_%s_per_%s", dim.name, gr.name)
				out[d][g] = fmt.Sprintf(`INSERT INTO facts.%[1]s AS t (app_id, bucket, %[2]s, count)
SELECT a, b, k::%[3]s, n FROM unnest($1::text[], $2::%[4]s[], $3::text[], $4::bigint[]) AS u(a, b, k, n)
ON CONFLICT (app_id, bucket, %[2]s) DO UPDATE SET count = t.count + excluded.count`, table, dim.col, dim.typ, gr.typ)
				// The summary over all apps has a row per shard (its
				// shard column defaults to the session's, migration
				// 000024), so two shards' writers never wait on each
				// other's rows here.
				out[d][g+3] = fmt.Sprintf(`INSERT INTO facts.all_apps_%[1]s AS t (bucket, %[2]s, count)
SELECT b, k::%[3]s, n FROM unnest($1::%[4]s[], $2::text[], $3::bigint[]) AS u(b, k, n)
ON CONFLICT (bucket, %[2]s, shard) DO UPDATE SET count = t.count + excluded.count`, table, dim.col, dim.typ, gr.typ)
			}
		}
		return out
	}()
)

// rollupKey is one rollup row: app ("" over all apps), bucket and key (num
// for the device model's id, str otherwise).
type rollupKey struct {
	app    string
	bucket int64 // Unix seconds of the bucket's start (UTC)
	num    int32
	str    string
}

// rollupAcc counts the inserted events of one batch per rollup row. Events
// are first counted by what the rollups see of them (app, hour, country,
// model, OS, threat types: far fewer distinct values than events in a
// drain), one map update an event; batch then spreads those counts over
// the 24 tables.
type rollupAcc struct {
	n    int
	sigs map[eventSig]*sigCount
}

// eventSig is what the rollups see of an event; threats is its types
// joined by a NUL (no type contains one: CheckStorable).
type eventSig struct {
	app, country, os, threats string
	hour                      int64 // Unix seconds of the UTC hour
	model                     int32
}

type sigCount struct {
	n       int64
	threats []string
}

func (a *rollupAcc) add(e *wire.Event, model int32, threats []string) {
	a.n++
	if a.sigs == nil {
		a.sigs = map[eventSig]*sigCount{}
	}
	k := eventSig{app: e.App.ID, country: e.Country, os: e.Device.OS, model: model,
		hour: e.OccurredAt.Truncate(time.Hour).Unix()}
	if len(threats) > 0 {
		k.threats = strings.Join(threats, "\x00")
	}
	if c := a.sigs[k]; c != nil {
		c.n++
		return
	}
	a.sigs[k] = &sigCount{n: 1, threats: threats}
}

// counts spreads the signatures' counts over the rollup rows:
// counts[d][g] per app, counts[d][g+3] over all apps.
func (a *rollupAcc) counts() [4][6]map[rollupKey]int64 {
	var out [4][6]map[rollupKey]int64
	for d := range out {
		for t := range out[d] {
			out[d][t] = map[rollupKey]int64{}
		}
	}
	for k, c := range a.sigs {
		at := time.Unix(k.hour, 0).UTC()
		for g, gr := range rollupGrains {
			b := gr.bucket(at).Unix()
			keys := [3]rollupKey{{bucket: b, str: k.country}, {bucket: b, num: k.model}, {bucket: b, str: k.os}}
			for d, rk := range keys {
				out[d][g+3][rk] += c.n
				rk.app = k.app
				out[d][g][rk] += c.n
			}
			for _, th := range c.threats {
				rk := rollupKey{bucket: b, str: th}
				out[3][g+3][rk] += c.n
				rk.app = k.app
				out[3][g][rk] += c.n
			}
		}
	}
	return out
}

// batch returns the upserts, one per rollup table with rows.
func (a *rollupAcc) batch() *pgx.Batch {
	b := &pgx.Batch{}
	counts := a.counts()
	for d := range rollupDims {
		for t := range 6 {
			m := counts[d][t]
			if len(m) == 0 {
				continue
			}
			keys := make([]rollupKey, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			slices.SortFunc(keys, func(x, y rollupKey) int {
				return cmp.Or(cmp.Compare(x.app, y.app), cmp.Compare(x.bucket, y.bucket),
					cmp.Compare(x.num, y.num), cmp.Compare(x.str, y.str))
			})
			apps := make([]string, len(keys))
			buckets := make([]time.Time, len(keys))
			ks := make([]string, len(keys))
			ns := make([]int64, len(keys))
			for i, k := range keys {
				apps[i], buckets[i], ns[i] = k.app, time.Unix(k.bucket, 0).UTC(), m[k]
				ks[i] = k.str
				if d == 1 {
					ks[i] = fmt.Sprint(k.num)
				}
			}
			if t < 3 {
				b.Queue(rollupSQL[d][t], apps, buckets, ks, ns)
			} else {
				b.Queue(rollupSQL[d][t], buckets, ks, ns)
			}
		}
	}
	return b
}
