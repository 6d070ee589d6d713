package retention_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"threatview/retention"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/store"
)

// An erasure rewrites an archived month without the subject: the new
// version lacks the subject's rows and holds every other row unchanged, the
// old version is gone, the record names the new one, cleanup accepts it and
// a restore from it brings back exactly the remaining rows.
func TestArchiver_RewriteWithout(t *testing.T) {
	ctx := context.Background()
	url, db := retentiontest.Postgres(t)
	month := retentiontest.Month(-2)
	retentiontest.FillPostgres(t, db, month, 40)
	// Two devices of one app, three events each, in the archived month.
	for _, dev := range []string{"erased-dev", "kept-dev"} {
		if _, err := db.ExecContext(ctx, `
			INSERT INTO events.events (id, received_at, occurred_at, type, app_id, app_version, device_id, device_model,
			       manufacturer, os, os_version, country, client_ip, token_id, request_id, payload)
			SELECT gen_random_uuid(), received_at + interval '1 second', occurred_at, type, 'app-priv', app_version, $1,
			       device_model, manufacturer, os, os_version, country, client_ip, token_id, request_id, payload
			  FROM events.events WHERE received_at >= $2 AND received_at < $3 ORDER BY received_at LIMIT 3`,
			dev, month, month.AddDate(0, 1, 0)); err != nil {
			t.Fatal(err)
		}
	}
	src := retentiontest.EventsSource(t, url)
	st, err := store.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := &retention.Archiver{Src: src, Store: st, ChunkRows: 7, Log: quiet}
	if _, err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := src.Record(ctx, "events.events", month)
	if err != nil {
		t.Fatal(err)
	}
	prefix := retention.Prefix("events.events", month)

	// The erasure deletes the subject's rows from the database, then
	// rewrites the archive.
	if _, err := db.ExecContext(ctx, `DELETE FROM events.events WHERE app_id = 'app-priv' AND device_id = 'erased-dev'`); err != nil {
		t.Fatal(err)
	}
	p := retentiontest.Find(t, src, "events.events", month)
	wantRows, wantSum, err := retention.ContentHash(ctx, src, p)
	if err != nil {
		t.Fatal(err)
	}
	drop := subject("app-priv", "erased-dev")
	rw, changed, err := a.RewriteWithout(ctx, "events.events", month, drop)
	if err != nil || !changed {
		t.Fatalf("RewriteWithout = %v, %v", changed, err)
	}
	if rw.RowsRemoved != 3 || rw.Rows != wantRows || rw.Rows != before.Rows-3 || rw.ContentSHA256 != wantSum {
		t.Errorf("rewrite = %+v; want 3 removed, %d rows %s", rw, wantRows, wantSum)
	}
	after, err := src.Record(ctx, "events.events", month)
	if err != nil {
		t.Fatal(err)
	}
	if after.Rows != wantRows || after.ContentSHA256 != wantSum || after.ManifestSHA256 == before.ManifestSHA256 ||
		after.Location == before.Location || !after.VerifiedAt.After(before.VerifiedAt) {
		t.Errorf("record after rewrite = %+v, before %+v", after, before)
	}
	if !strings.HasSuffix(strings.TrimSuffix(after.Location, "/"), "/v2") {
		t.Errorf("new version at %s, want .../v2", after.Location)
	}
	// The old version (directly under the month) is gone, every object of it.
	keys, err := st.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix+"v2/") {
			t.Errorf("object %s of the old version left", k)
		}
	}
	// A second rewrite finds nothing to drop and writes nothing.
	if _, changed, err := a.RewriteWithout(ctx, "events.events", month, drop); err != nil || changed {
		t.Errorf("second RewriteWithout = %v, %v; want nothing to do", changed, err)
	}

	// Cleanup accepts the rewritten archive and drops the month; a restore
	// from it brings back the other device and no row of the subject.
	cl := &retention.Cleaner{Src: src, Months: 1, RequireArchive: true, Store: st, Log: quiet}
	if _, err := cl.Run(ctx); err != nil {
		t.Fatalf("cleanup refused the rewritten archive: %v", err)
	}
	if _, err := a.Restore(ctx, "events.events", month); err != nil {
		t.Fatal(err)
	}
	n, sum, err := retention.ContentHash(ctx, src, retentiontest.Find(t, src, "events.events", month))
	if err != nil || n != wantRows || sum != wantSum {
		t.Errorf("restored %d rows %s (%v), want %d rows %s", n, sum, err, wantRows, wantSum)
	}
	for dev, want := range map[string]int{"erased-dev": 0, "kept-dev": 3} {
		if got := count(t, db, `SELECT count(*) FROM events.events WHERE app_id = 'app-priv' AND device_id = $1`, dev); got != want {
			t.Errorf("%s has %d rows after restore, want %d", dev, got, want)
		}
	}
}

func subject(app, device string) func(line []byte) (bool, error) {
	return func(line []byte) (bool, error) {
		var row struct {
			AppID    string `json:"app_id"`
			DeviceID string `json:"device_id"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return false, errors.New("archive row is not JSON")
		}
		return row.AppID == app && row.DeviceID == device, nil
	}
}

func count(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
