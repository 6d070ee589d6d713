package privacy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"threatview/platform/wire"
	"threatview/retention"
)

// ArchiveRewriter rewrites the archives that hold a subject's rows as new
// verified versions without them (see retention.Archiver.RewriteEach):
// every archived month of events.events (and of facts.facts, its facts),
// every supplementary (late) archive of those months, and every archived
// month of the audit DB's audit_events whose rows' bodies hold the subject
// (the body set to null, the row with its body_sha256 and leaf hash kept,
// so the audit trail's proofs still verify). It audits each removal of an
// old version (action privacy.archive.rewrite, the erasure as actor
// context).
type ArchiveRewriter struct {
	// Archiver is the events archiver: the events DB as its source, the
	// ARCHIVE_TARGET store.
	Archiver *retention.Archiver
	// AuditArchiver is the audit DB's archiver (the same store); nil when
	// the service has no audit DB.
	AuditArchiver *retention.Archiver
	// Rollups, when set, subtracts the removed facts of a month archived
	// and dropped from the rollups (the facts of a month still in the
	// database were subtracted when its events were deleted).
	Rollups *PG
	// Audit records each rewrite; nil only in tests.
	Audit Auditor
	Log   *slog.Logger

	// present caches, per archived month of events.events, which subjects
	// its archive holds, so a queue of erasures reads each month once, not
	// once per erasure (see holds).
	mu      sync.Mutex
	present map[time.Time]monthSubjects
}

// monthSubjects is the set of subjects one version of a month's events
// archive holds (manifest names the version).
type monthSubjects struct {
	manifest string
	subjects map[Subject]bool
}

// maxCachedSubjects bounds one month's cached set (about 100 bytes each).
const maxCachedSubjects = 2_000_000

// holds tells whether the archive of month m (the version its record names)
// may hold a row of s: from the cache when it knows that version, else by
// reading the archive once and caching the subjects it holds. A month with
// more subjects than maxCachedSubjects is not cached ("maybe" each time).
func (w *ArchiveRewriter) holds(ctx context.Context, m time.Time, s Subject) (bool, error) {
	rec, err := w.Archiver.Src.Record(ctx, archivedTable, m)
	if err != nil {
		return false, err
	}
	w.mu.Lock()
	c, ok := w.present[m]
	w.mu.Unlock()
	if ok && c.manifest == rec.ManifestSHA256 {
		return c.subjects[s], nil
	}
	set := map[Subject]bool{}
	err = w.Archiver.ReadArchive(ctx, archivedTable, m, func(line []byte) error {
		if set == nil {
			return nil
		}
		var row archivedRow
		if err := json.Unmarshal(line, &row); err != nil {
			return fmt.Errorf("archived row is not a JSON object: %w", err)
		}
		// Both of the row's subjects: its device, and its user if any.
		set[Subject{AppID: row.AppID, DeviceID: row.DeviceID}] = true
		if row.User != "" {
			set[Subject{AppID: row.AppID, User: row.User}] = true
		}
		if len(set) > maxCachedSubjects {
			set = nil
		}
		return nil
	})
	if err != nil || set == nil {
		return true, err
	}
	w.mu.Lock()
	if w.present == nil {
		w.present = map[time.Time]monthSubjects{}
	}
	w.present[m] = monthSubjects{manifest: rec.ManifestSHA256, subjects: set}
	w.mu.Unlock()
	return set[s], nil
}

// forget records that the archive of month m, rewritten, no longer holds
// s: the cache moves to the new version without s.
func (w *ArchiveRewriter) forget(ctx context.Context, m time.Time, s Subject) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.present[m]
	if !ok {
		return
	}
	delete(w.present, m)
	rec, err := w.Archiver.Src.Record(ctx, archivedTable, m)
	if err != nil {
		return
	}
	delete(c.subjects, s)
	w.present[m] = monthSubjects{manifest: rec.ManifestSHA256, subjects: c.subjects}
}

// archivedTable is the table whose archives hold device ids; factsTable's
// archives hold the facts of its events (by event id, no device id), which
// are rewritten with them so each archive keeps matching its partition;
// auditTable's archives hold request bodies.
const (
	archivedTable = "events.events"
	factsTable    = "facts.facts"
	auditTable    = "audit_events"
)

// Rewrite rewrites every archive holding s and returns what it rewrote. It
// holds each database's retention lock while it rewrites that database's
// archives, so no archiver or cleanup runs beside it; a busy lock or an
// unreachable store or database is ErrUnavailable (the erasure is retried).
func (w *ArchiveRewriter) Rewrite(ctx context.Context, erasureID string, s Subject) ([]retention.Rewritten, error) {
	out := []retention.Rewritten{}
	out, err := w.rewriteEvents(ctx, erasureID, s, out)
	if err != nil || w.AuditArchiver == nil {
		return out, err
	}
	return w.rewriteAudit(ctx, erasureID, s, out)
}

