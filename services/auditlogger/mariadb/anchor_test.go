package mariadb_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"threatview/auditlogger"
	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
	"threatview/platform/wire"
)

// rebuildTree recomputes audit_tree from the rows' leaf_hash column, as a
// database writer who knows the tree's format would after rewriting rows.
func rebuildTree(t *testing.T, db *sql.DB) {
	t.Helper()
	rows, err := db.Query("SELECT leaf_hash FROM audit_events WHERE seq IS NOT NULL ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	tree, _ := trail.NewTree(0, nil)
	for rows.Next() {
		var h []byte
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		tree.Append(h, nil)
	}
	rows.Close()
	if _, err := db.Exec("UPDATE audit_tree SET size = ?, range_hashes = ?, root = ? WHERE id = 1",
		tree.Size(), trail.EncodeHashes(tree.Hashes()), tree.Root()); err != nil {
		t.Fatal(err)
	}
}

// storedSizes lists the sizes of the checkpoints in the object store.
func storedSizes(t *testing.T, st trail.ObjectStore) []uint64 {
	t.Helper()
	cps, err := trail.StoreReference{Store: st}.Checkpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, c := range cps {
		out = append(out, c.Size)
	}
	return out
}

// TestCheckpointer_RefusesNonExtension: a database writer rewrites or cuts
// the checkpointed history, recomputes leaves and tree and deletes
// audit_checkpoints; the worker (restarted, or still running) refuses to
// sign, counts the refusal and writes nothing.
func TestCheckpointer_RefusesNonExtension(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		restart bool // a new Checkpointer (a restarted worker) signs next
		tamper  func(t *testing.T, f *trailFixture)
	}{
		{"shrink, restarted", true, func(t *testing.T, f *trailFixture) {
			mustExec(t, f.db, "DELETE FROM audit_events WHERE seq >= 6")
		}},
		{"shrink, running", false, func(t *testing.T, f *trailFixture) {
			mustExec(t, f.db, "DELETE FROM audit_events WHERE seq >= 6")
		}},
		{"rewrite, restarted", true, func(t *testing.T, f *trailFixture) {
			r := f.rows[3]
			r.Outcome = 500
			mustExec(t, f.db, "UPDATE audit_events SET outcome = 500, leaf_hash = ? WHERE seq = 3", trail.LeafHash(&r))
		}},
		{"rewrite and extend, running", false, func(t *testing.T, f *trailFixture) {
			r := f.rows[3]
			r.Outcome = 500
			mustExec(t, f.db, "UPDATE audit_events SET outcome = 500, leaf_hash = ? WHERE seq = 3", trail.LeafHash(&r))
			rebuildTree(t, f.db)
			if _, err := mariadb.New(f.db).Insert(ctx, audittest.Records(5, time.Now())); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTrailFixture(t, 1, 10)
			var refusals atomic.Int64
			mk := func() *trail.Checkpointer {
				return &trail.Checkpointer{DB: mariadb.NewTrail(f.db), Store: f.store, Signer: f.signer,
					OnRefusal: func(error) { refusals.Add(1) }}
			}
			cp := mk()
			if _, err := cp.Once(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
			tc.tamper(t, f)
			rebuildTree(t, f.db)
			mustExec(t, f.db, "DELETE FROM audit_checkpoints")
			if tc.restart {
				cp = mk()
			}
			before := storedSizes(t, f.store)
			c, err := cp.Once(ctx, time.Now().Add(time.Second))
			if err == nil {
				t.Fatalf("Once signed size %d after the history was rewritten; want a refusal", c.Size)
			}
			if !errors.Is(err, trail.ErrNotExtension) || refusals.Load() != 1 {
				t.Fatalf("Once = %v, %d refusals; want ErrNotExtension counted once", err, refusals.Load())
			}
			if after := storedSizes(t, f.store); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("store checkpoints %v after the refusal, %v before", after, before)
			}
			var n int
			if err := f.db.QueryRow("SELECT COUNT(*) FROM audit_checkpoints").Scan(&n); err != nil || n != 0 {
				t.Fatalf("audit_checkpoints: %d rows, %v; want none", n, err)
			}
		})
	}
	t.Run("new empty store", func(t *testing.T) {
		// A new store (a new prefix after a restore): the last head is the
		// database's newest checkpoint, the bundles start again from 0, and
		// a history rewritten below that head is still refused.
		f := newTrailFixture(t, 2, 10)
		fresh := trail.Dir{Root: t.TempDir()}
		r := f.rows[3]
		r.Outcome = 500
		tx, err := f.db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("UPDATE audit_events SET outcome = 500, leaf_hash = ? WHERE seq = 3", trail.LeafHash(&r)); err != nil {
			t.Fatal(err)
		}
		cp := &trail.Checkpointer{DB: mariadb.NewTrail(tx), Store: fresh, Signer: f.signer}
		if c, err := cp.Once(ctx, time.Now()); !errors.Is(err, trail.ErrNotExtension) {
			t.Fatalf("rewritten, new store: Once = %+v, %v; want ErrNotExtension", c, err)
		}
		tx.Rollback()
		cp = &trail.Checkpointer{DB: mariadb.NewTrail(f.db), Store: fresh, Signer: f.signer}
		if c, err := cp.Once(ctx, time.Now()); err != nil || c.Size != 20 {
			t.Fatalf("new store: Once = %+v, %v; want size 20", c, err)
		}
		if rep := f.verifyWith(t, f.db, trail.StoreReference{Store: fresh}); !rep.OK || !rep.Anchored {
			t.Fatalf("verified from the new store: ok %v, problems %+v", rep.OK, rep.Problems)
		}
	})
	t.Run("OK extension", func(t *testing.T) {
		f := newTrailFixture(t, 1, 10)
		cp := &trail.Checkpointer{DB: mariadb.NewTrail(f.db), Store: f.store, Signer: f.signer}
		mustExec(t, f.db, "DELETE FROM audit_checkpoints") // the store, not the database, is trusted
		if _, err := mariadb.New(f.db).Insert(ctx, audittest.Records(300, time.Now())); err != nil {
			t.Fatal(err)
		}
		c, err := cp.Once(ctx, time.Now())
		if err != nil || c.Size != 310 {
			t.Fatalf("Once = %+v, %v; want size 310", c, err)
		}
		if rep := f.verify(t, f.db); !rep.OK {
			t.Fatalf("problems %+v", rep.Problems)
		}
	})
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestVerify_Unanchored: without a checkpoint outside the database a
// verification is not ok, whatever the database says.
func TestVerify_Unanchored(t *testing.T) {
	f := newTrailFixture(t, 2, 10)
	empty := trail.StoreReference{Store: trail.Dir{Root: t.TempDir()}}
	for name, ref := range map[string]trail.Reference{"no store": nil, "empty store": empty} {
		rep := f.verifyWith(t, f.db, ref)
		b, _ := json.Marshal(rep)
		if rep.OK || !strings.Contains(string(b), `"anchored":false`) || !hasProblem(rep.Problems, trail.Problem{ID: "checkpoints", Kind: trail.KindUnanchored}) {
			t.Errorf("%s: %s; want ok false, anchored false", name, b)
		}
	}
	rep := f.verify(t, f.db)
	if b, _ := json.Marshal(rep); !rep.OK || !strings.Contains(string(b), `"anchored":true`) {
		t.Errorf("with the store: %s; want ok, anchored", b)
	}
}

// insertPretrail stores n rows the way the service did before the trail:
// without seq or leaf_hash. Each gets a body of bodySize bytes and its
// digest.
func insertPretrail(t *testing.T, db *sql.DB, n, bodySize int, t0 time.Time) []wire.AuditRecord {
	t.Helper()
	recs := audittest.Records(n, t0)
	body := bytes.Repeat([]byte("x"), bodySize)
	for start := 0; start < n; start += 200 {
		part := recs[start:min(start+200, n)]
		q := "INSERT INTO audit_events (id,time,actor_token_id,actor_app_id,action,resource,outcome,user_agent,request_id,event_count,body_sha256,body) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?,?,?,?,?,?,?,?,?,?,?,?),", len(part)), ",")
		var args []any
		for i := range part {
			r := &part[i]
			r.ClientIP = ""
			b := append(fmt.Appendf(nil, "%d:", start+i), body...)
			r.Body = nil
			sum := sha256.Sum256(b)
			r.BodySHA256 = fmt.Sprintf("%x", sum)
			id, _ := auditlogger.ParseID(r.ID)
			args = append(args, id[:], r.Time, r.ActorToken, r.ActorApp, r.Action, r.Resource, r.Outcome, r.UserAgent,
				r.RequestID, r.EventCount, sum[:], b)
		}
		mustExec(t, db, q, args...)
	}
	return recs
}

