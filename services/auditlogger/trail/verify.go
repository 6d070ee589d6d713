package trail

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"iter"
	"sort"
	"time"

	"threatview/auditlogger"
	"threatview/platform/wire"
)

// Problem kinds, as in the public contract.
const (
	KindModified     = "modified"
	KindMissing      = "missing"
	KindInserted     = "inserted"
	KindReordered    = "reordered"
	KindTruncated    = "truncated"
	KindBadSignature = "bad_signature"
	KindUnanchored   = "unanchored"
)

// Problem is one finding: the row (its id and time) or the checkpoint
// ("checkpoint N") it concerns, its kind and a sentence.
type Problem struct {
	ID     string    `json:"id"`
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail"`
}

// Report is the result of a verification.
type Report struct {
	OK bool `json:"ok"`
	// Anchored is true when a correctly signed checkpoint was read from
	// the object store outside the database. Without one the database
	// could have been rewritten whole, so the report is not ok (a problem
	// of kind unanchored).
	Anchored   bool        `json:"anchored"`
	Checked    int64       `json:"checked"`
	Checkpoint *Checkpoint `json:"checkpoint"`
	Problems   []Problem   `json:"problems"`
	// Unchained counts the rows stored before the trail began (the genesis).
	Unchained int64 `json:"unchained"`
	// Archived counts leaves whose rows were not in the database because
	// their month was archived and dropped (the offline verifier checks them
	// in the archive).
	Archived int64 `json:"archived"`
}

// Row is one stored audit row as the verifier reads it.
type Row struct {
	Seq    uint64
	HasSeq bool
	Record wire.AuditRecord
	Leaf   []byte // the leaf_hash column (nil when NULL)
	// Computed, when set, is the leaf of the row's fields, computed by the
	// source from the raw columns (then Record holds only ID and Time).
	Computed []byte
	// BodyMismatch is set by the source when a stored body does not hash
	// to the row's body_sha256 (a NULL body, a redaction, never is).
	BodyMismatch bool
}

// leafOf returns the leaf of a row's fields.
func leafOf(r *Row) []byte {
	if r.Computed != nil {
		return r.Computed
	}
	return LeafHash(&r.Record)
}

// State is the database's record of the tree the worker has built.
type State struct {
	Size        uint64
	Root        []byte
	GenesisRows int64
	GenesisAt   time.Time // zero until the worker's first chained insert
}

// Source is the audit database (or an archive standing in for part of it).
type Source interface {
	// State returns the tree state row.
	State(ctx context.Context) (State, error)
	// Checkpoints returns the stored checkpoints in ascending N.
	Checkpoints(ctx context.Context) ([]Checkpoint, error)
	// Rows yields the rows with a sequence number in ascending order
	// (several rows may share one), then nothing more.
	Rows(ctx context.Context) iter.Seq2[Row, error]
	// Unsequenced yields the rows without a sequence number.
	Unsequenced(ctx context.Context) iter.Seq2[Row, error]
	// Archived reports whether rows of t's month may be absent because that
	// month was archived.
	Archived(t time.Time) bool
}

// Reference is what the trail keeps outside the database: checkpoints and
// the leaf bundles, in the object store.
type Reference interface {
	// Checkpoints returns the stored checkpoints.
	Checkpoints(ctx context.Context) ([]Checkpoint, error)
	// Entries yields the leaf entries in ascending sequence order.
	Entries(ctx context.Context) iter.Seq2[Entry, error]
}

// SinceReference is a Reference that reads only the checkpoints a
// verification needs: the stored copy of since (the database's newest
// trusted checkpoint, nil when it has none) and the newest one stored. The
// newest signs every leaf before it, so the older ones add nothing a
// verification needs (and a locked bucket keeps them unchanged).
type SinceReference interface {
	CheckpointsSince(ctx context.Context, since *Checkpoint) ([]Checkpoint, error)
}

// Options narrow a verification's report (not its checks) to rows whose
// time is in [From, To).
type Options struct {
	From, To time.Time
	// MaxProblems caps the problems reported (default 10,000).
	MaxProblems int
}

