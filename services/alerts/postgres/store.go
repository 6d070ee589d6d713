// Package postgres is the alerts service's adapter to the events DB (schema
// alerts): rules, transitions and notifications, forwarders and their
// cursors, the outbox the processor writes, and the per-minute counts folded
// from it.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/alerts"
)

// Store is the alerts schema. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects a pool of at most maxConns connections.
func Open(ctx context.Context, url string, maxConns int32) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse ALERTS_DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open events DB: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks the database answers (for /readyz).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping events DB: %w: %w", alerts.ErrUnavailable, err)
	}
	return nil
}

func unavailable(op string, err error) error {
	if errors.Is(err, alerts.ErrUnavailable) || errors.Is(err, alerts.ErrNotFound) || errors.Is(err, alerts.ErrInvalid) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, alerts.ErrUnavailable, err)
}

// inTx runs f in a transaction and commits only when f and then audit (the
// change's audit record, posted before the commit) succeed: a change that
// could not be audited is not made.
func (s *Store) inTx(ctx context.Context, op string, f func(pgx.Tx) error, audit func(context.Context) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return unavailable(op, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	if err := f(tx); err != nil {
		return unavailable(op, err)
	}
	if audit != nil {
		if err := audit(ctx); err != nil {
			return unavailable(op, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return unavailable(op, err)
	}
	return nil
}

// CreateRule stores r (validated, with its id) and its initial state ok.
func (s *Store) CreateRule(ctx context.Context, r *alerts.Rule, audit func(context.Context) error) error {
	ch, err := json.Marshal(r.Channel)
	if err != nil {
		return fmt.Errorf("encode channel: %w", err)
	}
	return s.inTx(ctx, "create rule", func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO alerts.rules (id, name, app_id, threat, country, os, kind, window_seconds, threshold,
			factor, channel, silenced_until, created_by) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13) RETURNING created_at`,
			r.ID, r.Name, r.AppID, r.Threat, r.Country, r.OS, r.Kind, r.WindowSeconds, r.Threshold, r.Factor, ch, r.SilencedUntil,
			r.CreatedBy).Scan(&r.CreatedAt)
		if err != nil {
			return err
		}
		r.State = "ok"
		_, err = tx.Exec(ctx, `INSERT INTO alerts.rule_state (rule_id, state, since) VALUES ($1, 'ok', now())`, r.ID)
		return err
	}, audit)
}

const ruleColumns = `r.id::text, r.name, r.app_id, r.threat, r.country, r.os, r.kind, r.window_seconds, r.threshold, r.factor,
	r.channel, r.silenced_until, r.created_by, r.created_at, coalesce(st.state, 'ok')`

// ruleFields are the scan targets of ruleColumns in r; ch receives the
// channel's JSON.
func ruleFields(r *alerts.Rule, ch *[]byte) []any {
	return []any{&r.ID, &r.Name, &r.AppID, &r.Threat, &r.Country, &r.OS, &r.Kind, &r.WindowSeconds, &r.Threshold,
		&r.Factor, ch, &r.SilencedUntil, &r.CreatedBy, &r.CreatedAt, &r.State}
}

func decodeChannel(r *alerts.Rule, ch []byte) error {
	if err := json.Unmarshal(ch, &r.Channel); err != nil {
		return fmt.Errorf("decode channel of rule %s: %w", r.ID, err)
	}
	return nil
}

func scanRule(row pgx.Row) (alerts.Rule, error) {
	var r alerts.Rule
	var ch []byte
	if err := row.Scan(ruleFields(&r, &ch)...); err != nil {
		return r, err
	}
	return r, decodeChannel(&r, ch)
}

// Rules lists the live rules, oldest first, with their secrets (callers
// showing them use Rule.Public).
func (s *Store) Rules(ctx context.Context) ([]alerts.Rule, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+ruleColumns+` FROM alerts.rules r
		LEFT JOIN alerts.rule_state st ON st.rule_id = r.id WHERE r.deleted_at IS NULL ORDER BY r.created_at, r.id`)
	if err != nil {
		return nil, unavailable("list rules", err)
	}
	defer rows.Close()
	var out []alerts.Rule
	for rows.Next() {
		r, err := scanRule(rows)
		if err != nil {
			return nil, unavailable("list rules", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("list rules", err)
	}
	return out, nil
}

// Rule returns one live rule; ErrNotFound when there is none.
func (s *Store) Rule(ctx context.Context, id string) (alerts.Rule, error) {
	r, err := scanRule(s.pool.QueryRow(ctx, `SELECT `+ruleColumns+` FROM alerts.rules r
		LEFT JOIN alerts.rule_state st ON st.rule_id = r.id WHERE r.id = $1::uuid AND r.deleted_at IS NULL`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("rule %s: %w", id, alerts.ErrNotFound)
	}
	if err != nil {
		return r, unavailable("get rule "+id, err)
	}
	return r, nil
}

// DeleteRule marks a rule deleted (its history stays) and drops its
// pending notifications; ErrNotFound when it is not live.
func (s *Store) DeleteRule(ctx context.Context, id string, audit func(context.Context) error) error {
	return s.inTx(ctx, "delete rule "+id, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE alerts.rules SET deleted_at = now() WHERE id = $1::uuid AND deleted_at IS NULL`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return alerts.ErrNotFound
		}
		_, err = tx.Exec(ctx, `UPDATE alerts.notifications SET status = 'dead', last_error = 'rule deleted'
			WHERE rule_id = $1::uuid AND status = 'pending'`, id)
		return err
	}, audit)
}