// genesisFixture is a trail whose database held rows before the trail
// began.
func genesisFixture(t *testing.T) (*trailFixture, []wire.AuditRecord) {
	t.Helper()
	ctx := context.Background()
	_, db := audittest.MustDB(t)
	old := insertPretrail(t, db, 20, 100, time.Now().UTC().Add(-48*time.Hour).Truncate(time.Second))
	f := &trailFixture{db: db, store: trail.Dir{Root: t.TempDir()}}
	f.signer, f.keys = mustSigner(t)
	f.rows = audittest.Records(10, time.Now().UTC().Add(-time.Hour).Truncate(time.Second))
	if _, err := mariadb.New(db).Insert(ctx, f.rows); err != nil {
		t.Fatal(err)
	}
	cp := &trail.Checkpointer{DB: mariadb.NewTrail(db), Store: f.store, Signer: f.signer}
	if _, err := cp.Once(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	return f, old
}

// TestVerify_Genesis: the rows from before the trail are bound by the
// genesis in the signed checkpoint outside the database, not by the
// database's own unsigned columns.
func TestVerify_Genesis(t *testing.T) {
	f, old := genesisFixture(t)
	if rep := f.verify(t, f.db); !rep.OK || rep.Unchained != 20 {
		t.Fatalf("untouched: ok %v, unchained %d, problems %+v", rep.OK, rep.Unchained, rep.Problems)
	}
	forged := audittest.Record(1, time.Now().UTC()) // after the genesis (the fixture's first chained insert)
	fid, _ := auditlogger.ParseID(forged.ID)
	before := audittest.Record(2, old[5].Time.Add(time.Millisecond/2))
	bid, _ := auditlogger.ParseID(before.ID)
	oid, _ := auditlogger.ParseID(old[7].ID)
	for _, tc := range []struct {
		name   string
		tamper []string
		args   [][]any
		want   trail.Problem
	}{
		{"row after the genesis, genesis_at nulled",
			[]string{"INSERT INTO audit_events (id,time,action,outcome) VALUES (?,?,?,?)", "UPDATE audit_tree SET genesis_at = NULL"},
			[][]any{{fid[:], forged.Time, forged.Action, forged.Outcome}, nil},
			trail.Problem{ID: forged.ID, Kind: trail.KindInserted}},
		{"row after the genesis, genesis_at moved",
			[]string{"INSERT INTO audit_events (id,time,action,outcome) VALUES (?,?,?,?)", "UPDATE audit_tree SET genesis_at = NOW(6)"},
			[][]any{{fid[:], forged.Time, forged.Action, forged.Outcome}, nil},
			trail.Problem{ID: forged.ID, Kind: trail.KindInserted}},
		{"row among the old ones, genesis_rows raised",
			[]string{"INSERT INTO audit_events (id,time,action,outcome) VALUES (?,?,?,?)", "UPDATE audit_tree SET genesis_rows = genesis_rows + 1"},
			[][]any{{bid[:], before.Time, before.Action, before.Outcome}, nil},
			trail.Problem{ID: "genesis", Kind: trail.KindInserted}},
		{"old row modified",
			[]string{"UPDATE audit_events SET outcome = 500 WHERE id = ?"},
			[][]any{{oid[:]}},
			trail.Problem{ID: "genesis", Kind: trail.KindModified}},
		{"old row deleted, genesis_rows lowered",
			[]string{"DELETE FROM audit_events WHERE id = ?", "UPDATE audit_tree SET genesis_rows = genesis_rows - 1"},
			[][]any{{oid[:]}, nil},
			trail.Problem{ID: "genesis", Kind: trail.KindMissing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := f.db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			for i, q := range tc.tamper {
				if _, err := tx.Exec(q, tc.args[i]...); err != nil {
					t.Fatal(err)
				}
			}
			rep := f.verify(t, tx)
			if rep.OK || !hasProblem(rep.Problems, tc.want) {
				t.Fatalf("ok %v, problems %+v; want %s %s", rep.OK, rep.Problems, tc.want.Kind, tc.want.ID)
			}
		})
	}
}

// TestVerify_BodyRewritten: a body that no longer hashes to its
// body_sha256 is reported, in the trail and before it; a redacted (NULL)
// body is not.
func TestVerify_BodyRewritten(t *testing.T) {
	f, old := genesisFixture(t)
	ctx := context.Background()
	recs := audittest.Records(3, time.Now().UTC().Add(-10*time.Minute))
	for i := range recs {
		recs[i].Body = []byte(fmt.Sprintf(`{"events":[%d]}`, i))
		recs[i].BodySHA256 = ""
	}
	if _, err := mariadb.New(f.db).Insert(ctx, recs); err != nil {
		t.Fatal(err)
	}
	cp := &trail.Checkpointer{DB: mariadb.NewTrail(f.db), Store: f.store, Signer: f.signer}
	if _, err := cp.Once(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	mustExec(t, f.db, "UPDATE audit_events SET body = NULL WHERE seq = 11") // a redaction
	if rep := f.verify(t, f.db); !rep.OK {
		t.Fatalf("untouched (one body redacted): %+v", rep.Problems)
	}
	for name, r := range map[string]wire.AuditRecord{"chained": recs[2], "before the trail": old[4]} {
		t.Run(name, func(t *testing.T) {
			tx, err := f.db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			id, _ := auditlogger.ParseID(r.ID)
			if _, err := tx.Exec("UPDATE audit_events SET body = ? WHERE id = ?", []byte(`{"events":["rewritten"]}`), id[:]); err != nil {
				t.Fatal(err)
			}
			rep := f.verify(t, tx)
			if rep.OK || !hasProblem(rep.Problems, trail.Problem{ID: r.ID, Kind: trail.KindModified}) {
				t.Fatalf("ok %v, problems %+v; want %s modified", rep.OK, rep.Problems, r.ID)
			}
		})
	}
}

// TestVerify_PretrailMemoryBounded: rows from before the trail are
// streamed, their bodies never read: verifying 12,000 of them with 4.5 KB
// bodies (54 MB) grows the heap by far less than the bodies.
func TestVerify_PretrailMemoryBounded(t *testing.T) {
	ctx := context.Background()
	_, db := audittest.MustDB(t)
	const n, bodySize = 12000, 4500
	insertPretrail(t, db, n, bodySize, time.Now().UTC().Add(-72*time.Hour).Truncate(time.Second))
	f := &trailFixture{db: db, store: trail.Dir{Root: t.TempDir()}}
	f.signer, f.keys = mustSigner(t)
	if _, err := mariadb.New(db).Insert(ctx, audittest.Records(10, time.Now().Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	cp := &trail.Checkpointer{DB: mariadb.NewTrail(db), Store: f.store, Signer: f.signer}
	if _, err := cp.Once(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	rep := f.verify(t, db)
	took := time.Since(start)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	close(stop)
	<-sampled
	grown := int64(peak.Load()) - int64(base)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	t.Logf("%d rows from before the trail (%d MB of bodies): heap grew by %.1f MB at most; %s, %s of test-process CPU (the 1 ms heap sampler included)",
		n, n*bodySize>>20, float64(grown)/(1<<20), took.Round(time.Millisecond), cpu.Round(time.Millisecond))
	if !rep.OK || rep.Unchained != n {
		t.Fatalf("ok %v, unchained %d, problems %+v", rep.OK, rep.Unchained, rep.Problems)
	}
	if limit := int64(8 << 20); grown > limit {
		t.Fatalf("heap grew by %d bytes verifying %d rows from before the trail; want at most %d", grown, n, limit)
	}
}