// rewriteEvents rewrites the events DB's archives holding s: per month the
// facts of its events, its events, and its late events.
func (w *ArchiveRewriter) rewriteEvents(ctx context.Context, erasureID string, s Subject, out []retention.Rewritten) ([]retention.Rewritten, error) {
	unlock, err := w.Archiver.Src.Lock(ctx)
	if err != nil {
		return out, fmt.Errorf("archives: %w: %w", ErrUnavailable, err)
	}
	defer unlock()
	archived, err := months(ctx, w.Archiver, archivedTable)
	if err != nil {
		return out, err
	}
	for _, m := range archived {
		// The facts of the subject's events first (found by event id in the
		// events archive), then the events: a retry after either step still
		// finds the subject's events in the events archive.
		ids := map[string]bool{}
		// The subject's archived events, kept for the investigation rollups
		// when the month was dropped.
		var events [][]byte
		held, err := w.holds(ctx, m, s)
		if err == nil && held {
			match := subjectsRow(s)
			err = w.Archiver.ReadArchive(ctx, archivedTable, m, func(line []byte) error {
				row, ok, err := match(line)
				if ok && !ids[row.ID] {
					ids[row.ID] = true
					events = append(events, bytes.Clone(line))
				}
				return err
			})
		}
		// The facts removed, kept for the rollups when the month was dropped.
		facts := map[string][]byte{}
		steps := []struct {
			table string
			edit  retention.Edit
		}{{factsTable, retention.DropRows(factOf(ids, facts))}, {archivedTable, retention.DropRows(subjectRow(s))}}
		if len(ids) == 0 {
			steps = nil
		}
		dropped := false
		if len(ids) > 0 && w.Rollups != nil && err == nil {
			dropped, err = w.Rollups.Dropped(ctx, m)
		}
		for _, st := range steps {
			if err != nil {
				break
			}
			var rw retention.Rewritten
			var changed bool
			if rw, changed, err = w.Archiver.RewriteEach(ctx, st.table, m, st.edit); err == nil && changed {
				if st.table == factsTable && dropped {
					// After the rewrite: a retry finds these facts no more,
					// so they are never subtracted twice.
					rw.RollupRows, err = w.decrementArchived(ctx, facts)
				}
				if st.table == archivedTable && dropped {
					// After the rewrite, as for the facts: a retry finds
					// these events no more.
					var b Batch
					b, err = w.Rollups.DecrementArchivedInv(ctx, s.AppID, events)
					rw.RollupRows += b.RollupRows
				}
				if st.table == archivedTable {
					w.forget(ctx, m, s)
				}
				out = append(out, rw)
				w.audited(ctx, erasureID, rw)
			}
		}
		// The month's supplementary archives: late events of the subject.
		if err == nil {
			var late []retention.Rewritten
			late, err = w.Archiver.RewriteLate(ctx, archivedTable, m, retention.DropRows(subjectRow(s)))
			for _, rw := range late {
				out = append(out, rw)
				w.audited(ctx, erasureID, rw)
			}
		}
		if err != nil {
			return out, rewriteErr(m, err)
		}
	}
	return out, nil
}

// rewriteAudit rewrites the audit DB's archived months holding a body of
// s with that body set to null.
func (w *ArchiveRewriter) rewriteAudit(ctx context.Context, erasureID string, s Subject, out []retention.Rewritten) ([]retention.Rewritten, error) {
	unlock, err := w.AuditArchiver.Src.Lock(ctx)
	if err != nil {
		return out, fmt.Errorf("audit archives: %w: %w", ErrUnavailable, err)
	}
	defer unlock()
	archived, err := months(ctx, w.AuditArchiver, auditTable)
	if err != nil {
		return out, err
	}
	for _, m := range archived {
		rw, changed, err := w.AuditArchiver.RewriteEach(ctx, auditTable, m, redactBody(s))
		if err != nil {
			return out, rewriteErr(m, err)
		}
		if changed {
			out = append(out, rw)
			w.audited(ctx, erasureID, rw)
		}
	}
	return out, nil
}

// rewriteErr keeps a verification failure as it is (the erasure fails) and
// makes any other error ErrUnavailable (the erasure is retried).
func rewriteErr(m time.Time, err error) error {
	if errors.Is(err, retention.ErrVerify) {
		return err
	}
	return fmt.Errorf("archive %s: %w: %w", retention.MonthString(m), ErrUnavailable, err)
}