type verifier struct {
	opts     Options
	rep      Report
	problems int
}

func (v *verifier) inRange(t time.Time) bool {
	return (v.opts.From.IsZero() || !t.Before(v.opts.From)) && (v.opts.To.IsZero() || t.Before(v.opts.To))
}

func (v *verifier) add(id string, t time.Time, kind, format string, a ...any) {
	if !t.IsZero() && !v.inRange(t) {
		return
	}
	v.problems++
	if v.problems > v.opts.MaxProblems {
		return
	}
	v.rep.Problems = append(v.rep.Problems, Problem{ID: id, Time: t, Kind: kind, Detail: fmt.Sprintf(format, a...)})
}

// candidate is a row whose leaf is not the reference's at its position.
type candidate struct {
	row  Row
	leaf []byte
}

// Verify checks the trail in src against the signed checkpoints (from src
// and ref) and, when ref is not nil, against the leaves kept outside the
// database, which lets it name each modified, missing or reordered row.
// Without ref a row whose leaf_hash column was rewritten along with its
// fields is found only as a checkpoint whose root the rows do not
// reproduce. An error means the check could not run (not that it failed).
func Verify(ctx context.Context, src Source, ref Reference, keys Keyring, opts Options) (*Report, error) {
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 10000
	}
	v := &verifier{opts: opts}
	state, err := src.State(ctx)
	if err != nil {
		return nil, err
	}
	trusted, err := v.checkpoints(ctx, src, ref, keys)
	if err != nil {
		return nil, err
	}
	if !v.rep.Anchored {
		v.add("checkpoints", time.Time{}, KindUnanchored,
			"no correctly signed checkpoint outside the database: the database alone cannot show it was not rewritten")
	}
	var target uint64
	if len(trusted) > 0 {
		last := trusted[len(trusted)-1]
		target = last.Size
		v.rep.Checkpoint = &last
	}
	if state.Size < target {
		v.add("audit_tree", time.Time{}, KindTruncated, "the tree state has %d leaves, the signed checkpoint %d", state.Size, target)
	}

	// The reference leaves: from the object store when there is one.
	var next func() (Entry, error, bool)
	var refTree *Tree
	if ref != nil {
		n, stop := iter.Pull2(ref.Entries(ctx))
		defer stop()
		next = n
		refTree, _ = NewTree(0, nil)
	}
	rowTree, _ := NewTree(0, nil)
	refCps, rowCps := trusted, trusted
	checkRoot := func(t *Tree, cps *[]Checkpoint, what string) {
		for len(*cps) > 0 && (*cps)[0].Size < t.Size() {
			*cps = (*cps)[1:]
		}
		if len(*cps) > 0 && (*cps)[0].Size == t.Size() && !bytes.Equal(t.Root(), (*cps)[0].Root) {
			c := (*cps)[0]
			v.add(checkpointName(&c), time.Time{}, KindModified,
				"the %s do not reproduce the signed root of size %d", what, c.Size)
		}
	}
	var refEntry Entry
	refDone := ref == nil
	pullRef := func(seq uint64) (*Entry, error) {
		for !refDone && (refEntry.Leaf == nil || refEntry.Seq < seq) {
			e, err, ok := next()
			if !ok {
				refDone = true
				refEntry = Entry{}
				break
			}
			if err != nil {
				return nil, err
			}
			if e.Seq != refTree.Size() {
				return nil, fmt.Errorf("leaf bundles: entry %d where %d was expected", e.Seq, refTree.Size())
			}
			refTree.Append(e.Leaf, nil)
			refEntry = e
			checkRoot(refTree, &refCps, "leaves kept outside the database")
		}
		if !refDone && refEntry.Seq == seq {
			return &refEntry, nil
		}
		return nil, nil
	}

	// appendedSince tells a row past the state read above that the worker
	// appended since (it commits a batch's rows and the grown tree state in
	// one transaction, so the state read again covers them) from one
	// written past the tree (the state read again does not): rows and state
	// are read at different moments while the worker writes.
	fresh := state.Size
	appendedSince := func(seq uint64) bool {
		if seq >= fresh {
			if s, err := src.State(ctx); err == nil {
				fresh = s.Size
			}
		}
		return seq < fresh
	}
	var cands []candidate
	var lastGood int64 = -1 // highest seq with a row in place
	var gaps []Entry        // reference entries with no row, after lastGood
	expect := uint64(0)     // next sequence number
	finishSeq := func(seq uint64, rows []Row) error {
		e, err := pullRef(seq)
		if err != nil {
			return err
		}
		// The row in place is the one whose leaf is the reference's (or,
		// without one, matches its own leaf_hash column); any other row
		// with this sequence number was inserted.
		var leaf []byte
		var one [1][]byte // most sequence numbers have one row: no allocation
		leaves := one[:0]
		if len(rows) > 1 {
			leaves = make([][]byte, len(rows))
		} else {
			leaves = one[:len(rows)]
		}
		match := -1
		for i := range rows {
			leaves[i] = leafOf(&rows[i])
			if v.inRange(rows[i].Record.Time) {
				v.rep.Checked++
			}
			if rows[i].BodyMismatch {
				v.add(rows[i].Record.ID, rows[i].Record.Time, KindModified, "its body does not hash to its body_sha256 (seq %d)", seq)
			}
			if match < 0 && ((e != nil && bytes.Equal(leaves[i], e.Leaf)) ||
				(e == nil && seq < state.Size && bytes.Equal(leaves[i], rows[i].Leaf))) {
				match = i
			}
		}
		for i := range rows {
			r := &rows[i]
			switch {
			case i == match:
				if r.Leaf != nil && !bytes.Equal(r.Leaf, leaves[i]) {
					v.add(r.Record.ID, r.Record.Time, KindModified, "leaf_hash column changed (seq %d)", seq)
				}
			case e == nil && seq >= state.Size && seq >= target:
				if appendedSince(seq) {
					continue
				}
				v.add(r.Record.ID, r.Record.Time, KindInserted, "sequence number %d is past the tree's %d leaves", seq, state.Size)
				continue
			case match >= 0 || (leaf != nil):
				v.add(r.Record.ID, r.Record.Time, KindInserted, "a second row with sequence number %d", seq)
				continue
			default:
				cands = append(cands, candidate{row: *r, leaf: leaves[i]})
			}
			leaf = leaves[i]
		}
		if leaf == nil && e != nil {
			if src.Archived(e.Time) {
				v.rep.Archived++
				leaf = e.Leaf
			} else {
				gaps = append(gaps, *e)
				leaf = e.Leaf
			}
		} else if leaf != nil {
			for _, g := range gaps {
				v.add(auditlogger.FormatID(g.ID), g.Time, KindMissing, "row %d is gone", g.Seq)
			}
			gaps = gaps[:0]
			lastGood = int64(seq)
		}
		if leaf == nil {
			leaf = make([]byte, HashSize) // a hole: no row, no reference
			if seq < max(state.Size, target) {
				v.add("seq "+fmt.Sprint(seq), time.Time{}, KindMissing, "no row with sequence number %d", seq)
			}
		}
		// With the leaves kept outside, each row is compared with its
		// signed leaf, and refTree checks those against the roots; the
		// rows' own tree is needed only without them.
		if ref == nil {
			rowTree.Append(leaf, nil)
			checkRoot(rowTree, &rowCps, "rows")
		}
		return nil
	}

	// Sequence numbers past the tree and the signed checkpoint have no
	// leaf to miss: a forged row far past them is named without walking
	// the numbers in between.
	end := max(state.Size, target)
	var batch []Row
	for r, err := range src.Rows(ctx) {
		if err != nil {
			return nil, err
		}
		if len(batch) > 0 && r.Seq != batch[0].Seq {
			if err := v.flushUpTo(min(batch[0].Seq, end), &expect, finishSeq); err != nil {
				return nil, err
			}
			if err := finishSeq(batch[0].Seq, batch); err != nil {
				return nil, err
			}
			expect = batch[0].Seq + 1
			batch = batch[:0]
		}
		batch = append(batch, r)
	}
	if len(batch) > 0 {
		if err := v.flushUpTo(min(batch[0].Seq, end), &expect, finishSeq); err != nil {
			return nil, err
		}
		if err := finishSeq(batch[0].Seq, batch); err != nil {
			return nil, err
		}
		expect = batch[0].Seq + 1
	}
	if err := v.flushUpTo(end, &expect, finishSeq); err != nil {
		return nil, err
	}
	// Reference entries past the last row: the tail was cut.
	for !refDone {
		e, err := pullRef(expect)
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		gaps = append(gaps, *e)
		expect++
	}
	for _, g := range gaps {
		kind := KindTruncated
		if uint64(lastGood+1) > g.Seq {
			kind = KindMissing
		}
		v.add(auditlogger.FormatID(g.ID), g.Time, kind, "row %d is gone (the trail ends at %d)", g.Seq, lastGood+1)
	}
	if refTree != nil && refTree.Size() < target {
		v.add("leaves", time.Time{}, KindTruncated, "the leaves kept outside the database stop at %d, the checkpoint has %d", refTree.Size(), target)
	}
	if ref == nil && rowTree.Size() == state.Size && !bytes.Equal(rowTree.Root(), state.Root) && len(cands) == 0 {
		v.add("audit_tree", time.Time{}, KindModified, "the tree state's root is not the rows' root")
	}

	if err := v.resolve(ctx, ref, cands); err != nil {
		return nil, err
	}
	if err := v.unsequenced(ctx, src, state, signedGenesis(trusted), len(trusted) > 0); err != nil {
		return nil, err
	}
	v.rep.OK = v.problems == 0
	if v.rep.Problems == nil {
		v.rep.Problems = []Problem{}
	}
	return &v.rep, nil
}