// SilenceRule sets (or, with nil, clears) a rule's silence.
func (s *Store) SilenceRule(ctx context.Context, id string, until *time.Time, audit func(context.Context) error) error {
	return s.inTx(ctx, "silence rule "+id, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE alerts.rules SET silenced_until = $2 WHERE id = $1::uuid AND deleted_at IS NULL`, id, until)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return alerts.ErrNotFound
		}
		return nil
	}, audit)
}

// History returns a rule's transitions, newest first, at most limit.
func (s *Store) History(ctx context.Context, id string, limit int) ([]alerts.Transition, error) {
	if _, err := s.ruleExists(ctx, id); err != nil {
		return nil, err
	}
	return s.transitions(ctx, `t.rule_id = $1::uuid`, id, limit)
}

// Notifications returns transitions whose notification has status
// ("pending", "sent" or "dead"), newest first, at most limit.
func (s *Store) Notifications(ctx context.Context, status string, limit int) ([]alerts.Transition, error) {
	return s.transitions(ctx, `n.status = $1`, status, limit)
}

// transitions lists the transitions matching where, a condition on $1.
func (s *Store) transitions(ctx context.Context, where string, arg any, limit int) ([]alerts.Transition, error) {
	// sql: where is one of History's and Notifications' literal conditions;
	// the values (rule id, status, limit) travel as $1 and $2.
	rows, err := s.pool.Query(ctx, `SELECT t.id, t.rule_id::text, t.state, t.value, t.threshold, t.at, t.silenced,
			coalesce(n.status, ''), coalesce(n.attempts, 0), coalesce(n.last_error, '')
		FROM alerts.transitions t LEFT JOIN alerts.notifications n ON n.transition_id = t.id
		WHERE `+where+` ORDER BY t.id DESC LIMIT $2`, arg, limit)
	if err != nil {
		return nil, unavailable("list transitions", err)
	}
	defer rows.Close()
	out := []alerts.Transition{}
	for rows.Next() {
		var t alerts.Transition
		if err := rows.Scan(&t.ID, &t.RuleID, &t.State, &t.Value, &t.Threshold, &t.At, &t.Silenced,
			&t.Notification, &t.Attempts, &t.LastError); err != nil {
			return nil, unavailable("list transitions", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("list transitions", err)
	}
	return out, nil
}

func (s *Store) ruleExists(ctx context.Context, id string) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM alerts.rules WHERE id = $1::uuid)`, id).Scan(&ok); err != nil {
		return false, unavailable("find rule "+id, err)
	}
	if !ok {
		return false, fmt.Errorf("rule %s: %w", id, alerts.ErrNotFound)
	}
	return true, nil
}

