package storage

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/loadtest/procstat"
	"threatview/migrations"
	"threatview/platform/testenv"
)

// BenchmarkCopyCeiling is the PostgreSQL insert ceiling beside which the
// processor's drain rate is read (docs/scaling.md): rows shaped like the
// processor's (the same columns, a payload of about padBytes), COPYed
// straight into events.events (the same partitioned table, its primary key
// and nothing else: no duplicate check, no facts, no rollup work) in
// transactions of 2,000 rows, the processor's batch, on a fresh database.
// It reports events a second and PostgreSQL's CPU per event, read from
// /proc for the stack's postgres process tree.
//
//	go test -run '^$' -bench CopyCeiling -benchtime 1x ./storage/
//
// With THREATVIEW_COPY_CEILING_URL set (make bench sets the stack's events
// database) it also runs table=stack: the same COPY into that database's
// events.events, as large as the drain finds it, with random (version 4)
// ids as the drain's events have, each transaction rolled back so nothing
// stays: the ceiling of the same rows on the same table at the same time.
func BenchmarkCopyCeiling(b *testing.B) {
	for _, pad := range []int{260, 1800} {
		b.Run(fmt.Sprintf("payload=%d", pad), func(b *testing.B) { copyCeiling(b, "", 200_000, pad) })
	}
	if url := os.Getenv("THREATVIEW_COPY_CEILING_URL"); url != "" {
		b.Run("payload=260/table=stack", func(b *testing.B) { copyCeiling(b, url, 200_000, 260) })
	}
}

// copyCeiling COPYs rows of about pad bytes of payload: into a fresh
// database (stackURL blank: structured ids, committed) or into the
// database at stackURL (random ids, rolled back).
func copyCeiling(b *testing.B, stackURL string, rows, pad int) {
	ctx := context.Background()
	url := stackURL
	if url == "" {
		url = testenv.MustPostgres(b)
		db, err := sql.Open("pgx", url)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if _, err := migrations.Up(ctx, db, migrations.Events); err != nil {
			b.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	procs, err := procstat.FromPidDir(filepath.Join(testenv.Root(b), ".run", "pid"))
	if err != nil {
		b.Fatal(err)
	}
	var pg []procstat.Proc
	for _, p := range procs {
		if p.Name == "postgres" {
			pg = append(pg, p)
		}
	}
	cols := []string{"id", "received_at", "occurred_at", "type", "app_id", "app_version", "device_id",
		"device_model", "manufacturer", "os", "os_version", "country", "client_ip", "token_id", "request_id", "payload"}
	payload := []byte(`{"threats":["root"],"attributes":{"pad":"` + strings.Repeat("x", pad) + `"}}`)
	ip := netip.MustParseAddr("192.0.2.1")
	const batch = 2000
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		sampler := procstat.StartCPU(ctx, pg)
		start := time.Now()
		for done := 0; done < rows; done += batch {
			now := time.Now()
			src := make([][]any, batch)
			for i := range src {
				id := uuid(it, done+i)
				if stackURL != "" {
					id = randomUUID()
				}
				src[i] = []any{id, now, now, "app.startup", "bench-app", "1.0.0", "device-1",
					"Pixel 8", "Google", "android", "14", "GB", ip, "tok", "req", payload}
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events", "events"}, cols, pgx.CopyFromRows(src)); err != nil {
				b.Fatal(err)
			}
			end := tx.Commit
			if stackURL != "" {
				end = tx.Rollback
			}
			if err := end(ctx); err != nil {
				b.Fatal(err)
			}
		}
		wall := time.Since(start)
		var cpu float64
		for _, u := range sampler.Stop() {
			cpu += u.CPUSeconds
		}
		b.ReportMetric(float64(rows)/wall.Seconds(), "events/s")
		b.ReportMetric(cpu/float64(rows)*1e6, "pg-cpu-µs/event")
	}
}

// randomUUID returns a random version 4 UUID.
func randomUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// uuid returns a distinct version-4-shaped UUID for (iteration, row).
func uuid(it, n int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", it, n>>16&0xffff, n>>4&0xfff, n&0xfff, n*2654435761&0xffffffffffff)
}