func checkpointName(c *Checkpoint) string {
	if c.N != 0 {
		return fmt.Sprintf("checkpoint %d", c.N)
	}
	return fmt.Sprintf("checkpoint %d@%s", c.Size, c.Time.UTC().Format(time.RFC3339Nano))
}

// flushUpTo handles the sequence numbers from *expect up to (not including)
// seq that have no row.
func (v *verifier) flushUpTo(seq uint64, expect *uint64, finish func(uint64, []Row) error) error {
	for ; *expect < seq; *expect++ {
		if err := finish(*expect, nil); err != nil {
			return err
		}
	}
	return nil
}

// checkpoints verifies every checkpoint's signature and returns the good
// ones in ascending size, one per size.
func (v *verifier) checkpoints(ctx context.Context, src Source, ref Reference, keys Keyring) ([]Checkpoint, error) {
	all, err := src.Checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	dbCount := len(all)
	if ref != nil {
		var more []Checkpoint
		if sr, ok := ref.(SinceReference); ok {
			more, err = sr.CheckpointsSince(ctx, newestTrusted(all, keys))
		} else {
			more, err = ref.Checkpoints(ctx)
		}
		if err != nil {
			return nil, err
		}
		all = append(all, more...)
	}
	bySize := map[uint64]Checkpoint{}
	for i := range all {
		c := &all[i]
		where := "stored outside the database"
		id := fmt.Sprintf("checkpoint %d@%s", c.Size, c.Time.UTC().Format(time.RFC3339Nano))
		if i < dbCount {
			where = "in the database"
			id = fmt.Sprintf("checkpoint %d", c.N)
		}
		if err := keys.Verify(c); err != nil {
			v.add(id, time.Time{}, KindBadSignature, "%s (%s, size %d)", err, where, c.Size)
			continue
		}
		if i >= dbCount {
			v.rep.Anchored = true
		}
		if o, ok := bySize[c.Size]; ok && !bytes.Equal(o.Root, c.Root) {
			v.add(id, time.Time{}, KindModified, "two signed roots for size %d: %s and %s", c.Size,
				hex.EncodeToString(o.Root[:8]), hex.EncodeToString(c.Root[:8]))
			continue
		}
		if o, ok := bySize[c.Size]; !ok || c.Time.After(o.Time) || (o.N == 0 && c.N != 0) {
			if ok && o.N != 0 && c.N == 0 {
				continue
			}
			bySize[c.Size] = *c
		}
	}
	out := make([]Checkpoint, 0, len(bySize))
	for _, c := range bySize {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Size < out[j].Size })
	return out, nil
}

