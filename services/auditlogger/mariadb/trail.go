package mariadb

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"threatview/auditlogger"
	"threatview/auditlogger/trail"
	"threatview/platform/wire"
)

// Querier is *sql.DB or *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// nodeLevels: complete subtrees stored at these levels (multiples of 8).
func storedLevel(level uint) bool { return level > 0 && level%8 == 0 }

// insertChained stores the records that are new, each with the next
// sequence number, and advances the tree in the same transaction. A record
// already stored (a redelivery) makes the first try fail on the primary key;
// the second try leaves out every record already there.
func (s *Store) insertChained(ctx context.Context, records []wire.AuditRecord) (int, error) {
	recs := dedupe(records)
	n, err := s.insertTx(ctx, recs)
	if isDuplicate(err) {
		recs, err = s.withoutStored(ctx, recs)
		if err != nil {
			return 0, err
		}
		n, err = s.insertTx(ctx, recs)
	}
	return n, err
}

// dedupe drops repeats of a (time, id) within a batch, keeping the first,
// and fills a missing body_sha256 from the body, so that a stored body is
// always covered by the leaf.
func dedupe(records []wire.AuditRecord) []wire.AuditRecord {
	type key struct {
		t  int64
		id string
	}
	seen := make(map[key]bool, len(records))
	out := make([]wire.AuditRecord, 0, len(records))
	for _, r := range records {
		k := key{r.Time.UnixMicro(), strings.ToLower(r.ID)}
		if seen[k] {
			continue
		}
		seen[k] = true
		r.ID = strings.ToLower(r.ID)
		r.Time = r.Time.UTC().Truncate(time.Microsecond) // as stored, and as the leaf has it
		if r.Body != nil && r.BodySHA256 == "" {
			sum := sha256.Sum256(r.Body)
			r.BodySHA256 = hex.EncodeToString(sum[:])
		}
		out = append(out, r)
	}
	return out
}

func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// withoutStored returns the records whose (time, id) is not stored yet.
func (s *Store) withoutStored(ctx context.Context, recs []wire.AuditRecord) ([]wire.AuditRecord, error) {
	stored := map[string]bool{}
	for start := 0; start < len(recs); start += 500 {
		part := recs[start:min(start+500, len(recs))]
		var q strings.Builder
		args := make([]any, 0, 2*len(part))
		q.WriteString("SELECT id, time FROM audit_events WHERE (time, id) IN (")
		for i := range part {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?)")
			id, _ := auditlogger.ParseID(part[i].ID)
			args = append(args, part[i].Time.UTC(), id[:])
		}
		q.WriteByte(')')
		// sql: constant fragments; every value is a ? argument.
		rows, err := s.db.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("find stored records: %w: %w", auditlogger.ErrUnavailable, err)
		}
		for rows.Next() {
			var id []byte
			var t time.Time
			if err := rows.Scan(&id, &t); err != nil {
				rows.Close()
				return nil, fmt.Errorf("find stored records: %w", err)
			}
			stored[string(id)+fmt.Sprint(t.UnixMicro())] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("find stored records: %w: %w", auditlogger.ErrUnavailable, err)
		}
	}
	out := recs[:0:0]
	for _, r := range recs {
		id, _ := auditlogger.ParseID(r.ID)
		if !stored[string(id[:])+fmt.Sprint(r.Time.UnixMicro())] {
			out = append(out, r)
		}
	}
	return out, nil
}