// CreateForwarder stores f (validated, with its id).
func (s *Store) CreateForwarder(ctx context.Context, f *alerts.Forwarder, audit func(context.Context) error) error {
	return s.inTx(ctx, "create forwarder", func(tx pgx.Tx) error {
		// A new forwarder starts at the outbox's end: it forwards the
		// threat events committed from now on. In a shard with rows that
		// is after its last committed row (its later commits number
		// higher); a shard with none yet is read from its start (base 0).
		name := CursorNameOf(f.ID)
		if _, err := tx.Exec(ctx, `INSERT INTO alerts.cursors (name, seq) VALUES ($1, 0)`, name); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `WITH `+shardsSQL+`
			INSERT INTO alerts.cursor_shards (name, shard, seq)
			SELECT $1, s.k, (SELECT max(o.seq) FROM alerts.outbox o WHERE o.shard = s.k) FROM shards s WHERE s.k IS NOT NULL`,
			name); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO alerts.forwarders (id, name, type, url, format, app_ids, threats, ca_pem, created_by,
			secret_header) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) RETURNING created_at`,
			f.ID, f.Name, f.Type, f.URL, f.Format, f.AppIDs, f.Threats, f.CAPEM, f.CreatedBy, f.SecretHeader).Scan(&f.CreatedAt)
	}, audit)
}

// Forwarders lists the live forwarders, oldest first, with their URLs and
// secret headers (callers showing them use Forwarder.Public).
func (s *Store) Forwarders(ctx context.Context) ([]alerts.Forwarder, error) {
	rows, err := s.pool.Query(ctx, `SELECT id::text, name, type, url, format, app_ids, threats, ca_pem, created_by, created_at,
		secret_header FROM alerts.forwarders WHERE deleted_at IS NULL ORDER BY created_at, id`)
	if err != nil {
		return nil, unavailable("list forwarders", err)
	}
	defer rows.Close()
	out := []alerts.Forwarder{}
	for rows.Next() {
		var f alerts.Forwarder
		if err := rows.Scan(&f.ID, &f.Name, &f.Type, &f.URL, &f.Format, &f.AppIDs, &f.Threats, &f.CAPEM,
			&f.CreatedBy, &f.CreatedAt, &f.SecretHeader); err != nil {
			return nil, unavailable("list forwarders", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("list forwarders", err)
	}
	return out, nil
}

// DeleteForwarder stops a forwarder; ErrNotFound when it is not live.
func (s *Store) DeleteForwarder(ctx context.Context, id string, audit func(context.Context) error) error {
	return s.inTx(ctx, "delete forwarder "+id, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE alerts.forwarders SET deleted_at = now() WHERE id = $1::uuid AND deleted_at IS NULL`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return alerts.ErrNotFound
		}
		_, err = tx.Exec(ctx, `DELETE FROM alerts.cursors WHERE name = $1`, "fwd:"+id)
		return err
	}, audit)
}

// ForwarderStatus reports a live forwarder's progress: pending counts the
// outbox rows after its cursor (before its filters), lag the age of the
// oldest of them.
func (s *Store) ForwarderStatus(ctx context.Context, id string) (alerts.ForwarderStatus, error) {
	var st alerts.ForwarderStatus
	var oldest *time.Time
	pos, err := readPosition(ctx, s.pool, CursorNameOf(id))
	if err == nil {
		err = s.pool.QueryRow(ctx, `WITH `+afterSQL+`
		SELECT f.delivered, f.failed, f.skipped, f.last_error,
			(SELECT coalesce(sum(r.n), 0) FROM after a CROSS JOIN LATERAL (SELECT count(*) AS n FROM alerts.outbox o
				WHERE o.shard = a.k AND o.seq > a.seq) r),
			(SELECT min(r.received_at) FROM after a CROSS JOIN LATERAL (SELECT o.received_at FROM alerts.outbox o
				WHERE o.shard = a.k AND o.seq > a.seq ORDER BY o.seq LIMIT 1) r)
		FROM alerts.forwarders f WHERE f.id = $4::uuid AND f.deleted_at IS NULL`, append(positionArgs(pos), id)...).
			Scan(&st.Delivered, &st.Failed, &st.Skipped, &st.LastError, &st.Pending, &oldest)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("forwarder %s: %w", id, alerts.ErrNotFound)
	}
	if err != nil {
		return st, unavailable("forwarder status "+id, err)
	}
	if oldest != nil {
		st.LagSeconds = max(0, time.Since(*oldest).Seconds())
	}
	return st, nil
}