// newestTrusted returns the newest checkpoint in cps (ascending N, which
// the worker writes in ascending size) that keys signed, nil when none is.
func newestTrusted(cps []Checkpoint, keys Keyring) *Checkpoint {
	for i := len(cps) - 1; i >= 0; i-- {
		if keys.Verify(&cps[i]) == nil {
			return &cps[i]
		}
	}
	return nil
}

// resolve names each candidate: reordered when its leaf is the reference's
// at another position, else modified.
func (v *verifier) resolve(ctx context.Context, ref Reference, cands []candidate) error {
	if len(cands) == 0 {
		return nil
	}
	at := map[string]uint64{}
	if ref != nil {
		want := map[string]bool{}
		for _, c := range cands {
			want[string(c.leaf)] = true
		}
		for e, err := range ref.Entries(ctx) {
			if err != nil {
				return err
			}
			if want[string(e.Leaf)] {
				at[string(e.Leaf)] = e.Seq
			}
		}
	}
	for _, c := range cands {
		r := &c.row
		if s, ok := at[string(c.leaf)]; ok && s != r.Seq {
			v.add(r.Record.ID, r.Record.Time, KindReordered, "found at sequence number %d, signed at %d", r.Seq, s)
			continue
		}
		v.add(r.Record.ID, r.Record.Time, KindModified, "its fields do not hash to the signed leaf at sequence number %d", r.Seq)
	}
	return nil
}

