package mariadb_test

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"database/sql"
	"encoding/base64"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"threatview/auditlogger"
	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
	"threatview/platform/wire"
)

// mustSigner returns a fresh signing key and its keyring.
func mustSigner(tb testing.TB) (*trail.Signer, trail.Keyring) {
	tb.Helper()
	seed := make([]byte, ed25519.SeedSize)
	_, _ = crand.Read(seed)
	s, ring, err := trail.ParseSigningKeys(base64.StdEncoding.EncodeToString(seed))
	if err != nil {
		tb.Fatal(err)
	}
	return s, ring
}

// trailFixture is a chained trail of rows with checkpoints in a directory.
type trailFixture struct {
	db     *sql.DB
	store  trail.Dir
	keys   trail.Keyring
	signer *trail.Signer
	rows   []wire.AuditRecord // by seq
}

func newTrailFixture(t *testing.T, batches, perBatch int) *trailFixture {
	t.Helper()
	ctx := context.Background()
	_, db := audittest.MustDB(t)
	f := &trailFixture{db: db, store: trail.Dir{Root: t.TempDir()}}
	f.signer, f.keys = mustSigner(t)
	s := mariadb.New(db)
	cp := &trail.Checkpointer{DB: mariadb.NewTrail(db), Store: f.store, Signer: f.signer}
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	for b := 0; b < batches; b++ {
		recs := audittest.Records(perBatch, t0.Add(time.Duration(b)*time.Minute))
		if n, err := s.Insert(ctx, recs); err != nil || n != perBatch {
			t.Fatalf("Insert = %d, %v", n, err)
		}
		f.rows = append(f.rows, recs...)
		if b%2 == 1 || b == batches-1 {
			if _, err := cp.Once(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

func (f *trailFixture) verify(tb testing.TB, q mariadb.Querier) *trail.Report {
	return f.verifyWith(tb, q, trail.StoreReference{Store: f.store, All: true})
}

func (f *trailFixture) verifyWith(tb testing.TB, q mariadb.Querier, ref trail.Reference) *trail.Report {
	tb.Helper()
	src := mariadb.NewTrail(q)
	src.Page = 7 // pages end inside the trail, and inside runs of forged duplicates
	if err := src.LoadArchived(context.Background()); err != nil {
		tb.Fatal(err)
	}
	rep, err := trail.Verify(context.Background(), src, ref, f.keys, trail.Options{})
	if err != nil {
		tb.Fatalf("Verify: %v", err)
	}
	return rep
}

func TestTrail_VerifyUntampered(t *testing.T) {
	f := newTrailFixture(t, 4, 50)
	rep := f.verify(t, f.db)
	if !rep.OK || rep.Checked != 200 || len(rep.Problems) != 0 || rep.Checkpoint == nil || rep.Checkpoint.Size != 200 {
		t.Fatalf("Verify = ok %v, checked %d, checkpoint %+v, problems %+v; want ok, 200, size 200", rep.OK, rep.Checked, rep.Checkpoint, rep.Problems)
	}
	// Without the object store: the rows against their leaf_hash column and
	// the signed roots, and the report unanchored (never ok).
	if rep := f.verifyWith(t, f.db, nil); rep.OK || rep.Anchored || rep.Checked != 200 || len(rep.Problems) != 1 || rep.Problems[0].Kind != trail.KindUnanchored {
		t.Fatalf("without the store: ok %v, checked %d, problems %+v; want only unanchored", rep.OK, rep.Checked, rep.Problems)
	}
	tx, err := f.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	r := f.rows[60]
	r.Outcome = 500
	if _, err := tx.Exec("UPDATE audit_events SET outcome = 500, leaf_hash = ? WHERE seq = 60", trail.LeafHash(&r)); err != nil {
		t.Fatal(err)
	}
	rep = f.verifyWith(t, tx, nil)
	tx.Rollback()
	if rep.OK || !hasProblem(rep.Problems, trail.Problem{ID: "checkpoint 2", Kind: trail.KindModified}) {
		t.Fatalf("row and leaf_hash rewritten, without the store: %+v; want checkpoint 2 (size 200) not reproduced", rep.Problems)
	}
	// Redacting a body (a data-subject erasure) keeps the trail valid.
	if _, err := f.db.Exec("UPDATE audit_events SET body = NULL WHERE seq = 3"); err != nil {
		t.Fatal(err)
	}
	if rep := f.verify(t, f.db); !rep.OK {
		t.Fatalf("after redacting a body: problems %+v", rep.Problems)
	}
}

// tamper is one tampering: it changes the trail (in tx, or the store) and
// returns the problems that must be reported, and an undo for the store.
type tamper func(tx *sql.Tx, rng *rand.Rand) (want []trail.Problem, undo func(), err error)

// TestTrail_Tamperings applies random tamperings, each inside a transaction
// that is rolled back (the store's files are put back), and checks that
// every one is reported, naming the row; every 500th round checks that the
// untouched trail verifies.
func TestTrail_Tamperings(t *testing.T) {
	rounds := 10000
	if s := os.Getenv("TRAIL_TAMPER_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	f := newTrailFixture(t, 4, 12)
	ctx := context.Background()
	// The store's files change only in the rounds that tamper with them
	// (those return an undo); the others read it from memory.
	cached := mustCache(t, trail.StoreReference{Store: f.store})
	size := len(f.rows)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	idOf := func(seq int) []byte { id, _ := auditlogger.ParseID(f.rows[seq].ID); return id[:] }
	where := func(seq int) (string, []any) {
		return " WHERE time = ? AND id = ?", []any{f.rows[seq].Time, idOf(seq)}
	}
	exec := func(tx *sql.Tx, q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}
	prob := func(seq int, kind string) trail.Problem { return trail.Problem{ID: f.rows[seq].ID, Kind: kind} }
	fields := []struct {
		col string
		val func(seq int) any
		// id reports the row's id after the change.
		newID string
	}{
		{col: "actor_token_id", val: func(int) any { return "tok_forged" }},
		{col: "actor_app_id", val: func(int) any { return "com.example.other" }},
		{col: "action", val: func(int) any { return "tokens.revoke" }},
		{col: "resource", val: func(int) any { return "/v1/other" }},
		{col: "outcome", val: func(int) any { return 500 }},
		{col: "client_ip", val: func(int) any { return []byte{203, 0, 113, 9} }},
		{col: "user_agent", val: func(int) any { return "curl/8" }},
		{col: "request_id", val: func(int) any { return "r" }},
		{col: "event_count", val: func(int) any { return 99 }},
		{col: "body_sha256", val: func(int) any { return nil }},
		{col: "time", val: func(seq int) any { return f.rows[seq].Time.Add(time.Second) }},
	}
	kinds := []struct {
		name string
		do   tamper
	}{
		{"modify", func(tx *sql.Tx, rng *rand.Rand) ([]trail.Problem, func(), error) {
			seq := rng.IntN(size)
			fl := fields[rng.IntN(len(fields))]
			w, args := where(seq)
			q := "UPDATE audit_events SET " + fl.col + " = ?"
			if rng.IntN(2) == 0 { // an attacker who knows the leaf formula
				r := f.rows[seq]
				q += ", leaf_hash = ?"
				args = append([]any{fl.val(seq), forgedLeaf(r, fl.col, fl.val(seq))}, args...)
			} else {
				args = append([]any{fl.val(seq)}, args...)
			}
			return []trail.Problem{prob(seq, trail.KindModified)}, nil, exec(tx, q+w, args...)
		}},
		{"modify id", func(tx *sql.Tx, rng *rand.Rand) ([]trail.Problem, func(), error) {
			seq := rng.IntN(size)
			newID := audittest.NewID()
			nid, _ := auditlogger.ParseID(newID)
			w, args := where(seq)
			return []trail.Problem{{ID: newID, Kind: trail.KindModified}}, nil,
				exec(tx, "UPDATE audit_events SET id = ?"+w, append([]any{nid[:]}, args...)...)
		}},
		{"delete", func(tx *sql.Tx, rng *rand.Rand) ([]trail.Problem, func(), error) {
			seq := rng.IntN(size)
			if rng.IntN(4) == 0 {
				seq = size - 1 // the newest
			}
			kind := trail.KindMissing
			if seq == size-1 {
				kind = trail.KindTruncated
			}
			w, args := where(seq)
			return []trail.Problem{prob(seq, kind)}, nil, exec(tx, "DELETE FROM audit_events"+w, args...)
		}},
		{"insert", func(tx *sql.Tx, rng *rand.Rand) ([]trail.Problem, func(), error) {
			r := audittest.Record(rng.IntN(1000), f.rows[rng.IntN(size)].Time.Add(time.Microsecond))
			id, _ := auditlogger.ParseID(r.ID)
			var seq any
			switch rng.IntN(3) {
			case 0:
				seq = rng.IntN(size) // a second row at a taken position
			case 1:
				seq = size + rng.IntN(5) // past the tree
			}
			leaf := trail.LeafHash(&r)
			return []trail.Problem{{ID: r.ID, Kind: trail.KindInserted}}, nil, exec(tx,
				"INSERT INTO audit_events (id,time,action,outcome,seq,leaf_hash) VALUES (?,?,?,?,?,?)",
				id[:], r.Time, r.Action, r.Outcome, seq, leaf)
		}},
		{"rewrite body", func(tx *sql.Tx, rng *rand.Rand) ([]trail.Problem, func(), error) {
			// The body is not in the leaf; its digest is, and the body must
			// hash to it.
			seq := rng.IntN(size)
			w, args := where(seq)
			body := make([]byte, 1+rng.IntN(64))
			_, _ = crand.Read(body)
			return []trail.Problem{prob(seq, trail.KindModified)}, nil,
				exec(tx, "UPDATE audit_events SET body = ?"+w, append([]any{body}, args...)...)
		}},
		{"insert unsequenced, hide the genesis", func(tx *sql.Tx, rng *rand.Rand) ([]trail.Problem, func(), error) {
			r := audittest.Record(rng.IntN(1000), f.rows[rng.IntN(size)].Time.Add(time.Microsecond))
			id, _ := auditlogger.ParseID(r.ID)
			if err := exec(tx, "INSERT INTO audit_events (id,time,action,outcome) VALUES (?,?,?,?)", id[:], r.Time, r.Action, r.Outcome); err != nil {
				return nil, nil, err
			}
			q := []string{"UPDATE audit_tree SET genesis_at = NULL", "UPDATE audit_tree SET genesis_rows = genesis_rows + 1, genesis_at = NOW(6)"}[rng.IntN(2)]
			return []trail.Problem{{ID: r.ID, Kind: trail.KindInserted}}, nil, exec(tx, q)
		}},
		{"swap", func(tx *sql.Tx, rng *rand.Rand) ([]trail.Problem, func(), error) {
			a := rng.IntN(size)
			b := (a + 1 + rng.IntN(size-1)) % size
			wa, aa := where(a)
			wb, ab := where(b)
			if err := exec(tx, "UPDATE audit_events SET seq = ?"+wa, append([]any{b}, aa...)...); err != nil {
				return nil, nil, err
			}
			return []trail.Problem{prob(a, trail.KindReordered), prob(b, trail.KindReordered)}, nil,
				exec(tx, "UPDATE audit_events SET seq = ?"+wb, append([]any{a}, ab...)...)
		}},
		{"truncate", func(tx *sql.Tx, rng *rand.Rand) ([]trail.Problem, func(), error) {
			k := size - 1 - rng.IntN(10)
			var want []trail.Problem
			for s := k; s < size; s++ {
				want = append(want, prob(s, trail.KindTruncated))
			}
			if err := exec(tx, "DELETE FROM audit_events WHERE seq >= ?", k); err != nil {
				return nil, nil, err
			}
			if rng.IntN(2) == 0 { // and roll the tree back to hide it
				return want, nil, exec(tx, "UPDATE audit_tree SET size = ?", k)
			}
			return want, nil, nil
		}},
		{"replace checkpoint", func(tx *sql.Tx, rng *rand.Rand) ([]trail.Problem, func(), error) {
			var n int64
			if err := tx.QueryRowContext(ctx, "SELECT n FROM audit_checkpoints ORDER BY RAND() LIMIT 1").Scan(&n); err != nil {
				return nil, nil, err
			}
			root := make([]byte, 32)
			_, _ = crand.Read(root)
			return []trail.Problem{{ID: fmt.Sprintf("checkpoint %d", n), Kind: trail.KindBadSignature}}, nil,
				exec(tx, "UPDATE audit_checkpoints SET root = ? WHERE n = ?", root, n)
		}},
		{"replace stored checkpoint", func(tx *sql.Tx, rng *rand.Rand) ([]trail.Problem, func(), error) {
			keys, err := f.store.List(ctx, "checkpoints/")
			if err != nil {
				return nil, nil, err
			}
			key := keys[rng.IntN(len(keys))]
			old, _ := f.store.Get(ctx, key)
			cps, _ := trail.StoreReference{Store: f.store}.Checkpoints(ctx)
			c := cps[0]
			for _, x := range cps {
				if string(trail.MarshalCheckpoint(&x)) == string(old) {
					c = x
				}
			}
			c.Size++
			path := filepath.Join(f.store.Root, filepath.FromSlash(key))
			if err := os.WriteFile(path, trail.MarshalCheckpoint(&c), 0o600); err != nil {
				return nil, nil, err
			}
			return []trail.Problem{{ID: fmt.Sprintf("checkpoint %d@%s", c.Size, c.Time.UTC().Format(time.RFC3339Nano)), Kind: trail.KindBadSignature}},
				func() { os.WriteFile(path, old, 0o600) }, nil
		}},
		{"foreign key", func(tx *sql.Tx, rng *rand.Rand) ([]trail.Problem, func(), error) {
			// Modify a row, then sign a new checkpoint over the changed
			// tree with a key of one's own.
			seq := rng.IntN(size)
			w, args := where(seq)
			if err := exec(tx, "UPDATE audit_events SET outcome = 403"+w, args...); err != nil {
				return nil, nil, err
			}
			foreign, _ := mustSigner(t)
			cp := foreign.Sign(uint64(size), make([]byte, 32), time.Now())
			n, err := mariadb.NewTrail(tx).AddCheckpoint(ctx, &cp)
			if err != nil {
				return nil, nil, err
			}
			return []trail.Problem{{ID: fmt.Sprintf("checkpoint %d", n), Kind: trail.KindBadSignature},
				prob(seq, trail.KindModified)}, nil, nil
		}},
	}
	counts := map[string]int{}
	for round := 0; round < rounds; round++ {
		k := kinds[rng.IntN(len(kinds))]
		counts[k.name]++
		tx, err := f.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, undo, err := k.do(tx, rng)
		if err != nil {
			tx.Rollback()
			t.Fatalf("round %d (%s): tamper: %v", round, k.name, err)
		}
		var rep *trail.Report
		if undo != nil {
			rep = f.verify(t, tx)
		} else {
			rep = f.verifyWith(t, tx, cached)
		}
		if undo != nil {
			undo()
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if rep.OK {
			t.Fatalf("round %d (%s): verified OK after tampering; want %+v", round, k.name, want)
		}
		for _, w := range want {
			if !hasProblem(rep.Problems, w) {
				t.Fatalf("round %d (%s): no %s problem naming %s; got %+v", round, k.name, w.Kind, w.ID, rep.Problems)
			}
		}
		if round%500 == 0 {
			if rep := f.verify(t, f.db); !rep.OK {
				t.Fatalf("round %d: untampered trail: %+v", round, rep.Problems)
			}
		}
	}
	t.Logf("tamperings by kind: %v", counts)
}

func hasProblem(ps []trail.Problem, w trail.Problem) bool {
	for _, p := range ps {
		if p.ID == w.ID && p.Kind == w.Kind {
			return true
		}
	}
	return false
}

// forgedLeaf is the leaf an attacker would compute for r with col set to v.
func forgedLeaf(r wire.AuditRecord, col string, v any) []byte {
	switch col {
	case "actor_token_id":
		r.ActorToken = v.(string)
	case "actor_app_id":
		r.ActorApp = v.(string)
	case "action":
		r.Action = v.(string)
	case "resource":
		r.Resource = v.(string)
	case "outcome":
		r.Outcome = v.(int)
	case "client_ip":
		r.ClientIP = "203.0.113.9"
	case "user_agent":
		r.UserAgent = v.(string)
	case "request_id":
		r.RequestID = v.(string)
	case "event_count":
		r.EventCount = v.(int)
	case "body_sha256":
		r.BodySHA256 = ""
	case "time":
		r.Time = v.(time.Time)
	}
	return trail.LeafHash(&r)
}

// cachedRef is a trail.Reference read once.
type cachedRef struct {
	cps     []trail.Checkpoint
	entries []trail.Entry
}

func mustCache(tb testing.TB, ref trail.Reference) *cachedRef {
	tb.Helper()
	ctx := context.Background()
	c := &cachedRef{}
	var err error
	if c.cps, err = ref.Checkpoints(ctx); err != nil {
		tb.Fatal(err)
	}
	for e, err := range ref.Entries(ctx) {
		if err != nil {
			tb.Fatal(err)
		}
		c.entries = append(c.entries, e)
	}
	return c
}

func (c *cachedRef) Checkpoints(context.Context) ([]trail.Checkpoint, error) {
	return append([]trail.Checkpoint(nil), c.cps...), nil
}

func (c *cachedRef) Entries(context.Context) iter.Seq2[trail.Entry, error] {
	return func(yield func(trail.Entry, error) bool) {
		for _, e := range c.entries {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// TestVerify_ForgedFarSequenceNumber: a forged row with a sequence number
// far past the tree is named inserted, and the verification does not walk
// the sequence numbers in between.
func TestVerify_ForgedFarSequenceNumber(t *testing.T) {
	f := newTrailFixture(t, 2, 10)
	r := audittest.Record(7, f.rows[3].Time.Add(time.Microsecond))
	id, _ := auditlogger.ParseID(r.ID)
	if _, err := f.db.Exec("INSERT INTO audit_events (id,time,action,outcome,seq,leaf_hash) VALUES (?,?,?,?,?,?)",
		id[:], r.Time, r.Action, r.Outcome, uint64(1)<<62, trail.LeafHash(&r)); err != nil {
		t.Fatal(err)
	}
	done := make(chan *trail.Report, 1)
	go func() { done <- f.verify(t, f.db) }()
	select {
	case rep := <-done:
		if rep.OK || len(rep.Problems) != 1 || rep.Problems[0].ID != r.ID || rep.Problems[0].Kind != trail.KindInserted {
			t.Fatalf("problems %+v, want %s inserted alone", rep.Problems, r.ID)
		}
	case <-time.After(time.Minute):
		t.Fatal("verification still running after a minute: it walks the sequence numbers up to the forged one")
	}
}

// staleState is a Source whose first State is the one read before the
// worker's last batch, as when a verification reads the tree state and the
// worker commits a batch before the rows are read.
type staleState struct {
	trail.Source
	first *trail.State
}

func (s *staleState) State(ctx context.Context) (trail.State, error) {
	if st := s.first; st != nil {
		s.first = nil
		return *st, nil
	}
	return s.Source.State(ctx)
}

// TestTrail_VerifyBesideAppends: rows the worker appended after the
// verification read the tree state are not reported inserted; a row
// written past the tree still is. Before, the first case reported every
// such row as "sequence number N is past the tree's N leaves" (a CI run of
// the conformance test met it under concurrent writes).
func TestTrail_VerifyBesideAppends(t *testing.T) {
	f := newTrailFixture(t, 2, 20)
	ctx := context.Background()
	before, err := mariadb.NewTrail(f.db).State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recs := audittest.Records(5, time.Now().UTC().Add(-time.Minute).Truncate(time.Second))
	if n, err := mariadb.New(f.db).Insert(ctx, recs); err != nil || n != 5 {
		t.Fatalf("Insert = %d, %v", n, err)
	}
	verify := func() *trail.Report {
		src := &staleState{Source: mariadb.NewTrail(f.db), first: &before}
		rep, err := trail.Verify(ctx, src, trail.StoreReference{Store: f.store, All: true}, f.keys, trail.Options{})
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		return rep
	}
	if rep := verify(); !rep.OK || len(rep.Problems) != 0 {
		t.Fatalf("rows appended after the state was read: ok %v, problems %+v; want ok", rep.OK, rep.Problems)
	}
	r := audittest.Record(7, time.Now().UTC())
	id, _ := auditlogger.ParseID(r.ID)
	if _, err := f.db.Exec("INSERT INTO audit_events (id,time,action,outcome,seq,leaf_hash) VALUES (?,?,?,?,?,?)",
		id[:], r.Time, r.Action, r.Outcome, before.Size+9, trail.LeafHash(&r)); err != nil {
		t.Fatal(err)
	}
	rep := verify()
	if rep.OK || len(rep.Problems) != 1 || rep.Problems[0].ID != r.ID || rep.Problems[0].Kind != trail.KindInserted {
		t.Fatalf("a row past the tree: ok %v, problems %+v; want it inserted", rep.OK, rep.Problems)
	}
}
