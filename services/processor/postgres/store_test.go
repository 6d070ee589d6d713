package postgres_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/platform/wire"
	"threatview/processor"
	"threatview/processor/internal/pgtest"
	"threatview/processor/postgres"
)

func mustStore(tb testing.TB) (*postgres.Store, *pgxpool.Pool) {
	tb.Helper()
	url, pool := pgtest.MustEventsDB(tb)
	s, err := postgres.Open(context.Background(), url, 4)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(s.Close)
	return s, pool
}

func write(t *testing.T, s *postgres.Store, events ...wire.Event) processor.WriteResult {
	t.Helper()
	res, err := s.WriteBatch(context.Background(), events)
	if err != nil {
		t.Fatalf("WriteBatch(%d events): %v", len(events), err)
	}
	return res
}

// counts returns the rows of events.events and facts.facts, and the events
// the rollups count.
func counts(t *testing.T, pool *pgxpool.Pool) [3]int {
	t.Helper()
	return [3]int{
		pgtest.Count(t, pool, "SELECT count(*) FROM events.events"),
		pgtest.Count(t, pool, "SELECT count(*) FROM facts.facts"),
		pgtest.Count(t, pool, "SELECT coalesce(sum(count), 0) FROM facts.all_apps_events_by_country_per_month"),
	}
}

func TestStore_WriteBatch(t *testing.T) {
	s, pool := mustStore(t)
	r := rand.New(rand.NewPCG(1, 2))
	now := time.Now().UTC().Truncate(time.Microsecond)
	thisMonth := time.Date(now.Year(), now.Month(), 1, 12, 0, 0, 0, time.UTC)

	t.Run("OK", func(t *testing.T) {
		before := counts(t, pool)
		e := pgtest.Event(r, now, time.Hour)
		sent := now.Add(-time.Second)
		e.SentAt = &sent
		e.Attributes = json.RawMessage(`{"a":[1,2]}`)
		if res := write(t, s, e, pgtest.Event(r, now, 0)); res != (processor.WriteResult{Stored: 2}) {
			t.Fatalf("WriteBatch = %+v, want 2 stored", res)
		}
		if got, want := counts(t, pool), [3]int{before[0] + 2, before[1] + 2, before[2] + 2}; got != want {
			t.Fatalf("counts = %v, want %v", got, want)
		}
		var country, ip string
		var payload map[string]any
		var occurred time.Time
		err := pool.QueryRow(context.Background(), `SELECT country, host(client_ip), payload, occurred_at
			FROM events.events WHERE id = $1`, e.ID).Scan(&country, &ip, &payload, &occurred)
		if err != nil {
			t.Fatalf("read back: %v", err)
		}
		if country != e.Country || ip != e.ClientIP || !occurred.Equal(e.OccurredAt) {
			t.Errorf("stored (%s, %s, %s), want (%s, %s, %s)", country, ip, occurred, e.Country, e.ClientIP, e.OccurredAt)
		}
		if payload["threats"] == nil || payload["attributes"] == nil || payload["sent_at"] != sent.Format(time.RFC3339Nano) {
			t.Errorf("payload = %v, want threats, attributes and sent_at %s", payload, sent.Format(time.RFC3339Nano))
		}
	})

	t.Run("SameBatchTwice", func(t *testing.T) {
		before := counts(t, pool)
		batch := []wire.Event{pgtest.Event(r, now, 0), pgtest.Event(r, now, 0), pgtest.Event(r, now, 0)}
		write(t, s, batch...)
		if res := write(t, s, batch...); res != (processor.WriteResult{Duplicates: 3}) {
			t.Fatalf("second WriteBatch = %+v, want 3 duplicates", res)
		}
		if got, want := counts(t, pool), [3]int{before[0] + 3, before[1] + 3, before[2] + 3}; got != want {
			t.Fatalf("counts = %v, want %v", got, want)
		}
	})

	t.Run("RepeatedInBatch", func(t *testing.T) {
		before := counts(t, pool)
		e := pgtest.Event(r, now, 0)
		later := e
		later.ReceivedAt = e.ReceivedAt.Add(time.Minute)
		if res := write(t, s, e, later, e); res != (processor.WriteResult{Stored: 1, Duplicates: 2}) {
			t.Fatalf("WriteBatch = %+v, want 1 stored, 2 duplicates", res)
		}
		if got, want := counts(t, pool), [3]int{before[0] + 1, before[1] + 1, before[2] + 1}; got != want {
			t.Fatalf("counts = %v, want %v", got, want)
		}
	})

	// A client re-send gets a new received_at; how far back the first copy
	// is still found is documented in the package comment.
	resend := []struct {
		name       string
		first      time.Time
		again      time.Time
		wantStored int
	}{
		{"ResendSameMonth", thisMonth, thisMonth.Add(10 * 24 * time.Hour), 0},
		{"ResendNextMonth", thisMonth.AddDate(0, -1, 0), thisMonth, 0},
		{"ResendFromPreviousMonthStart", time.Date(now.Year(), now.Month()-1, 1, 0, 0, 0, 0, time.UTC), thisMonth.AddDate(0, 0, 20), 0},
		{"ResendTwoMonthsLaterIsStoredAgain", thisMonth.AddDate(0, -2, 0), thisMonth, 1},
		// Across the month boundary by a microsecond, both ways: a
		// redelivered older copy meets the newer one stored first.
		{"ResendAcrossMonthBoundary", thisMonth.Add(-12*time.Hour - time.Microsecond), thisMonth.Add(-12 * time.Hour), 0},
		{"OlderCopyAfterNewer", thisMonth, thisMonth.AddDate(0, -1, 0), 0},
	}
	for _, tc := range resend {
		t.Run(tc.name, func(t *testing.T) {
			e := pgtest.Event(r, tc.first, time.Hour)
			write(t, s, e)
			e.ReceivedAt = tc.again
			res := write(t, s, e)
			if res.Stored != tc.wantStored {
				t.Fatalf("re-send after %s: stored %d, want %d", tc.again.Sub(tc.first), res.Stored, tc.wantStored)
			}
			if got := pgtest.Count(t, pool, "SELECT count(*) FROM facts.facts WHERE event_id = $1", e.ID); got != 1+tc.wantStored {
				t.Fatalf("facts for %s = %d, want %d", e.ID, got, 1+tc.wantStored)
			}
		})
	}

	// The wire allows upper-case hex; PostgreSQL compares the 16 bytes.
	t.Run("UpperCaseIDIsTheSameEvent", func(t *testing.T) {
		e := pgtest.Event(r, now, 0)
		upper := e
		upper.ID = strings.ToUpper(e.ID)
		upper.ReceivedAt = e.ReceivedAt.Add(time.Second)
		if res := write(t, s, upper, e); res != (processor.WriteResult{Stored: 1, Duplicates: 1}) {
			t.Fatalf("WriteBatch(upper, lower) = %+v, want 1 stored, 1 duplicate", res)
		}
		if res := write(t, s, upper); res != (processor.WriteResult{Duplicates: 1}) {
			t.Fatalf("WriteBatch(upper) again = %+v, want 1 duplicate", res)
		}
	})

	t.Run("DeviceModelsOnce", func(t *testing.T) {
		a, b := pgtest.Event(r, now, 0), pgtest.Event(r, now, 0)
		a.Device.Manufacturer, a.Device.Model = "Acme", "Rocket 1"
		b.Device = a.Device
		write(t, s, a)
		write(t, s, b)
		if got := pgtest.Count(t, pool, "SELECT count(*) FROM facts.device_models_dim WHERE manufacturer = 'Acme' AND model = 'Rocket 1'"); got != 1 {
			t.Fatalf("dimension rows for Acme Rocket 1 = %d, want 1", got)
		}
		if got := pgtest.Count(t, pool, `SELECT count(DISTINCT f.device_model_id) FROM facts.facts f
			WHERE f.event_id IN ($1, $2)`, a.ID, b.ID); got != 1 {
			t.Fatalf("facts of the same model use %d ids, want 1", got)
		}
	})

	t.Run("MissingPartitionIsCreated", func(t *testing.T) {
		e := pgtest.Event(r, thisMonth.AddDate(0, 6, 0), 0)
		if res := write(t, s, e); res.Stored != 1 {
			t.Fatalf("WriteBatch six months ahead = %+v, want 1 stored", res)
		}
	})
}

