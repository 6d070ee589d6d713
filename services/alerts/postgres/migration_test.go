package postgres_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"threatview/alerts/internal/pgtest"
	"threatview/alerts/postgres"
	"threatview/platform/testenv"
)

// TestMigration000023_CursorsKeepTheirPlace upgrades an events DB whose
// outbox was numbered in one commit order: its rows become shard 0's, and
// each cursor keeps its place in every shard, shard 0 and a shard that
// writes only afterwards. Down goes back to one commit order: each cursor
// at its least place over the shards with rows.
func TestMigration000023_CursorsKeepTheirPlace(t *testing.T) {
	url := testenv.MustPostgres(t)
	ctx := context.Background()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("../../../migrations/events"), goose.WithAllowOutofOrder(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 22); err != nil {
		t.Fatalf("migrate up to 000022: %v", err)
	}
	for _, s := range p.ListSources() {
		if s.Version > 23 {
			if _, err := p.ApplyVersion(ctx, s.Version, true); err != nil {
				t.Fatalf("apply %d: %v", s.Version, err)
			}
		}
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	// Rows 1 to 6 in one commit order; the counter has folded 3 of them, a
	// forwarder has sent all 6.
	exec(`INSERT INTO alerts.outbox (event_id, app_id, received_at, occurred_at, type, threats)
		SELECT gen_random_uuid(), 'app-' || i, now(), now(), 'app.startup', '{hooking}' FROM generate_series(1, 6) i`)
	var seqs []int64
	rows, err := db.QueryContext(ctx, `SELECT seq FROM alerts.outbox ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, s)
	}
	rows.Close()
	fwd := "fwd:00000000-0000-4000-8000-000000000023"
	exec(`INSERT INTO alerts.cursors (name, seq) VALUES ('counter', $1), ($2, $3)`, seqs[2], fwd, seqs[5])

	if _, err := p.ApplyVersion(ctx, 23, true); err != nil {
		t.Fatalf("apply 000023: %v", err)
	}
	st, err := postgres.Open(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for name, want := range map[string]int64{"counter": seqs[2], fwd: seqs[5]} {
		pos, err := st.Cursor(ctx, name)
		if err != nil || pos.Base != want || len(pos.Shards) != 0 {
			t.Fatalf("Cursor(%s) after 000023 = %+v, %v; want base %d, no shard of its own", name, pos, err, want)
		}
	}
	// A shard that writes only after the migration: its rows are read from
	// the old cursors' places.
	pgtest.Insert(t, pgtest.ShardPool(t, url, 1), 23, 0, 2, "app-new", time.Now(), "root")
	counter, err := st.Cursor(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Outbox(ctx, counter, 100)
	if err != nil || len(got) != 5 {
		t.Fatalf("Outbox after the counter = %d rows, %v; want shard 0's last 3 and shard 1's 2", len(got), err)
	}
	for i, e := range got {
		if wantShard := int16(i / 3); e.Shard != wantShard || (i < 3 && e.Seq != seqs[3+i]) {
			t.Fatalf("row %d after the counter = shard %d seq %d, want shard %d (seq %v after %d)", i, e.Shard, e.Seq, wantShard, seqs, seqs[2])
		}
	}
	sent, err := st.Cursor(ctx, fwd)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Outbox(ctx, sent, 100); err != nil || len(got) != 2 || got[0].Shard != 1 {
		t.Fatalf("Outbox after the forwarder = %+v, %v; want shard 1's 2 rows", got, err)
	}
	if n, err := st.Fold(ctx, 100); err != nil || n != 5 {
		t.Fatalf("Fold = %d, %v; want 5", n, err)
	}
	counter, err = st.Cursor(ctx, "counter")
	if err != nil || counter.In(0) != seqs[5] || counter.In(1) != got[4].Seq {
		t.Fatalf("counter after Fold = %+v, %v; want shard 0 at %d, shard 1 at %d", counter, err, seqs[5], got[4].Seq)
	}

	if _, err := p.ApplyVersion(ctx, 23, false); err != nil {
		t.Fatalf("down 000023: %v", err)
	}
	// One commit order again: the counter at the lesser of its places in
	// shards 0 and 1, the forwarder (no place of its own) at its base.
	for name, want := range map[string]int64{"counter": seqs[5], fwd: seqs[5]} {
		var seq int64
		if err := db.QueryRowContext(ctx, `SELECT seq FROM alerts.cursors WHERE name = $1`, name).Scan(&seq); err != nil || seq != want {
			t.Fatalf("cursor %s after down 000023 = %d, %v; want %d", name, seq, err, want)
		}
	}
	var left int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_schema = 'alerts' AND table_name = 'outbox' AND column_name = 'shard'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("alerts.outbox.shard after down: %d, %v; want gone", left, err)
	}
	exec(`INSERT INTO alerts.outbox (event_id, app_id, received_at, occurred_at, type, threats)
		VALUES (gen_random_uuid(), 'app-after', now(), now(), 'app.startup', '{hooking}')`)
	if _, err := p.ApplyVersion(ctx, 23, true); err != nil {
		t.Fatalf("up 000023 again: %v", err)
	}
	if pos, err := st.Cursor(ctx, "counter"); err != nil || pos.Base != seqs[5] || len(pos.Shards) != 0 {
		t.Fatalf("counter after up again = %+v, %v", pos, err)
	}
}