// insertTx is one try: lock the tree row, append, insert, commit.
func (s *Store) insertTx(ctx context.Context, recs []wire.AuditRecord) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	fail := func(op string, err error) (int, error) {
		if isDuplicate(err) {
			return 0, err
		}
		return 0, fmt.Errorf("insert batch of %d: %s: %w: %w", len(recs), op, auditlogger.ErrUnavailable, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fail("begin", err)
	}
	defer tx.Rollback()
	tree, genesis, err := lockTree(ctx, tx)
	if err != nil {
		return fail("lock tree", err)
	}
	if genesis {
		// The first chained insert: count the rows from before the trail.
		if _, err := tx.ExecContext(ctx, `UPDATE audit_tree SET genesis_at = NOW(6),
			genesis_rows = (SELECT COUNT(*) FROM audit_events WHERE seq IS NULL) WHERE id = 1`); err != nil {
			return fail("genesis", err)
		}
	}
	rowsArgs := make([][]any, len(recs))
	var buf []byte
	var nodes []any
	visit := func(level uint, index uint64, hash []byte) {
		if storedLevel(level) {
			nodes = append(nodes, level, index, hash)
		}
	}
	for i := range recs {
		args, f := rowArgs(&recs[i])
		buf = trail.AppendLeafInput(buf[:0], f)
		leaf := trail.HashLeafInput(buf)
		rowsArgs[i] = append(args, tree.Size(), leaf)
		tree.Append(leaf, visit)
	}
	for _, st := range s.build(rowsArgs) {
		// sql: a constant head and "(?,...)" rows; every value is an argument.
		_, err := tx.ExecContext(ctx, st.sql, st.args...)
		s.statements.Add(1)
		if err != nil {
			return fail("insert", err)
		}
	}
	if len(nodes) > 0 {
		q := "INSERT INTO audit_tree_nodes (level, idx, hash) VALUES (?,?,?)" + strings.Repeat(",(?,?,?)", len(nodes)/3-1)
		// sql: a constant head and one "(?,?,?)" a node; every value is an argument.
		if _, err := tx.ExecContext(ctx, q, nodes...); err != nil {
			return fail("insert nodes", err)
		}
	}
	if _, err := tx.ExecContext(ctx, "UPDATE audit_tree SET size = ?, range_hashes = ?, root = ?, updated_at = NOW(6) WHERE id = 1",
		tree.Size(), trail.EncodeHashes(tree.Hashes()), tree.Root()); err != nil {
		return fail("update tree", err)
	}
	if err := tx.Commit(); err != nil {
		return fail("commit", err)
	}
	return len(recs), nil
}

// lockTree reads the tree row FOR UPDATE: the database, not the worker's
// memory, holds the tree, so a worker killed mid-batch or a database
// restart leaves nothing to reconcile.
func lockTree(ctx context.Context, q Querier) (*trail.Tree, bool, error) {
	var size uint64
	var hashes []byte
	var genesisAt sql.NullTime
	err := q.QueryRowContext(ctx, "SELECT size, range_hashes, genesis_at FROM audit_tree WHERE id = 1 FOR UPDATE").
		Scan(&size, &hashes, &genesisAt)
	if err != nil {
		return nil, false, err
	}
	hs, err := trail.DecodeHashes(hashes)
	if err != nil {
		return nil, false, err
	}
	tree, err := trail.NewTree(size, hs)
	return tree, !genesisAt.Valid, err
}

// Trail reads the trail's tables for verification and proofs; q may be a
// transaction (the tamper tests verify inside one and roll it back).
type Trail struct {
	q Querier
	// Page is how many sequence numbers one query reads (default 20,000).
	Page int
	// Workers is how many pages are read at once (default 2; one on a
	// transaction).
	Workers int
	// archivedMonths are the months the archives table records (loaded by
	// LoadArchived).
	archivedMonths map[time.Time]bool
}

// NewTrail returns a Trail on q.
func NewTrail(q Querier) *Trail { return &Trail{q: q, Page: 20000, Workers: 2} }

var _ trail.Source = (*Trail)(nil)

// State implements trail.Source.
func (t *Trail) State(ctx context.Context) (trail.State, error) {
	var st trail.State
	var rows sql.NullInt64
	var at sql.NullTime
	err := t.q.QueryRowContext(ctx, "SELECT size, root, genesis_rows, genesis_at FROM audit_tree WHERE id = 1").
		Scan(&st.Size, &st.Root, &rows, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read tree state: %w: %w", auditlogger.ErrUnavailable, err)
	}
	st.GenesisRows = rows.Int64
	if at.Valid {
		st.GenesisAt = at.Time.UTC()
	}
	return st, nil
}

// Checkpoints implements trail.Source.
func (t *Trail) Checkpoints(ctx context.Context) ([]trail.Checkpoint, error) {
	return t.checkpoints(ctx, "SELECT "+checkpointCols+" FROM audit_checkpoints ORDER BY n")
}

// checkpointCols are a checkpoint's columns, the genesis (NULL when the
// checkpoint signs none) last.
const checkpointCols = "n, size, root, time, key_id, signature, genesis_rows, genesis_at, genesis_digest"

// LatestCheckpoint returns the newest stored checkpoint (nil when none).
func (t *Trail) LatestCheckpoint(ctx context.Context) (*trail.Checkpoint, error) {
	cs, err := t.checkpoints(ctx, "SELECT "+checkpointCols+" FROM audit_checkpoints ORDER BY n DESC LIMIT 1")
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	return &cs[0], nil
}

