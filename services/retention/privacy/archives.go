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

// archivedTable is the table whose archives hold device ids (facts hold
// none).
const archivedTable = "events.events"

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
		rw, changed, err := w.Archiver.RewriteWithout(ctx, archivedTable, m, subjectRow(s))
		if err != nil {
			if errors.Is(err, retention.ErrVerify) {
				return out, err
			}
			return out, fmt.Errorf("archive %s: %w: %w", retention.MonthString(m), ErrUnavailable, err)
		}
		if !changed {
			continue
		}
		out = append(out, rw)
		if w.Audit != nil {
			err := w.Audit.Audit(context.WithoutCancel(ctx), wire.AuditRecord{ID: uuid.Must(uuid.NewV7()).String(),
				Time: time.Now().UTC(), ActorToken: "erasure:" + erasureID, Action: "privacy.archive.rewrite",
				Resource: rw.OldLocation, Outcome: 200, RequestID: erasureID})
			if err != nil {
				// The rewrite happened; the report lists it whatever the
				// audit logger says.
				w.Log.Error("archive rewrite not audited", "erasure_id", erasureID, "location", rw.OldLocation, "err", err)
			}
		}
	}
	return out, nil
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
