package privacy

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"threatview/platform/invkeys"
)

// erasedEvents is the session's table of one batch's deleted events (the
// columns the investigation rollups' keys are made of: invkeys.Columns),
// from which those rollups are decremented; emptied at commit.
const erasedEvents = `CREATE TEMP TABLE IF NOT EXISTS erased_events (
	occurred_at timestamptz, app_id text, app_version text, country char(2), manufacturer text, device_model text,
	os text, os_version text, device_id text, user_pseudonym text, os_major smallint, os_minor smallint,
	lat real, lon real, threat_types text[]
) ON COMMIT DELETE ROWS`

// lockApp takes the app's writer lock (events.lock_apps, migration events
// 000014) for the rest of the transaction, before any row: the processor
// takes it before its insert, and every investigation rollup row is one
// app's, so while the erasure holds it no write of the app is between its
// reads and its updates. That makes the distinct rows' recheck (below)
// exact and the decrement deadlock-free beside the processor, whose
// upserts lock rows in no particular order. The cost: the app's writes
// wait for one erasure batch (docs/privacy.md).
const lockApp = `SELECT events.lock_apps(ARRAY[$1::text])`

// invCount is one counting investigation rollup: its table, its primary
// key's columns in index order, its count columns, and the invkeys select
// that gives, per key, what the erased events added.
type invCount struct {
	table  string
	key    []string
	counts []string
	rows   string
}

var invCounts = []invCount{
	{"inv_daily", []string{"day", "app_id"}, []string{"events", "threat_events"}, invkeys.Daily},
	{"inv_geo_daily", []string{"day", "threat", "app_id", "country", "cell"}, []string{"events"}, invkeys.Geo},
	{"inv_threat_daily", []string{"day", "threat", "dim", "app_id", "key"}, []string{"count"}, invkeys.Threats},
}

// invStatement is one statement of invDecrementSQL: adjust tells an
// update answering (rows adjusted, rows at zero) from a removal.
type invStatement struct {
	adjust bool
	sql    string
}

// invDecrementSQL subtracts erased_events from each counting investigation
// rollup (what the processor added for them: invkeys' rows, negated), then
// removes the rows left at zero, as decrementSQL does for the other
// rollups; rows are locked in primary key order.
var invDecrementSQL = func() []invStatement {
	with := "WITH " + invkeys.Keys("erased_events") + ", d AS (%s)\n"
	var out []invStatement
	for _, c := range invCounts {
		var on, set, keys string
		for i, k := range c.key {
			if i > 0 {
				on, keys = on+" AND ", keys+", "
			}
			on += fmt.Sprintf("t.%[1]s = d.%[1]s", k)
			keys += "t." + k
		}
		for i, n := range c.counts {
			if i > 0 {
				set += ", "
			}
			set += fmt.Sprintf("%[1]s = t.%[1]s - d.%[1]s", n)
		}
		out = append(out, invStatement{true,
			fmt.Sprintf(with+`, l AS (SELECT %[3]s FROM facts.%[2]s t JOIN d ON %[4]s ORDER BY %[3]s FOR UPDATE OF t),
u AS (UPDATE facts.%[2]s t SET %[5]s FROM d WHERE %[4]s AND (SELECT count(*) FROM l) >= 0 RETURNING t.%[6]s AS n)
SELECT count(*), count(*) FILTER (WHERE n <= 0) FROM u`, c.rows, c.table, keys, on, set, c.counts[0])},
			invStatement{false, fmt.Sprintf(with+`DELETE FROM facts.%[2]s t USING d WHERE %[3]s AND t.%[4]s <= 0`, c.rows, c.table, on, c.counts[0])})
	}
	// inv_threat_daily's triggers (migration 000015) carry the decrement
	// into the all-apps summary but keep its rows at zero, which a report
	// over all apps would list as keys counted 0: those of the erased
	// events' keys go too. They are rows this transaction's trigger
	// updated, so the removal takes no new lock.
	return append(out, invStatement{false, fmt.Sprintf(with+`DELETE FROM facts.inv_threat_daily_all t USING d
WHERE t.day = d.day AND t.threat = d.threat AND t.dim = d.dim AND t.key = d.key AND t.count <= 0`, invkeys.Threats)})
}()