// CheckpointsPage returns up to limit checkpoints with n > after.
func (t *Trail) CheckpointsPage(ctx context.Context, after int64, limit int) ([]trail.Checkpoint, error) {
	return t.checkpoints(ctx, "SELECT "+checkpointCols+" FROM audit_checkpoints WHERE n > ? ORDER BY n LIMIT ?", after, limit)
}

// Checkpoint returns checkpoint n (nil when there is none).
func (t *Trail) Checkpoint(ctx context.Context, n int64) (*trail.Checkpoint, error) {
	cs, err := t.checkpoints(ctx, "SELECT "+checkpointCols+" FROM audit_checkpoints WHERE n = ?", n)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	return &cs[0], nil
}

func (t *Trail) checkpoints(ctx context.Context, q string, args ...any) ([]trail.Checkpoint, error) {
	// sql: q is one of the callers' string literals above; values are ? arguments.
	rows, err := t.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read checkpoints: %w: %w", auditlogger.ErrUnavailable, err)
	}
	defer rows.Close()
	var out []trail.Checkpoint
	for rows.Next() {
		var c trail.Checkpoint
		var gRows sql.NullInt64
		var gAt sql.NullTime
		var gDigest []byte
		if err := rows.Scan(&c.N, &c.Size, &c.Root, &c.Time, &c.KeyID, &c.Signature, &gRows, &gAt, &gDigest); err != nil {
			return nil, fmt.Errorf("read checkpoints: %w", err)
		}
		c.Time = c.Time.UTC()
		if gAt.Valid {
			c.Genesis = &trail.Genesis{Rows: gRows.Int64, At: gAt.Time.UTC(), Digest: gDigest}
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read checkpoints: %w: %w", auditlogger.ErrUnavailable, err)
	}
	return out, nil
}

// AddCheckpoint stores a signed checkpoint and returns its number.
func (t *Trail) AddCheckpoint(ctx context.Context, c *trail.Checkpoint) (int64, error) {
	var gRows, gAt, gDigest any
	if g := c.Genesis; g != nil {
		gRows, gAt, gDigest = g.Rows, g.At.UTC(), g.Digest
	}
	res, err := t.q.ExecContext(ctx, `INSERT INTO audit_checkpoints (size, root, time, key_id, signature, genesis_rows, genesis_at, genesis_digest)
		VALUES (?,?,?,?,?,?,?,?)`, c.Size, c.Root, c.Time.UTC(), c.KeyID, c.Signature, gRows, gAt, gDigest)
	if err != nil {
		return 0, fmt.Errorf("store checkpoint of size %d: %w: %w", c.Size, auditlogger.ErrUnavailable, err)
	}
	return res.LastInsertId()
}

// Rows implements trail.Source: keyset pages on seq.
func (t *Trail) Rows(ctx context.Context) iter.Seq2[trail.Row, error] {
	return t.rows(ctx, 0, ^uint64(0))
}

// RowsBetween yields the rows with from <= seq < to in seq order.
func (t *Trail) RowsBetween(ctx context.Context, from, to uint64) iter.Seq2[trail.Row, error] {
	return t.rows(ctx, from, to)
}

// trailCols are the columns the verifier reads: a row's fields without the
// body (the leaf covers body_sha256 only), its seq and leaf_hash, and
// whether a stored body does not hash to body_sha256 (computed by the
// database: the body never leaves it). The worker fills body_sha256 for
// every body it stores, so a chained row with a body and no digest is
// reported too.
const trailCols = "id,time,actor_token_id,actor_app_id,action,resource,outcome,client_ip,user_agent,request_id,event_count,body_sha256,seq,leaf_hash," +
	"(body IS NOT NULL AND (body_sha256 IS NULL OR UNHEX(SHA2(body, 256)) <> body_sha256))"

// unsequencedCols are trailCols for the rows from before the trail: no seq
// or leaf_hash, and a body is checked only against a digest stored with it
// (the service stored bodies without one before the trail).
const unsequencedCols = "id,time,actor_token_id,actor_app_id,action,resource,outcome,client_ip,user_agent,request_id,event_count,body_sha256,seq,leaf_hash," +
	"(body IS NOT NULL AND body_sha256 IS NOT NULL AND UNHEX(SHA2(body, 256)) <> body_sha256)"