// Cursor returns a named cursor's position (zero when there is none).
func (s *Store) Cursor(ctx context.Context, name string) (alerts.Position, error) {
	p, err := readPosition(ctx, s.pool, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return alerts.Position{}, nil
	}
	if err != nil {
		return p, unavailable("read cursor "+name, err)
	}
	return p, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readPosition reads a cursor: its base (alerts.cursors.seq) and its
// place in each shard that has one (alerts.cursor_shards, migration
// 000023); pgx.ErrNoRows when there is no such cursor.
func readPosition(ctx context.Context, q querier, name string) (alerts.Position, error) {
	var p alerts.Position
	var shards []int16
	var seqs []int64
	err := q.QueryRow(ctx, `SELECT c.seq, coalesce(array_agg(s.shard ORDER BY s.shard) FILTER (WHERE s.shard IS NOT NULL), '{}'),
			coalesce(array_agg(s.seq ORDER BY s.shard) FILTER (WHERE s.shard IS NOT NULL), '{}')
		FROM alerts.cursors c LEFT JOIN alerts.cursor_shards s ON s.name = c.name WHERE c.name = $1 GROUP BY c.seq`, name).
		Scan(&p.Base, &shards, &seqs)
	if err != nil {
		return p, err
	}
	p.Shards = make(map[int16]int64, len(shards))
	for i, k := range shards {
		p.Shards[k] = seqs[i]
	}
	return p, nil
}

// positionArgs are afterSQL's $1 to $3 for p: its base, and its shards
// with their places.
func positionArgs(p alerts.Position) []any {
	shards := make([]int16, 0, len(p.Shards))
	seqs := make([]int64, 0, len(p.Shards))
	for k, s := range p.Shards {
		shards = append(shards, k)
		seqs = append(seqs, s)
	}
	return []any{p.Base, shards, seqs}
}

// shardsSQL is a common table expression "shards" of the shards that have
// rows in the outbox (k; a last row with k null ends the list): a loose
// scan of the index outbox_shard_seq, one probe a shard, so its cost does
// not grow with the outbox. It goes from the highest shard down: each probe
// lands on a shard's newest rows, not on its oldest, which Prune deletes
// and which stay in the index, dead, until the next vacuum.
const shardsSQL = `RECURSIVE shards AS (
	SELECT max(shard) AS k FROM alerts.outbox
	UNION ALL
	SELECT (SELECT max(o.shard) FROM alerts.outbox o WHERE o.shard < s.k) FROM shards s WHERE s.k IS NOT NULL
)`

// afterSQL adds to shardsSQL "after": each shard k with rows and the seq a
// reader at a position (positionArgs, $1 to $3) has read it to. Each shard's
// rows are numbered in its commit order (migration 000023), so no row of
// shard k commits later with a seq below one already read in k: a reader
// that follows each shard by its own seq never passes a row. The numbers
// are passed as parameters, not joined from alerts.cursors, so each
// shard's rows are read through the index (shard, seq): a join to the
// cursor row once made PostgreSQL scan the whole outbox.
const afterSQL = shardsSQL + `, after AS (
	SELECT s.k, coalesce((SELECT c.seq FROM unnest($2::smallint[], $3::bigint[]) AS c(k, seq) WHERE c.k = s.k), $1::bigint) AS seq
	FROM shards s WHERE s.k IS NOT NULL
)`

// rowsAfterSQL selects the first $4 rows after the position in afterSQL,
// oldest number first over all shards: each shard's rows in its order, and
// of each shard the first ones (what Position.After and Fold rely on). A
// shard's rows are read by index from its place, at most $4 of them.
const rowsAfterSQL = `SELECT r.* FROM after a CROSS JOIN LATERAL (
		SELECT o.shard, o.seq, o.event_id, o.app_id, o.received_at, o.occurred_at, o.type, o.app_version,
			o.device_model, o.os, o.os_version, o.country, o.threats
		FROM alerts.outbox o WHERE o.shard = a.k AND o.seq > a.seq ORDER BY o.seq LIMIT $4
	) r ORDER BY r.seq LIMIT $4`

// Outbox returns up to limit rows after pos.
func (s *Store) Outbox(ctx context.Context, after alerts.Position, limit int) ([]alerts.Event, error) {
	rows, err := s.pool.Query(ctx, `WITH `+afterSQL+`, rows AS (`+rowsAfterSQL+`)
		SELECT shard, seq, event_id::text, app_id, received_at, occurred_at, type, app_version, device_model, os,
			os_version, country, threats FROM rows ORDER BY seq`, append(positionArgs(after), limit)...)
	if err != nil {
		return nil, unavailable("read outbox", err)
	}
	defer rows.Close()
	var out []alerts.Event
	for rows.Next() {
		var e alerts.Event
		if err := rows.Scan(&e.Shard, &e.Seq, &e.ID, &e.AppID, &e.ReceivedAt, &e.OccurredAt, &e.Type, &e.AppVersion,
			&e.DeviceModel, &e.OS, &e.OSVersion, &e.Country, &e.Threats); err != nil {
			return nil, unavailable("read outbox", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("read outbox", err)
	}
	return out, nil
}

// Delivered moves a forwarder's cursor to pos (its places per shard) and
// adds n to its count.
func (s *Store) Delivered(ctx context.Context, forwarderID string, pos alerts.Position, n int) error {
	return s.inTx(ctx, "record forwarded batch", func(tx pgx.Tx) error {
		if err := moveCursor(ctx, tx, CursorNameOf(forwarderID), pos); err != nil {
			if errors.Is(err, alerts.ErrNotFound) {
				return fmt.Errorf("forwarder %s: %w", forwarderID, err)
			}
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE alerts.forwarders SET delivered = delivered + $2, delivered_until = now(), last_error = ''
			WHERE id = $1::uuid`, forwarderID, n)
		return err
	}, nil)
}

// Skip bounds a forwarder's backlog to max outbox rows after its cursor:
// when rows wait that are more than max numbers below the outbox's newest
// (over all shards), the cursor moves past them, the forwarder's skipped
// count grows by how many it passed, and Skip returns the new cursor and
// that number (0 and the cursor as it was when within the bound). All
// shards draw their numbers from one sequence, so the rows left, numbered
// within max of the newest, are at most max: fewer where numbers are
// missing (rolled-back writes). In each shard the cursor moves to the last
// row it passes, not to the edge: a row of that shard still to commit
// numbers higher and is read.
func (s *Store) Skip(ctx context.Context, forwarderID string, max int64) (alerts.Position, int64, error) {
	var pos alerts.Position
	var n int64
	name := CursorNameOf(forwarderID)
	err := s.inTx(ctx, "bound forwarder backlog", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM alerts.cursors WHERE name = $1 FOR UPDATE`, name); err != nil {
			return err
		}
		var err error
		if pos, err = readPosition(ctx, tx, name); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("forwarder %s: %w", forwarderID, alerts.ErrNotFound)
			}
			return err
		}
		// Each shard's newest by its index, then in each shard behind the
		// edge the rows to pass, counted by index range: the work grows
		// with the rows passed, not with the backlog.
		rows, err := tx.Query(ctx, `WITH `+afterSQL+`, tops AS (
				SELECT a.k, a.seq, (SELECT max(o.seq) FROM alerts.outbox o WHERE o.shard = a.k) AS top FROM after a
			), edge AS (SELECT max(top) - $4 AS seq FROM tops)
			SELECT t.k, p.seq, p.n FROM tops t CROSS JOIN edge e CROSS JOIN LATERAL (
				SELECT max(o.seq) AS seq, count(*) AS n FROM alerts.outbox o WHERE o.shard = t.k AND o.seq > t.seq AND o.seq <= e.seq
			) p WHERE t.seq < e.seq AND p.n > 0`, append(positionArgs(pos), max)...)
		if err != nil {
			return err
		}
		passed, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
			Shard int16
			Seq   int64
			N     int64
		}])
		if err != nil || len(passed) == 0 {
			return err
		}
		moved := alerts.Position{Base: pos.Base, Shards: map[int16]int64{}}
		for _, p := range passed {
			moved.Shards[p.Shard] = p.Seq
			pos.Shards[p.Shard] = p.Seq
			n += p.N
		}
		if err := moveCursor(ctx, tx, name, moved); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE alerts.forwarders SET skipped = skipped + $2 WHERE id = $1::uuid`, forwarderID, n)
		return err
	}, nil)
	if err != nil {
		return pos, 0, err
	}
	return pos, n, nil
}

// moveCursor stores pos's places per shard as cursor name's (its base
// stays); ErrNotFound when there is no such cursor.
func moveCursor(ctx context.Context, tx pgx.Tx, name string, pos alerts.Position) error {
	tag, err := tx.Exec(ctx, `UPDATE alerts.cursors SET updated_at = now() WHERE name = $1`, name)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return alerts.ErrNotFound
	}
	args := positionArgs(pos)
	_, err = tx.Exec(ctx, `INSERT INTO alerts.cursor_shards (name, shard, seq)
		SELECT $1, u.k, u.seq FROM unnest($2::smallint[], $3::bigint[]) AS u(k, seq)
		ON CONFLICT (name, shard) DO UPDATE SET seq = excluded.seq`, name, args[1], args[2])
	return err
}

// CursorNameOf is the alerts.cursors row of a forwarder.
func CursorNameOf(forwarderID string) string { return "fwd:" + forwarderID }

// Failed counts a failed batch of a forwarder.
func (s *Store) Failed(ctx context.Context, forwarderID, msg string) error {
	msg = alerts.RedactURLs(msg)
	if len(msg) > 500 {
		msg = msg[:500]
	}
	_, err := s.pool.Exec(ctx, `UPDATE alerts.forwarders SET failed = failed + 1, last_error = $2 WHERE id = $1::uuid`, forwarderID, msg)
	if err != nil {
		return unavailable("record forward failure", err)
	}
	return nil
}

// Fold counts up to limit outbox rows after the counter's cursor into
// alerts.threat_minutes (one sighting per threat type of an event, by
// receive minute) and alerts.threat_minutes_scoped (the same by country and
// OS family too) and moves the cursor in each shard it read, in one
// statement: every row is counted exactly once in each. It returns how
// many rows it folded.
func (s *Store) Fold(ctx context.Context, limit int) (int, error) {
	if _, err := s.pool.Exec(ctx, `INSERT INTO alerts.cursors (name) VALUES ('counter') ON CONFLICT DO NOTHING`); err != nil {
		return 0, unavailable("fold outbox", err)
	}
	var n int
	err := s.inTx(ctx, "fold outbox", func(tx pgx.Tx) error {
		// The cursor is locked and read first and passed as parameters
		// (afterSQL says why).
		if _, err := tx.Exec(ctx, `SELECT 1 FROM alerts.cursors WHERE name = 'counter' FOR UPDATE`); err != nil {
			return err
		}
		pos, err := readPosition(ctx, tx, "counter")
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
		WITH `+afterSQL+`, rows AS (`+rowsAfterSQL+`
		), counted AS (
			INSERT INTO alerts.threat_minutes (app_id, threat, minute, count)
			SELECT r.app_id, t.threat, date_trunc('minute', r.received_at), count(*)
			FROM rows r CROSS JOIN LATERAL unnest(r.threats) AS t(threat)
			GROUP BY 1, 2, 3
			ON CONFLICT (minute, app_id, threat) DO UPDATE SET count = alerts.threat_minutes.count + excluded.count
			RETURNING 1
		), scoped AS (
			-- By country (blank or not a code: unknown) and OS family
			-- (alerts.OSFamily: lower case if one of $5, else other).
			INSERT INTO alerts.threat_minutes_scoped (app_id, threat, minute, country, os, count)
			SELECT r.app_id, t.threat, date_trunc('minute', r.received_at),
				CASE WHEN r.country ~ '^[A-Z]{2}$' THEN r.country ELSE $6 END,
				CASE WHEN lower(r.os) = ANY ($5::text[]) THEN lower(r.os) ELSE 'other' END, count(*)
			FROM rows r CROSS JOIN LATERAL unnest(r.threats) AS t(threat)
			GROUP BY 1, 2, 3, 4, 5
			ON CONFLICT (minute, app_id, threat, country, os) DO UPDATE SET count = alerts.threat_minutes_scoped.count + excluded.count
			RETURNING 1
		), moved AS (
			-- rows holds the first rows of each shard it has any of, so
			-- its last of a shard is the cursor's new place there.
			INSERT INTO alerts.cursor_shards (name, shard, seq)
			SELECT 'counter', r.shard, max(r.seq) FROM rows r GROUP BY r.shard
			ON CONFLICT (name, shard) DO UPDATE SET seq = excluded.seq
			RETURNING 1
		)
		SELECT (SELECT count(*) FROM rows) + 0 * (SELECT count(*) FROM counted) + 0 * (SELECT count(*) FROM scoped)
			+ 0 * (SELECT count(*) FROM moved)`,
			append(positionArgs(pos), limit, alerts.OSFamilies, alerts.UnknownCountry)...).Scan(&n)
	}, nil)
	return n, err
}

