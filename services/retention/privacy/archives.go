package privacy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"threatview/platform/wire"
	"threatview/retention"
)

// ArchiveRewriter rewrites the archived months of events.events that hold
// a subject's rows as new verified versions without them (see
// retention.Archiver.RewriteWithout) and audits each removal of an old
// version (action privacy.archive.rewrite, the erasure as actor context).
type ArchiveRewriter struct {
	// Archiver is the events archiver: the events DB as its source, the
	// ARCHIVE_TARGET store.
	Archiver *retention.Archiver
	// Audit records each rewrite; nil only in tests.
	Audit Auditor
	Log   *slog.Logger
}

// archivedTable is the table whose archives hold device ids; factsTable's
// archives hold the facts of its events (by event id, no device id), which
// are rewritten with them so each archive keeps matching its partition.
const (
	archivedTable = "events.events"
	factsTable    = "facts.facts"
)

// Rewrite rewrites every archived month holding s and returns what it
// rewrote. It holds the events DB's retention lock, so no archiver or
// cleanup runs beside it; a busy lock or an unreachable store or database
// is ErrUnavailable (the erasure is retried).
func (w *ArchiveRewriter) Rewrite(ctx context.Context, erasureID string, s Subject) ([]retention.Rewritten, error) {
	out := []retention.Rewritten{}
	unlock, err := w.Archiver.Src.Lock(ctx)
	if err != nil {
		return out, fmt.Errorf("archives: %w: %w", ErrUnavailable, err)
	}
	defer unlock()
	archived, err := w.months(ctx)
	if err != nil {
		return out, err
	}
	for _, m := range archived {
		// The facts of the subject's events first (found by event id in the
		// events archive), then the events: a retry after either step still
		// finds the subject's events in the events archive.
		ids := map[string]bool{}
		err := w.Archiver.ReadArchive(ctx, archivedTable, m, func(line []byte) error {
			var row struct {
				ID       string `json:"id"`
				AppID    string `json:"app_id"`
				DeviceID string `json:"device_id"`
			}
			if err := json.Unmarshal(line, &row); err != nil {
				return fmt.Errorf("archived row is not a JSON object: %w", err)
			}
			if row.AppID == s.AppID && row.DeviceID == s.DeviceID {
				ids[row.ID] = true
			}
			return nil
		})
		if err == nil && len(ids) == 0 {
			continue
		}
		steps := []struct {
			table string
			drop  func(line []byte) (bool, error)
		}{{factsTable, factOf(ids)}, {archivedTable, subjectRow(s)}}
		for _, st := range steps {
			if err != nil {
				break
			}
			var rw retention.Rewritten
			var changed bool
			if rw, changed, err = w.Archiver.RewriteWithout(ctx, st.table, m, st.drop); err == nil && changed {
				out = append(out, rw)
				w.audited(ctx, erasureID, rw)
			}
		}
		if err != nil {
			if errors.Is(err, retention.ErrVerify) {
				return out, err
			}
			return out, fmt.Errorf("archive %s: %w: %w", retention.MonthString(m), ErrUnavailable, err)
		}
	}
	return out, nil
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

// factOf matches an archived facts row of one of the events ids.
func factOf(ids map[string]bool) func(line []byte) (bool, error) {
	return func(line []byte) (bool, error) {
		var row struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return false, fmt.Errorf("archived row is not a JSON object: %w", err)
		}
		return ids[row.EventID], nil
	}
}

// months lists the months of archivedTable with an archive record.
func (w *ArchiveRewriter) months(ctx context.Context) ([]time.Time, error) {
	lister, ok := w.Archiver.Src.(interface {
		ArchivedMonths(ctx context.Context, table string) ([]time.Time, error)
	})
	if !ok {
		return nil, errors.New("archives: the events source cannot list its archive records")
	}
	m, err := lister.ArchivedMonths(ctx, archivedTable)
	if err != nil {
		return nil, fmt.Errorf("archives: %w: %w", ErrUnavailable, err)
	}
	return m, nil
}

// subjectRow matches an archived events row of s.
func subjectRow(s Subject) func(line []byte) (bool, error) {
	return func(line []byte) (bool, error) {
		var row struct {
			AppID    string `json:"app_id"`
			DeviceID string `json:"device_id"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return false, fmt.Errorf("archived row is not a JSON object: %w", err)
		}
		return row.AppID == s.AppID && row.DeviceID == s.DeviceID, nil
	}
}