// rows reads the rows in ranges of Page sequence numbers, Workers ranges
// at a time on connections of their own (one at a time on a transaction),
// and yields them in order: the database's reads, the leaf hashing and the
// caller's checks overlap on every core. A range holds every row of its
// sequence numbers (forged duplicates included) and starts at the smallest
// seq stored from there on, so gaps cost one index lookup, however wide.
func (t *Trail) rows(ctx context.Context, from, to uint64) iter.Seq2[trail.Row, error] {
	return func(yield func(trail.Row, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		workers := max(t.Workers, 1)
		if _, ok := t.q.(*sql.DB); !ok {
			workers = 1 // a transaction runs one statement at a time
		}
		step := uint64(max(t.Page, 1))
		type page struct {
			rows []trail.Row
			err  error
		}
		// futures holds each range's result in range order; at most
		// workers ranges are read at once.
		futures := make(chan chan page, workers)
		go func() {
			defer close(futures)
			sem := make(chan struct{}, workers)
			for a := from; a < to; {
				var next sql.NullInt64
				err := t.q.QueryRowContext(ctx, "SELECT MIN(seq) FROM audit_events WHERE seq >= ?", a).Scan(&next)
				res := make(chan page, 1)
				if err != nil {
					res <- page{err: fmt.Errorf("read trail rows: %w: %w", auditlogger.ErrUnavailable, err)}
					select {
					case futures <- res:
					case <-ctx.Done():
					}
					return
				}
				if !next.Valid || uint64(next.Int64) >= to {
					return
				}
				a = uint64(next.Int64)
				b := to
				if a+step > a && a+step < to {
					b = a + step
				}
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				select {
				case futures <- res:
				case <-ctx.Done():
					return
				}
				fetch := func(a, b uint64) {
					defer func() { <-sem }()
					rs, err := t.page(ctx, a, b, 0)
					res <- page{rs, err}
				}
				if workers == 1 {
					fetch(a, b)
				} else {
					go fetch(a, b)
				}
				a = b
			}
		}()
		for res := range futures {
			p := <-res
			if p.err != nil {
				yield(trail.Row{}, p.err)
				return
			}
			for _, r := range p.rows {
				if !yield(r, nil) {
					return
				}
			}
		}
	}
}

// page reads up to limit rows (0: all) with from <= seq < to in seq order.
func (t *Trail) page(ctx context.Context, from, to uint64, limit int) ([]trail.Row, error) {
	q := "SELECT " + trailCols + " FROM audit_events FORCE INDEX (by_seq) WHERE seq >= ? AND seq < ? ORDER BY seq"
	args := []any{from, to}
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	// sql: the constant columns and fragments; the range and limit are ? arguments.
	rows, err := t.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read trail rows: %w: %w", auditlogger.ErrUnavailable, err)
	}
	defer rows.Close()
	n := min(max(limit, 16), 4096)
	if limit > 0 {
		n = limit
	}
	out := make([]trail.Row, 0, n)
	var sc leafScanner
	sc.hashes = make([]byte, 0, 2*trail.HashSize*n)
	for rows.Next() {
		r, err := sc.scan(rows, n)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read trail rows: %w: %w", auditlogger.ErrUnavailable, err)
	}
	return out, nil
}

// leafScanner reads rows of trailCols. The leaf is computed from the raw
// column bytes: no record is built and no field is parsed back from text
// (about half the verifier's CPU). The rows' hashes (computed leaf and
// leaf_hash column) share arrays of 2n hashes: no allocation a row for them.
type leafScanner struct {
	f                         trail.LeafFields
	rawID, tok, app, act, res sql.RawBytes
	ip, ua, rid, sum, leaf    sql.RawBytes
	outcome, events           int64
	seq                       sql.NullInt64
	bodyBad                   bool
	buf, hashes               []byte
	dest                      []any
}

func (sc *leafScanner) keep(h []byte, n int) []byte {
	if len(sc.hashes)+len(h) > cap(sc.hashes) {
		sc.hashes = make([]byte, 0, 2*trail.HashSize*n)
	}
	sc.hashes = append(sc.hashes, h...)
	return sc.hashes[len(sc.hashes)-len(h) : len(sc.hashes) : len(sc.hashes)]
}