// Value is a rule's measured sightings in its window and, for a baseline
// rule, the mean of the same window on each of the 7 days before.
type Value struct {
	Rule     alerts.Rule
	Value    int64
	Baseline float64
}

// The measuring statements: the sightings from the minute holding $1 to
// the one holding $2, of app $3 (blank: any) and threat $4 (blank: any);
// the scoped ones also of country $5 and OS family $6 (blank: any). The
// baseline sums the same window on each of the 7 days before.
const (
	measureSQL = `SELECT coalesce(sum(count), 0) FROM alerts.threat_minutes
		WHERE minute >= date_trunc('minute', $1::timestamptz) AND minute <= $2
		  AND ($3 = '' OR app_id = $3) AND ($4 = '' OR threat = $4)`
	baselineSQL = `SELECT coalesce(sum(m.count), 0) FROM alerts.threat_minutes m, generate_series(1, 7) d
		WHERE m.minute >= date_trunc('minute', $1::timestamptz - d * interval '1 day')
		  AND m.minute <= $2::timestamptz - d * interval '1 day'
		  AND ($3 = '' OR m.app_id = $3) AND ($4 = '' OR m.threat = $4)`
	measureScopedSQL = `SELECT coalesce(sum(count), 0) FROM alerts.threat_minutes_scoped
		WHERE minute >= date_trunc('minute', $1::timestamptz) AND minute <= $2
		  AND ($3 = '' OR app_id = $3) AND ($4 = '' OR threat = $4)
		  AND ($5 = '' OR country = $5) AND ($6 = '' OR os = $6)`
	baselineScopedSQL = `SELECT coalesce(sum(m.count), 0) FROM alerts.threat_minutes_scoped m, generate_series(1, 7) d
		WHERE m.minute >= date_trunc('minute', $1::timestamptz - d * interval '1 day')
		  AND m.minute <= $2::timestamptz - d * interval '1 day'
		  AND ($3 = '' OR m.app_id = $3) AND ($4 = '' OR m.threat = $4)
		  AND ($5 = '' OR m.country = $5) AND ($6 = '' OR m.os = $6)`
)

