package retentiontest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/retention"
	"threatview/retention/mariadb"
	"threatview/retention/privacy"
)

// EraseArchives checks an erasure's rewrite of the supplementary (late)
// archives and the audit archives against real events and audit databases
// and st: a month of events is archived and dropped, late events of two
// devices of one app are archived beside it, and a month of audit rows whose
// bodies name the devices is archived; privacy.ArchiveRewriter then erases
// one device. The late archive is rewritten without its rows (a new
// verified archive recorded, the old one's objects gone) and a restore
// brings back the other device's late row and none of the subject's; the
// audit archive is rewritten with exactly the subject's bodies set to null
// (the same id in another app's body kept), every other column of every row
// as it was (seq, leaf_hash, body_sha256 among them), its record moved to
// the new version; each rewrite is audited; a second run finds nothing.
func EraseArchives(t *testing.T, st retention.Store) {
	t.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	month := Month(-2)

	// Events: archived, dropped, then late events of the subject and of
	// another device, archived beside.
	url, db := Postgres(t)
	FillPostgres(t, db, month, 30)
	src := EventsSource(t, url)
	ev := &retention.Archiver{Src: src, Store: st, ChunkRows: 8, Log: quiet}
	if _, err := ev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	cl := &retention.Cleaner{Src: src, Months: 1, RequireArchive: true, Store: st, Log: quiet}
	if _, err := cl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for i, dev := range []string{"erased-dev", "erased-dev", "kept-dev"} {
		if _, err := db.ExecContext(ctx, `INSERT INTO events.late_events (id, received_at, occurred_at, type, app_id, device_id, country, payload, reason)
			VALUES (gen_random_uuid(), $1::timestamptz + $2 * interval '1 day', $1, 'app.startup', 'app-priv', $3, 'FR', '{"n": 1}', 'month archived and dropped')`,
			month, i+1, dev); err != nil {
			t.Fatal(err)
		}
	}
	late := &retention.Archiver{Src: src, Store: st, ChunkRows: 8, Log: quiet, Late: true}
	if sum, err := late.Run(ctx); err != nil || sum.Rows != 3 {
		t.Fatalf("archiver --late = %+v, %v; want 3 rows", sum, err)
	}
	var oldLate string
	if err := db.QueryRowContext(ctx, `SELECT prefix FROM events.late_archives`).Scan(&oldLate); err != nil {
		t.Fatal(err)
	}

	// Audit: rows of the month, three with bodies naming the devices.
	dsn, adb := MariaDB(t)
	FillMariaDB(t, adb, month, 12)
	bodies := []struct{ app, body string }{
		{"app-priv", `{"events":[{"device_id":"erased-dev","type":"app.startup"}]}`},
		{"app-priv", `{"events":[{"device_id":"kept-dev","type":"app.startup"}]}`},
		{"app-other", `{"events":[{"device_id":"erased-dev","type":"app.startup"}]}`},
	}
	for i, b := range bodies {
		if _, err := adb.ExecContext(ctx, `INSERT INTO audit_events (id, time, actor_token_id, actor_app_id, action, resource,
			outcome, user_agent, request_id, event_count, body_sha256, body, seq, leaf_hash)
			VALUES (UNHEX(REPLACE(UUID(), '-', '')), ?, 'tok', ?, 'events.post', '/v1/events', 202, 'ua', ?, 1, UNHEX(SHA2(?, 256)), ?, ?, UNHEX(SHA2(?, 256)))`,
			month.AddDate(0, 0, 3+i), b.app, fmt.Sprintf("body-%d", i), b.body, b.body, 1000+i, fmt.Sprintf("leaf-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	asrc, err := mariadb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(asrc.Close)
	au := &retention.Archiver{Src: asrc, Store: st, ChunkRows: 5, Log: quiet}
	if _, err := au.Run(ctx); err != nil {
		t.Fatal(err)
	}
	before := archivedRows(t, au, month)
	// The erasure has already redacted the live rows; the archive is what
	// this checks.
	s := privacy.Subject{AppID: "app-priv", DeviceID: "erased-dev"}
	log := &auditLog{}
	w := &privacy.ArchiveRewriter{Archiver: ev, AuditArchiver: au, Audit: log, Log: quiet}
	rw, err := w.Rewrite(ctx, "e-1", s)
	if err != nil {
		t.Fatalf("Rewrite = %+v, %v", rw, err)
	}
	var gotLate, gotAudit bool
	for _, r := range rw {
		switch {
		case r.Late:
			gotLate = r.RowsRemoved == 2 && r.Rows == 1 && r.Table == "events.events"
		case r.Table == "audit_events":
			gotAudit = r.RowsRedacted == 1 && r.RowsRemoved == 0 && r.Rows == int64(len(before))
		default:
			t.Errorf("rewrote %+v: the events archive holds no row of the subject", r)
		}
	}
	if !gotLate || !gotAudit || len(rw) != 2 {
		t.Fatalf("rewrites %+v: want the late archive (2 removed, 1 kept) and the audit month (1 body redacted)", rw)
	}
	if len(log.recs) != 2 || log.recs[0].Action != "privacy.archive.rewrite" || log.recs[1].Resource != rw[1].OldLocation {
		t.Errorf("audit records %+v for rewrites %+v", log.recs, rw)
	}

	// Late: the record names the new archive, the old one's objects are gone.
	var newLate string
	var rows int64
	if err := db.QueryRowContext(ctx, `SELECT prefix, row_count FROM events.late_archives`).Scan(&newLate, &rows); err != nil {
		t.Fatal(err)
	}
	if newLate == oldLate || rows != 1 {
		t.Errorf("late record %s (%d rows), was %s: want the new archive of 1 row", newLate, rows, oldLate)
	}
	if keys, err := st.List(ctx, oldLate); err != nil || len(keys) != 0 {
		t.Errorf("objects of the old late archive left: %v (%v)", keys, err)
	}

	// Audit: only the subject's body is gone; every other column stays.
	after := archivedRows(t, au, month)
	if len(after) != len(before) {
		t.Fatalf("audit archive has %d rows, had %d", len(after), len(before))
	}
	redacted := 0
	for id, b := range before {
		a := after[id]
		for k, v := range b {
			if k == "body" && a[k] == nil && v != nil {
				body, _ := base64.StdEncoding.DecodeString(*v)
				if !strings.Contains(string(body), `"erased-dev"`) || *b["actor_app_id"] != "app-priv" {
					t.Errorf("row %s: body %s of app %s redacted", id, body, *b["actor_app_id"])
				}
				redacted++
				continue
			}
			if (v == nil) != (a[k] == nil) || (v != nil && *v != *a[k]) {
				t.Errorf("row %s column %s changed by the rewrite", id, k)
			}
		}
	}
	if redacted != 1 {
		t.Errorf("%d bodies redacted in the audit archive, want 1", redacted)
	}

	// A restore of the events month brings back the kept device's late row
	// and none of the subject's.
	if _, err := ev.Restore(ctx, "events.events", month); err != nil {
		t.Fatal(err)
	}
	for dev, want := range map[string]int{"erased-dev": 0, "kept-dev": 1} {
		if got := count(t, db, `SELECT count(*) FROM events.events WHERE app_id = 'app-priv' AND device_id = $1`, dev); got != want {
			t.Errorf("%s: %d rows after restore, want %d", dev, got, want)
		}
	}
	if rw, err := w.Rewrite(ctx, "e-1", s); err != nil || len(rw) != 0 {
		t.Errorf("second Rewrite = %+v, %v; want nothing", rw, err)
	}
}

// archivedRows reads the audit archive of month: each row's columns by its
// id.
func archivedRows(t *testing.T, a *retention.Archiver, month time.Time) map[string]map[string]*string {
	t.Helper()
	out := map[string]map[string]*string{}
	err := a.ReadArchive(context.Background(), "audit_events", month, func(line []byte) error {
		var row map[string]*string
		if err := json.Unmarshal(line, &row); err != nil {
			return err
		}
		out[*row["id"]] = row
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// auditLog collects audit records.
type auditLog struct{ recs []wire.AuditRecord }

func (l *auditLog) Audit(_ context.Context, rec wire.AuditRecord) error {
	l.recs = append(l.recs, rec)
	return nil
}