// scan reads the current row; n sizes the next hash array.
func (sc *leafScanner) scan(rows *sql.Rows, n int) (trail.Row, error) {
	if sc.dest == nil {
		sc.dest = []any{&sc.rawID, &sc.f.Time, &sc.tok, &sc.app, &sc.act, &sc.res, &sc.outcome, &sc.ip, &sc.ua, &sc.rid,
			&sc.events, &sc.sum, &sc.seq, &sc.leaf, &sc.bodyBad}
	}
	if err := rows.Scan(sc.dest...); err != nil {
		return trail.Row{}, fmt.Errorf("scan audit event: %w", err)
	}
	if len(sc.rawID) != 16 {
		return trail.Row{}, fmt.Errorf("scan audit event: id of %d bytes", len(sc.rawID))
	}
	f := &sc.f
	copy(f.ID[:], sc.rawID)
	f.ActorToken, f.ActorApp, f.Action, f.Resource = sc.tok, sc.app, sc.act, sc.res
	f.Outcome, f.EventCount = int(sc.outcome), int(sc.events)
	f.ClientIP, f.UserAgent, f.RequestID, f.BodySHA256 = sc.ip, sc.ua, sc.rid, sc.sum
	sc.buf = trail.AppendLeafInput(sc.buf[:0], *f)
	h := sha256.Sum256(sc.buf)
	r := trail.Row{Seq: uint64(sc.seq.Int64), HasSeq: sc.seq.Valid, Computed: sc.keep(h[:], n), BodyMismatch: sc.bodyBad}
	r.Record.ID = auditlogger.FormatID(f.ID)
	r.Record.Time = f.Time.UTC()
	if sc.leaf != nil {
		r.Leaf = sc.keep(sc.leaf, n)
	}
	return r, nil
}

// Unsequenced implements trail.Source: the rows stream in (time, id)
// order, their leaves computed and their bodies checked by the database,
// never read, so memory stays flat however many there are.
func (t *Trail) Unsequenced(ctx context.Context) iter.Seq2[trail.Row, error] {
	return func(yield func(trail.Row, error) bool) {
		rows, err := t.q.QueryContext(ctx, "SELECT "+unsequencedCols+" FROM audit_events WHERE seq IS NULL ORDER BY time, id")
		if err != nil {
			yield(trail.Row{}, fmt.Errorf("read unsequenced rows: %w: %w", auditlogger.ErrUnavailable, err))
			return
		}
		defer rows.Close()
		var sc leafScanner
		for rows.Next() {
			r, err := sc.scan(rows, 256)
			if err != nil {
				yield(trail.Row{}, err)
				return
			}
			if !yield(r, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(trail.Row{}, fmt.Errorf("read unsequenced rows: %w: %w", auditlogger.ErrUnavailable, err))
		}
	}
}

// LoadArchived reads which months the archives table records for
// audit_events (a missing table means none).
func (t *Trail) LoadArchived(ctx context.Context) error {
	t.archivedMonths = map[time.Time]bool{}
	rows, err := t.q.QueryContext(ctx, "SELECT month FROM archives WHERE table_name = 'audit_events'")
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1146 { // no such table
			return nil
		}
		return fmt.Errorf("read archives: %w: %w", auditlogger.ErrUnavailable, err)
	}
	defer rows.Close()
	for rows.Next() {
		var m time.Time
		if err := rows.Scan(&m); err != nil {
			return fmt.Errorf("read archives: %w", err)
		}
		t.archivedMonths[m.UTC()] = true
	}
	return rows.Err()
}

// Archived implements trail.Source.
func (t *Trail) Archived(at time.Time) bool {
	at = at.UTC()
	return t.archivedMonths[time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)]
}

// LeavesBetween returns the leaf hashes of entries [from, to) (as the
// export of leaf bundles needs them), with their ids and times; a seq with
// no row or several rows is an error.
func (t *Trail) LeavesBetween(ctx context.Context, from, to uint64) ([]trail.Entry, error) {
	out := make([]trail.Entry, 0, to-from)
	for r, err := range t.rows(ctx, from, to) {
		if err != nil {
			return nil, err
		}
		if r.Seq != from+uint64(len(out)) {
			return nil, fmt.Errorf("leaves %d..%d: row %d where %d was expected", from, to, r.Seq, from+uint64(len(out)))
		}
		id, _ := auditlogger.ParseID(r.Record.ID)
		out = append(out, trail.Entry{Seq: r.Seq, ID: id, Time: r.Record.Time, Leaf: r.Leaf})
	}
	if uint64(len(out)) != to-from {
		return nil, fmt.Errorf("leaves %d..%d: %d rows", from, to, len(out))
	}
	return out, nil
}