// redactBody matches an archived audit row of s's app whose body holds the
// device id as a JSON string, as AuditDB.RedactBatch does in the database,
// and returns the row with "body": null, its other columns (body_sha256,
// seq, leaf_hash among them) as they were and in their order.
func redactBody(s Subject) retention.Edit {
	n := []byte(needle(s.key()))
	maybe := mayHold(s.AppID)
	return func(line []byte) ([]byte, bool, error) {
		if !maybe(line) {
			return nil, false, nil // not a row of the subject's app
		}
		var row struct {
			AppID *string `json:"actor_app_id"`
			Body  *string `json:"body"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return nil, false, fmt.Errorf("archived audit row is not a JSON object: %w", err)
		}
		if row.AppID == nil || *row.AppID != s.AppID || row.Body == nil {
			return nil, false, nil
		}
		// A binary column is archived in base64 (the body is a MEDIUMBLOB).
		body, err := base64.StdEncoding.DecodeString(*row.Body)
		if err != nil {
			body = []byte(*row.Body)
		}
		if !bytes.Contains(body, n) {
			return nil, false, nil
		}
		out, err := withNull(line, "body")
		return out, err == nil, err
	}
}

// withNull returns the JSON object line with column's value null, every
// other member as it was, in order.
func withNull(line []byte, column string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("archived row is not a JSON object: %v", err)
	}
	out := []byte{'{'}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		k, _ := json.Marshal(key)
		out = append(append(out, k...), ':')
		if key == column {
			v = json.RawMessage("null")
		}
		out = append(out, v...)
	}
	return append(out, '}'), nil
}

// audited records the removal of rw's old version.
func (w *ArchiveRewriter) audited(ctx context.Context, erasureID string, rw retention.Rewritten) {
	if w.Audit == nil {
		return
	}
	err := w.Audit.Audit(context.WithoutCancel(ctx), wire.AuditRecord{ID: uuid.Must(uuid.NewV7()).String(),
		Time: time.Now().UTC(), ActorToken: "erasure:" + erasureID, Action: "privacy.archive.rewrite",
		Resource: rw.OldLocation, Outcome: 200, RequestID: erasureID})
	if err != nil {
		// The rewrite happened; the report lists it whatever the audit
		// logger says.
		w.Log.Error("archive rewrite not audited", "erasure_id", erasureID, "location", rw.OldLocation, "err", err)
	}
}

// factOf matches an archived facts row of one of the events ids and
// keeps a copy of it in matched, by event id.
func factOf(ids map[string]bool, matched map[string][]byte) func(line []byte) (bool, error) {
	return func(line []byte) (bool, error) {
		var row struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return false, fmt.Errorf("archived row is not a JSON object: %w", err)
		}
		if !ids[row.EventID] {
			return false, nil
		}
		if _, ok := matched[row.EventID]; !ok {
			matched[row.EventID] = bytes.Clone(line)
		}
		return true, nil
	}
}

// decrementArchived subtracts the facts removed from a dropped month's
// archive from the rollups and returns the rollup rows adjusted.
func (w *ArchiveRewriter) decrementArchived(ctx context.Context, facts map[string][]byte) (int64, error) {
	lines := make([][]byte, 0, len(facts))
	for _, l := range facts {
		lines = append(lines, l)
	}
	b, err := w.Rollups.DecrementArchived(ctx, lines)
	if err != nil {
		return 0, err
	}
	if b.Facts != int64(len(lines)) {
		return b.RollupRows, fmt.Errorf("rollups: %d of %d archived facts read", b.Facts, len(lines))
	}
	return b.RollupRows, nil
}

// months lists the months of table with an archive record in a's database.
func months(ctx context.Context, a *retention.Archiver, table string) ([]time.Time, error) {
	lister, ok := a.Src.(interface {
		ArchivedMonths(ctx context.Context, table string) ([]time.Time, error)
	})
	if !ok {
		return nil, errors.New("archives: the source cannot list its archive records")
	}
	m, err := lister.ArchivedMonths(ctx, table)
	if err != nil {
		return nil, fmt.Errorf("archives: %w: %w", ErrUnavailable, err)
	}
	return m, nil
}

// mayHold returns a quick test that an archive line may hold the string v
// as a JSON value: false only when the line cannot (v, as every exporter
// writes plain printable ASCII without quotes or backslashes, is not in
// it), so most lines of an archive are not parsed. A v with other
// characters, which exporters may escape differently, is always "maybe".
func mayHold(v string) func(line []byte) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return func([]byte) bool { return true }
		}
	}
	q := []byte(`"` + v + `"`)
	return func(line []byte) bool { return bytes.Contains(line, q) }
}

// archivedRow is what an erasure reads of an archived events (or late
// events) row: user_pseudonym is absent from months archived before the
// column existed (no user then).
type archivedRow struct {
	ID       string `json:"id"`
	AppID    string `json:"app_id"`
	DeviceID string `json:"device_id"`
	User     string `json:"user_pseudonym"`
}

// subjectsRow returns a parser of archived events rows that tells
// whether a row is s's. A line without s's device id (or pseudonym) as a
// JSON string is not parsed.
func subjectsRow(s Subject) func(line []byte) (archivedRow, bool, error) {
	maybe := mayHold(s.key())
	return func(line []byte) (archivedRow, bool, error) {
		var row archivedRow
		if !maybe(line) {
			return row, false, nil
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return row, false, fmt.Errorf("archived row is not a JSON object: %w", err)
		}
		return row, s.is(row.AppID, row.DeviceID, row.User), nil
	}
}

// subjectRow matches an archived events row of s.
func subjectRow(s Subject) func(line []byte) (bool, error) {
	match := subjectsRow(s)
	return func(line []byte) (bool, error) {
		_, ok, err := match(line)
		return ok, err
	}
}