// Values measures every live rule at now. The window is rounded out to
// whole minutes: it counts the minutes from the one holding now - window
// to the one holding now. A rule scoped to a country or an OS reads the
// scoped counts, the others the narrower alerts.threat_minutes.
func (s *Store) Values(ctx context.Context, now time.Time) ([]Value, error) {
	rules, err := s.Rules(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Value, 0, len(rules))
	for _, r := range rules {
		v := Value{Rule: r}
		win := time.Duration(r.WindowSeconds) * time.Second
		measure, baseline := measureSQL, baselineSQL
		args := []any{now.Add(-win), now, r.AppID, r.Threat}
		if r.Scoped() {
			measure, baseline = measureScopedSQL, baselineScopedSQL
			args = append(args, r.Country, r.OS)
		}
		if err := s.pool.QueryRow(ctx, measure, args...).Scan(&v.Value); err != nil {
			return nil, unavailable("measure rule "+r.ID, err)
		}
		if r.Kind == alerts.KindBaseline {
			var sum int64
			if err := s.pool.QueryRow(ctx, baseline, args...).Scan(&sum); err != nil {
				return nil, unavailable("measure baseline of rule "+r.ID, err)
			}
			v.Baseline = float64(sum) / 7
		}
		out = append(out, v)
	}
	return out, nil
}

