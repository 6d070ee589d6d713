//go:build fault

package fault

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/e2e/internal/e2etest"
)

// outcomeUnknown is the collector's error code for a request the broker was
// sent but never confirmed: its events and audit record may or may not have
// been kept (together).
const outcomeUnknown = "outcome_unknown"

// errorCode returns the code of a JSON error body, or "".
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

// oneOutcome is the tally of the one-outcome rule over a fault's requests.
type oneOutcome struct {
	unknown     int // requests with no answer or 503 outcome_unknown
	unknownKept int // ... of which the events and audit row were kept
	violations  int // requests whose kept state contradicts their answer
}

// checkOneOutcome holds every request to the rule: a 202 has all its events
// stored and one 202 audit row (checked by runFault); any other answer
// except "unknown" (no answer, 503 outcome_unknown) has none of its events
// stored and no 202 audit row; an unknown one has both or neither. Storage
// and the audit trail fill asynchronously, so it polls until the state is
// consistent or d has passed, then reports what is still wrong.
func checkOneOutcome(t *testing.T, ctx context.Context, pool *pgxpool.Pool, audit *sql.DB, app string, since time.Time, outs []outcome, d time.Duration) oneOutcome {
	t.Helper()
	var res oneOutcome
	var problems []string
	_ = e2etest.WaitFor(d, func() (bool, error) {
		stored, err := e2etest.StoredCounts(ctx, pool, app, since)
		if err != nil {
			return false, err
		}
		audited, err := e2etest.AuditCounts(ctx, audit, app, since)
		if err != nil {
			return false, err
		}
		res, problems = oneOutcome{}, problems[:0]
		for _, o := range outs {
			if o.status == http.StatusAccepted {
				continue
			}
			kept := 0
			for _, id := range o.eventIDs {
				if stored[id] > 0 {
					kept++
				}
			}
			rows := audited[o.rid]
			switch {
			case o.status == 0 || o.code == outcomeUnknown:
				res.unknown++
				switch {
				case kept == len(o.eventIDs) && rows == 1:
					res.unknownKept++
				case kept == 0 && rows == 0:
				default:
					res.violations++
					problems = append(problems, fmt.Sprintf("%s: unknown outcome with %d of %d events and %d audit rows kept", o.rid, kept, len(o.eventIDs), rows))
				}
			case kept > 0 || rows > 0:
				res.violations++
				problems = append(problems, fmt.Sprintf("%s: answered %d %s but %d events and %d 202 audit rows kept", o.rid, o.status, o.code, kept, rows))
			}
		}
		return res.violations == 0, nil
	})
	for _, p := range problems {
		t.Errorf("one outcome per request: %s", p)
	}
	return res
}