// signedGenesis returns the genesis of the largest trusted checkpoint that
// signs one (nil when none does).
func signedGenesis(trusted []Checkpoint) *Genesis {
	for i := len(trusted) - 1; i >= 0; i-- {
		if g := trusted[i].Genesis; g != nil {
			return g
		}
	}
	return nil
}

// unsequenced checks the rows without a sequence number against the
// genesis, streaming them (nothing of a row is kept). With a signed genesis
// a row dated after it is inserted, and the rows up to it must match its
// count and digest. Without one (checkpoints from before the genesis was
// signed) the database's genesis columns stand in: when the trail has begun
// (signed or sequenced rows exist) a missing genesis time is reported, not
// taken to mean that every row is from before.
func (v *verifier) unsequenced(ctx context.Context, src Source, state State, g *Genesis, signed bool) error {
	at, want := state.GenesisAt, state.GenesisRows
	if g != nil {
		at, want = g.At, g.Rows
	}
	begun := signed || state.Size > 0
	if at.IsZero() && begun {
		v.add("genesis", time.Time{}, KindModified, "the trail has begun but no genesis time is signed or stored")
	}
	d := NewGenesisDigest()
	for r, err := range src.Unsequenced(ctx) {
		if err != nil {
			return err
		}
		v.rep.Unchained++
		if r.BodyMismatch {
			v.add(r.Record.ID, r.Record.Time, KindModified, "its body does not hash to its body_sha256 (a row without a sequence number)")
		}
		if at.IsZero() {
			continue // nothing chained yet (or reported above)
		}
		if want == 0 || r.Record.Time.After(at) {
			v.add(r.Record.ID, r.Record.Time, KindInserted, "no sequence number, and not from before the trail's start")
			continue
		}
		d.Add(leafOf(&r))
	}
	if at.IsZero() {
		return nil
	}
	switch {
	case d.Rows > want:
		v.add("genesis", time.Time{}, KindInserted, "%d rows without a sequence number dated up to the trail's start, %d at the start", d.Rows, want)
	case d.Rows < want:
		v.add("genesis", time.Time{}, KindMissing, "%d rows without a sequence number dated up to the trail's start, %d at the start", d.Rows, want)
	case g != nil && !bytes.Equal(d.Sum(), g.Digest):
		v.add("genesis", time.Time{}, KindModified, "the %d rows from before the trail's start do not give the signed genesis digest", want)
	}
	return nil
}