// Transition moves a rule from state from to the transition's state
// (firing, or resolved which is state ok) and, unless silenced, records
// its notification, all in one transaction; it reports false when the
// rule was no longer in state from (another leader got there first).
func (s *Store) Transition(ctx context.Context, r alerts.Rule, from string, t *alerts.Transition, body []byte) (bool, error) {
	to := "ok"
	if t.State == "firing" {
		to = "firing"
	}
	done := false
	err := s.inTx(ctx, "transition rule "+r.ID, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE alerts.rule_state SET state = $2, since = $3, value = $4
			WHERE rule_id = $1::uuid AND state = $5`, r.ID, to, t.At, t.Value, from)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if err := tx.QueryRow(ctx, `INSERT INTO alerts.transitions (rule_id, state, value, threshold, at, silenced)
			VALUES ($1::uuid, $2, $3, $4, $5, $6) RETURNING id`, r.ID, t.State, t.Value, t.Threshold, t.At, t.Silenced).Scan(&t.ID); err != nil {
			return err
		}
		if !t.Silenced {
			if _, err := tx.Exec(ctx, `INSERT INTO alerts.notifications (transition_id, rule_id, body) VALUES ($1, $2::uuid, $3)`,
				t.ID, r.ID, body); err != nil {
				return err
			}
		}
		done = true
		return nil
	}, nil)
	return done, err
}

// Pending is a notification to send.
type Pending struct {
	TransitionID int64
	// DeliveryID is the notification's id for receivers to deduplicate on:
	// the same on every attempt (alerts.notifications.delivery_id).
	DeliveryID string
	Rule       alerts.Rule
	Body       []byte
	Attempts   int
}

// Due claims, per rule, its oldest pending notification that is due, at
// most limit: a rule's notifications go out in order. A claim moves the
// notification's next attempt lease ahead, so a second evaluator (a leader
// that has not yet noticed it lost the lock) cannot send it too; a sender
// that dies mid-send leaves it to be tried again once the lease ends.
func (s *Store) Due(ctx context.Context, limit int, lease time.Duration) ([]Pending, error) {
	rows, err := s.pool.Query(ctx, `
		WITH due AS (
			SELECT transition_id FROM (SELECT DISTINCT ON (rule_id) transition_id, next_at FROM alerts.notifications
				WHERE status = 'pending' ORDER BY rule_id, transition_id) d
			WHERE d.next_at <= now() ORDER BY transition_id LIMIT $1
		), n AS (
			UPDATE alerts.notifications x SET next_at = now() + make_interval(secs => $2)
			FROM due WHERE x.transition_id = due.transition_id AND x.status = 'pending' AND x.next_at <= now()
			RETURNING x.transition_id, x.delivery_id, x.body, x.attempts, x.rule_id
		)
		SELECT n.transition_id, n.delivery_id::text, n.body, n.attempts, `+ruleColumns+`
		FROM n JOIN alerts.rules r ON r.id = n.rule_id
		LEFT JOIN alerts.rule_state st ON st.rule_id = r.id
		ORDER BY n.transition_id`, limit, lease.Seconds())
	if err != nil {
		return nil, unavailable("due notifications", err)
	}
	defer rows.Close()
	var out []Pending
	for rows.Next() {
		var p Pending
		var ch []byte
		if err := rows.Scan(append([]any{&p.TransitionID, &p.DeliveryID, &p.Body, &p.Attempts}, ruleFields(&p.Rule, &ch)...)...); err != nil {
			return nil, unavailable("due notifications", err)
		}
		if err := decodeChannel(&p.Rule, ch); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("due notifications", err)
	}
	return out, nil
}

// Sent marks a notification sent.
func (s *Store) Sent(ctx context.Context, transitionID int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE alerts.notifications SET status = 'sent', sent_at = now(), attempts = attempts + 1,
		last_error = '' WHERE transition_id = $1`, transitionID)
	if err != nil {
		return unavailable("mark notification sent", err)
	}
	return nil
}