// TestStore_RollupsExactAtEveryCommit writes batches across the last three
// days, with events up to 40 days late, redelivered batches and re-sent
// ids, and checks after batches along the way, not only at the end, that
// every rollup equals count(*) over events.events: no aggregator runs.
func TestStore_RollupsExactAtEveryCommit(t *testing.T) {
	s, pool := mustStore(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	now := time.Now().UTC()
	var sent []wire.Event
	unique := map[string]bool{}
	for i := 0; i < 60; i++ {
		received := now.Add(-time.Duration(r.Int64N(int64(72 * time.Hour))))
		batch := make([]wire.Event, 0, 60)
		for j := r.IntN(60) + 1; j > 0; j-- {
			spread := time.Duration(r.Int64N(int64(6 * time.Hour)))
			if r.IntN(10) == 0 {
				spread = 40 * 24 * time.Hour
			}
			e := pgtest.Event(r, received, spread)
			if len(sent) > 0 && r.IntN(8) == 0 {
				old := sent[r.IntN(len(sent))]
				old.ReceivedAt = received // a client re-send
				e = old
			}
			batch = append(batch, e)
		}
		if _, err := s.WriteBatch(ctx, batch); err != nil {
			t.Fatalf("WriteBatch: %v", err)
		}
		if r.IntN(5) == 0 { // a redelivery
			if _, err := s.WriteBatch(ctx, batch); err != nil {
				t.Fatalf("WriteBatch again: %v", err)
			}
		}
		for _, e := range batch {
			unique[e.ID] = true
		}
		sent = append(sent, batch...)
		if i%20 == 0 {
			pgtest.AssertRollupsExact(t, pool, len(unique))
		}
	}
	if got := pgtest.Count(t, pool, "SELECT count(*) FROM events.events"); got != len(unique) {
		t.Fatalf("events stored = %d, want %d unique", got, len(unique))
	}
	t.Logf("%d events sent, %d unique", len(sent), len(unique))
	pgtest.AssertRollupsExact(t, pool, len(unique))
}

// BenchmarkStore_WriteBatch measures the processor's database write alone:
// batches of 1000 new events, each batch one transaction (COPY, insert of
// events, facts and work items, commit).
func BenchmarkStore_WriteBatch(b *testing.B) {
	s, _ := mustStore(b)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 6))
	const size = 1000
	now := time.Now().UTC()
	next := func() []wire.Event {
		batch := make([]wire.Event, size)
		for i := range batch {
			batch[i] = pgtest.Event(r, now, time.Hour)
		}
		return batch
	}
	events := 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		batch := next()
		b.StartTimer()
		res, err := s.WriteBatch(ctx, batch)
		if err != nil {
			b.Fatalf("WriteBatch: %v", err)
		}
		events += res.Stored
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