// invRecheckSQL removes the rows of the distinct investigation rollups
// (inv_daily_users, inv_device_days) that the erased events made and that
// no remaining event of the app makes any more: the keys of the erased
// events (gone) less the keys of the remaining events of the same users
// or devices over the same days (kept), both by invkeys; the subject
// column named non-blank lets the planner use events_by_user, a partial
// index. A device erasure
// rechecks its users' days, a user erasure its devices' days; the
// subject's own rows go whole in EraseDeviceDays and EraseDailyUsers.
// Only days on or after the start of the oldest monthly partition of
// events.events (its name, events_yYYYYmMM) are rechecked: an earlier
// day's other events may be in a month archived and dropped (months go
// oldest first, and an event is received on or after its day), so its
// rows stay. $1 is the app. %[1]s is the invkeys select, %[2]s the table, %[3]s the
// column naming the other subject, %[4]s the key columns.
const invRecheckSQL = `WITH ` + `%[5]s, gone AS (%[1]s),
rest AS (
	SELECT ` + invkeys.Columns + ` FROM events.events
	WHERE app_id = $1 AND %[3]s <> '' AND %[3]s IN (SELECT %[3]s FROM gone)
	  AND occurred_at >= (SELECT min(day) FROM gone)::timestamp AT TIME ZONE 'UTC'
	  AND occurred_at < ((SELECT max(day) FROM gone) + 1)::timestamp AT TIME ZONE 'UTC'
), kept AS (
	WITH %[6]s %[1]s
)
DELETE FROM facts.%[2]s t USING (SELECT * FROM gone EXCEPT SELECT * FROM kept) d
WHERE (%[4]s) = (%[7]s)
  AND d.day >= coalesce((SELECT min(to_date(right(c.relname, 8), '"y"YYYY"m"MM')) FROM pg_inherits i
	JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events.events'::regclass AND c.relname ~ '_y\d{4}m\d{2}$'), '-infinity')`

// invRecheck is the recheck of one distinct rollup for a subject whose
// column is not other (the rows of the subject's own kind go whole).
type invRecheck struct {
	other, table, rows string
	key                []string
}

var invRechecks = []invRecheck{
	{"user_pseudonym", "inv_daily_users", invkeys.DailyUsers, []string{"day", "app_id", "user_pseudonym"}},
	{"device_id", "inv_device_days", invkeys.DeviceDays, []string{"day", "app_id", "threat", "country", "cell", "device_id"}},
}

func (r invRecheck) sql() string {
	var t, d string
	for i, k := range r.key {
		if i > 0 {
			t, d = t+", ", d+", "
		}
		t, d = t+"t."+k, d+"d."+k
	}
	return fmt.Sprintf(invRecheckSQL, r.rows, r.table, r.other, t, invkeys.Keys("erased_events"), invkeys.Keys("rest"), d)
}

// queueInvDecrement returns a batch with invDecrementSQL's statements,
// counting into b.
func queueInvDecrement(b *Batch) *pgx.Batch {
	batch := &pgx.Batch{}
	for _, q := range invDecrementSQL {
		queueDecrement(batch, q.sql, q.adjust, b)
	}
	return batch
}

// decrementInv subtracts the events in erased_events from the counting
// investigation rollups and removes the distinct rows no remaining event
// makes (for the other kind of subject than col), in one round trip, and
// counts what it did into b. The caller holds the app's lock (lockApp).
func decrementInv(ctx context.Context, tx pgx.Tx, appID, col string, b *Batch) error {
	batch := queueInvDecrement(b)
	for _, r := range invRechecks {
		if r.other == col {
			continue
		}
		n := &b.DailyUsers
		if r.table == "inv_device_days" {
			n = &b.DeviceDays
		}
		batch.Queue(r.sql(), appID).Exec(func(tag pgconn.CommandTag) error {
			*n += tag.RowsAffected()
			return nil
		})
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("adjust investigation rollups: %w", err)
	}
	return nil
}

// DecrementArchivedInv subtracts archived events rows (lines of an
// events.events archive, row_to_json, as the archiver wrote them) of a
// month archived and dropped from the counting investigation rollups, as
// EraseEvents does for the rows it deletes, under the app's lock. A row
// without threat_types was archived before migration events 000013 (no
// investigation columns, never counted) and is skipped. The distinct rows
// are not rechecked: the month's other events are in no table (the
// subject's own go whole in EraseDeviceDays and EraseDailyUsers).
func (p *PG) DecrementArchivedInv(ctx context.Context, appID string, events [][]byte) (Batch, error) {
	var b Batch
	if len(events) == 0 {
		return b, nil
	}
	lines := texts(events)
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, eraseSettings+erasedEvents); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, lockApp, appID); err != nil {
			return fmt.Errorf("lock app: %w", err)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO erased_events
			SELECT r.* FROM unnest($1::text[]) AS l(line), LATERAL (SELECT l.line::jsonb AS j) j,
			     LATERAL jsonb_populate_record(NULL::erased_events, j.j) r
			 WHERE j.j ? 'threat_types' AND r.app_id = $2`, lines, appID)
		if err != nil {
			return fmt.Errorf("read archived events: %w", err)
		}
		if b.Events = tag.RowsAffected(); b.Events == 0 {
			return nil
		}
		if err := tx.SendBatch(ctx, queueInvDecrement(&b)).Close(); err != nil {
			return fmt.Errorf("adjust investigation rollups: %w", err)
		}
		return nil
	})
	if err != nil {
		return Batch{}, unavailable("adjust investigation rollups for archived events", err)
	}
	return b, nil
}