// Retry records a failed attempt: the notification is tried again at next,
// or, when dead, moved to the dead letters.
func (s *Store) Retry(ctx context.Context, transitionID int64, next time.Time, dead bool, msg string) error {
	msg = alerts.RedactURLs(msg)
	if len(msg) > 500 {
		msg = msg[:500]
	}
	status := "pending"
	if dead {
		status = "dead"
	}
	_, err := s.pool.Exec(ctx, `UPDATE alerts.notifications SET status = $2, attempts = attempts + 1, next_at = $3,
		last_error = $4 WHERE transition_id = $1`, transitionID, status, next, msg)
	if err != nil {
		return unavailable("mark notification failed", err)
	}
	return nil
}

// Prune deletes outbox rows every cursor has passed that are older than
// keep, and minute counts older than counts. Each shard is pruned up to the
// least place of the live cursors in it, by a statement of its own: given
// the shard and the place as values PostgreSQL reads the rows through the
// (shard, seq) index (joined to the list of places it scanned the whole
// outbox).
func (s *Store) Prune(ctx context.Context, keep, counts time.Duration) (int64, error) {
	rows, err := s.pool.Query(ctx, `
		WITH `+shardsSQL+`, live AS (SELECT c.name, c.seq FROM alerts.cursors c
			WHERE c.name = 'counter' OR c.name IN (SELECT 'fwd:' || id::text FROM alerts.forwarders WHERE deleted_at IS NULL)
		)
		SELECT s.k, min(coalesce(cs.seq, l.seq)) FROM shards s CROSS JOIN live l
		LEFT JOIN alerts.cursor_shards cs ON cs.name = l.name AND cs.shard = s.k
		WHERE s.k IS NOT NULL GROUP BY s.k`)
	if err != nil {
		return 0, unavailable("prune outbox", err)
	}
	lo, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Shard int16
		Seq   int64
	}])
	if err != nil {
		return 0, unavailable("prune outbox", err)
	}
	var n int64
	for _, l := range lo {
		tag, err := s.pool.Exec(ctx, `DELETE FROM alerts.outbox WHERE shard = $1 AND seq <= $2
			AND received_at < now() - make_interval(secs => $3)`, l.Shard, l.Seq, keep.Seconds())
		if err != nil {
			return n, unavailable(fmt.Sprintf("prune outbox shard %d", l.Shard), err)
		}
		n += tag.RowsAffected()
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM alerts.threat_minutes WHERE minute < now() - make_interval(secs => $1)`, counts.Seconds()); err != nil {
		return 0, unavailable("prune minute counts", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM alerts.threat_minutes_scoped WHERE minute < now() - make_interval(secs => $1)`, counts.Seconds()); err != nil {
		return 0, unavailable("prune scoped minute counts", err)
	}
	return n, nil
}
