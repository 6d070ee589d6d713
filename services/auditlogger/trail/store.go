package trail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"threatview/auditlogger"
)

// ObjectStore keeps the trail's checkpoints and leaf bundles outside the
// database. In production it is an S3 bucket with Object Lock (compliance
// mode) so that not even its owner can rewrite what was written.
type ObjectStore interface {
	// Put writes an object whole (atomically).
	Put(ctx context.Context, key string, data []byte) error
	// Get reads an object; a missing one wraps fs.ErrNotExist.
	Get(ctx context.Context, key string) ([]byte, error)
	// List returns the keys under prefix in ascending order.
	List(ctx context.Context, prefix string) ([]string, error)
}

// Dir is an ObjectStore in a local directory (one file per key, written to
// a temporary name, synced and renamed). Like a bucket with Object Lock it
// is write-once: an object is never replaced by different bytes.
type Dir struct{ Root string }

// ErrExists means an object already holds different bytes.
var ErrExists = errors.New("object exists (write-once store)")

// Put implements ObjectStore.
func (d Dir) Put(_ context.Context, key string, data []byte) error {
	p := filepath.Join(d.Root, filepath.FromSlash(key))
	if old, err := os.ReadFile(p); err == nil {
		if bytes.Equal(old, data) {
			return nil
		}
		return fmt.Errorf("put %s: %w", key, ErrExists)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// Get implements ObjectStore.
func (d Dir) Get(_ context.Context, key string) ([]byte, error) {
	return os.ReadFile(filepath.Join(d.Root, filepath.FromSlash(key)))
}

// List implements ObjectStore.
func (d Dir) List(_ context.Context, prefix string) ([]string, error) {
	dir := filepath.Join(d.Root, filepath.FromSlash(prefix[:strings.LastIndex(prefix, "/")+1]))
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var keys []string
	base := prefix[:strings.LastIndex(prefix, "/")+1]
	for _, e := range ents {
		k := base + e.Name()
		if !e.IsDir() && strings.HasPrefix(k, prefix) && !strings.HasPrefix(e.Name(), ".tmp-") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// ListerAfter is an ObjectStore that lists the keys after a given one
// without reading those before it (S3's StartAfter).
type ListerAfter interface {
	ListAfter(ctx context.Context, prefix, after string) ([]string, error)
}

// Mirror is an ObjectStore writing every object to each of its stores in
// turn (a put fails if any fails, and is retried whole: the stores are
// write-once, so a put of the same bytes again succeeds) and reading from
// the first.
type Mirror []ObjectStore

// Put implements ObjectStore.
func (m Mirror) Put(ctx context.Context, key string, data []byte) error {
	for _, s := range m {
		if err := s.Put(ctx, key, data); err != nil {
			return err
		}
	}
	return nil
}

// Get implements ObjectStore.
func (m Mirror) Get(ctx context.Context, key string) ([]byte, error) { return m[0].Get(ctx, key) }

// List implements ObjectStore.
func (m Mirror) List(ctx context.Context, prefix string) ([]string, error) {
	return m[0].List(ctx, prefix)
}

// ListAfter implements ListerAfter.
func (m Mirror) ListAfter(ctx context.Context, prefix, after string) ([]string, error) {
	return listAfter(ctx, m[0], prefix, after)
}

// listAfter lists the keys of s under prefix after after, with s's
// ListAfter when it has one.
func listAfter(ctx context.Context, s ObjectStore, prefix, after string) ([]string, error) {
	if la, ok := s.(ListerAfter); ok {
		return la.ListAfter(ctx, prefix, after)
	}
	keys, err := s.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	i := sort.SearchStrings(keys, after)
	for i < len(keys) && keys[i] <= after {
		i++
	}
	return keys[i:], nil
}

// StoreReference reads the checkpoints and leaf bundles of an ObjectStore
// (a trail.Reference). A verification reads only the checkpoints it needs
// (CheckpointsSince) unless All is set.
type StoreReference struct {
	Store ObjectStore
	// All makes a verification read every stored checkpoint (a full audit
	// of the store, one GET per checkpoint) instead of the newest and the
	// copy of the database's newest trusted one.
	All bool
}

// Checkpoints implements Reference: every stored checkpoint.
func (s StoreReference) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	keys, err := s.Store.List(ctx, "checkpoints/")
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	return s.read(ctx, ownCheckpoints(keys))
}

// CheckpointsSince implements SinceReference: the stored copy of since
// (when there is one) and the newest stored checkpoint, listing only the
// keys from since's size on. since nil lists every key but still reads
// only the newest.
func (s StoreReference) CheckpointsSince(ctx context.Context, since *Checkpoint) ([]Checkpoint, error) {
	if s.All {
		return s.Checkpoints(ctx)
	}
	after := ""
	if since != nil {
		after = fmt.Sprintf("checkpoints/%020d-", since.Size)
	}
	keys, err := listAfter(ctx, s.Store, "checkpoints/", after)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	keys = ownCheckpoints(keys)
	var want []string
	if since != nil {
		k := checkpointKey(since)
		if i := sort.SearchStrings(keys, k); i < len(keys) && keys[i] == k {
			want = append(want, k)
		}
	}
	if n := len(keys); n > 0 && (len(want) == 0 || want[0] != keys[n-1]) {
		want = append(want, keys[n-1])
	}
	return s.read(ctx, want)
}

func (s StoreReference) read(ctx context.Context, keys []string) ([]Checkpoint, error) {
	out := make([]Checkpoint, 0, len(keys))
	for _, k := range keys {
		b, err := s.Store.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", k, err)
		}
		var c Checkpoint
		if err := json.Unmarshal(b, &c); err != nil {
			// An unreadable checkpoint is reported like a bad signature.
			c = Checkpoint{KeyID: "unreadable " + k}
		}
		c.N = 0
		out = append(out, c)
	}
	return out, nil
}

// Entries implements Reference: the bundles in order, an entry covered by
// an earlier bundle skipped.
func (s StoreReference) Entries(ctx context.Context) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		keys, err := s.Store.List(ctx, "leaves/")
		if err != nil {
			yield(Entry{}, fmt.Errorf("list leaf bundles: %w", err))
			return
		}
		next := uint64(0)
		for _, k := range keys {
			first, ok := parseBundleKey(k)
			if !ok {
				continue
			}
			b, err := s.Store.Get(ctx, k)
			if err != nil {
				yield(Entry{}, fmt.Errorf("read %s: %w", k, err))
				return
			}
			es, err := DecodeEntries(b)
			if err != nil || (len(es) > 0 && es[0].Seq != first) {
				yield(Entry{}, fmt.Errorf("leaf bundle %s: unreadable", k))
				return
			}
			for _, e := range es {
				if e.Seq < next {
					continue
				}
				if !yield(e, nil) {
					return
				}
				next = e.Seq + 1
			}
		}
	}
}

// ErrNotExtension means the checkpointer refused to sign: the tree the
// database holds does not extend the last checkpoint it trusts (it shrank,
// or its leaves no longer reproduce the signed root), or its genesis is
// gone. Nothing is written; the refusal repeats at every tick until the
// database is put back.
var ErrNotExtension = errors.New("the database's tree does not extend the last signed checkpoint")

// CheckpointDB is the audit database as the checkpointer needs it.
type CheckpointDB interface {
	State(ctx context.Context) (State, error)
	LatestCheckpoint(ctx context.Context) (*Checkpoint, error)
	AddCheckpoint(ctx context.Context, c *Checkpoint) (int64, error)
	// LeavesBetween returns the entries [from, to), leaves from the
	// leaf_hash column.
	LeavesBetween(ctx context.Context, from, to uint64) ([]Entry, error)
	// RangeHashes returns the compact range [0, size) (the hashes NewTree
	// takes) from the database's nodes and leaves; an error not wrapping
	// auditlogger.ErrUnavailable means a hash is gone.
	RangeHashes(ctx context.Context, size uint64) ([][]byte, error)
	// Unsequenced yields the rows without a sequence number in (time, id)
	// order, their leaves computed.
	Unsequenced(ctx context.Context) iter.Seq2[Row, error]
}

// maxBundle is the most entries one leaf bundle holds (5.6 MB).
const maxBundle = 100000

// Checkpointer signs the tree the database holds and writes the checkpoint
// and the new leaves to the object store, then to the database.
//
// It keeps the last head it signed (at start, the newest correctly signed
// checkpoint in the object store, which it trusts over the database's, and
// the database's only without a store) with the tree's compact range at
// that size, and signs a new tree only if it extends that head: the leaves
// after it, appended to the trusted range, must give the new root. A tree
// that shrank or was rewritten is refused (ErrNotExtension, OnRefusal), so
// a database writer cannot have a forged history signed.
type Checkpointer struct {
	DB     CheckpointDB
	Store  ObjectStore // nil: the database alone (not recommended)
	Signer *Signer
	// Keys are the keys a stored checkpoint may be signed with to be
	// trusted as the last head (the signer's own is always one).
	Keys Keyring
	Log  *slog.Logger
	// OnCheckpoint, when set, sees each new checkpoint (metrics).
	OnCheckpoint func(c *Checkpoint)
	// OnError, when set, sees each failed checkpoint (metrics); the next
	// tick tries again, covering every leaf since the last checkpoint made.
	OnError func(err error)
	// OnRefusal, when set, sees each refusal (ErrNotExtension) (metrics).
	OnRefusal func(err error)
	// Timeout bounds one checkpoint (default 30 s), so a stalled object
	// store delays checkpoints instead of stopping them for good; one that
	// may compute the genesis gets at least 10 minutes.
	Timeout time.Duration

	mu     sync.Mutex
	loaded bool
	head   *Checkpoint // the last signed head (nil: none yet)
	tree   *Tree       // the trusted compact range at next
	next   uint64      // leaves already written to the store (or signed, without one)
}

// Once makes one checkpoint of the current tree.
func (c *Checkpointer) Once(ctx context.Context, now time.Time) (*Checkpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp, err := c.once(ctx, now)
	if errors.Is(err, ErrNotExtension) && c.OnRefusal != nil {
		c.OnRefusal(err)
	}
	return cp, err
}

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotExtension}, a...)...)
}

func (c *Checkpointer) keys() Keyring {
	return c.Keys.Merge(Keyring{c.Signer.KeyID: c.Signer.Public()})
}

// load finds the last signed head and the trusted range to extend.
func (c *Checkpointer) load(ctx context.Context, st State) error {
	keys := c.keys()
	dbHead, err := c.DB.LatestCheckpoint(ctx)
	if err != nil {
		return err
	}
	if dbHead != nil && keys.Verify(dbHead) != nil {
		dbHead = nil
	}
	var stored *Checkpoint
	if c.Store != nil {
		if stored, err = newestStored(ctx, c.Store, keys, dbHead); err != nil {
			return err
		}
	}
	head, base := stored, stored
	if head == nil {
		head = dbHead
	}
	if c.Store == nil {
		base = dbHead
	}
	if head != nil && st.Size < head.Size {
		return refuse("the tree has %d leaves, the last signed checkpoint %d", st.Size, head.Size)
	}
	tree, _ := NewTree(0, nil)
	if base != nil {
		hs, err := c.DB.RangeHashes(ctx, base.Size)
		if errors.Is(err, auditlogger.ErrUnavailable) {
			return err
		}
		if err == nil {
			tree, err = NewTree(base.Size, hs)
		}
		if err != nil || !bytes.Equal(tree.Root(), base.Root) {
			return refuse("the database's first %d leaves do not give the signed root (%v)", base.Size, err)
		}
	}
	c.head, c.tree, c.next, c.loaded = head, tree, tree.Size(), true
	return nil
}

// checkpointObject is the name the worker gives a checkpoint (checkpointKey):
// size and time, both zero-padded.
var checkpointObject = regexp.MustCompile(`^checkpoints/[0-9]{20}-[0-9]{20}\.json$`)

// ownCheckpoints keeps the names the worker writes. Another workload that
// can write the bucket (it should not: each component has its own role)
// could plant any object under checkpoints/; read, it would make every
// verification fail. Only names of the worker's own pattern are read.
func ownCheckpoints(keys []string) []string {
	out := keys[:0:0]
	for _, k := range keys {
		if checkpointObject.MatchString(k) {
			out = append(out, k)
		}
	}
	return out
}

// newestStored returns the newest checkpoint in the store that keys
// signed (nil when none is), listing from hint's size on when the store has
// checkpoints there.
func newestStored(ctx context.Context, st ObjectStore, keys Keyring, hint *Checkpoint) (*Checkpoint, error) {
	var names []string
	var err error
	if hint != nil {
		names, err = listAfter(ctx, st, "checkpoints/", fmt.Sprintf("checkpoints/%020d-", hint.Size))
	}
	if err == nil && len(names) == 0 {
		names, err = st.List(ctx, "checkpoints/")
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	names = ownCheckpoints(names)
	for i := len(names) - 1; i >= 0; i-- {
		cps, err := StoreReference{Store: st}.read(ctx, names[i:i+1])
		if err != nil {
			return nil, err
		}
		if keys.Verify(&cps[0]) == nil {
			return &cps[0], nil
		}
	}
	return nil, nil
}

// genesis returns the genesis the next checkpoint signs: the last head's,
// else (the first checkpoint after the first chained insert) the rows
// without a sequence number dated up to the database's genesis time.
func (c *Checkpointer) genesis(ctx context.Context, st State) (*Genesis, error) {
	if c.head != nil && c.head.Genesis != nil {
		return c.head.Genesis, nil
	}
	if st.GenesisAt.IsZero() {
		if st.Size > 0 {
			return nil, refuse("the tree has %d leaves but no genesis time", st.Size)
		}
		return nil, nil // nothing chained yet
	}
	d := NewGenesisDigest()
	for r, err := range c.DB.Unsequenced(ctx) {
		if err != nil {
			return nil, err
		}
		if !r.Record.Time.After(st.GenesisAt) {
			d.Add(leafOf(&r))
		}
	}
	if d.Rows != st.GenesisRows && c.Log != nil {
		c.Log.Warn("rows from before the trail differ from the count at its start; signing the rows there now",
			"rows", d.Rows, "at_start", st.GenesisRows)
	}
	return &Genesis{Rows: d.Rows, At: st.GenesisAt, Digest: d.Sum()}, nil
}

func (c *Checkpointer) once(ctx context.Context, now time.Time) (*Checkpoint, error) {
	st, err := c.DB.State(ctx)
	if err != nil {
		return nil, err
	}
	if !c.loaded {
		if err := c.load(ctx, st); err != nil {
			return nil, err
		}
	}
	if c.head != nil && st.Size < c.head.Size {
		return nil, refuse("the tree has %d leaves, the last signed checkpoint %d", st.Size, c.head.Size)
	}
	g, err := c.genesis(ctx, st)
	if err != nil {
		return nil, err
	}
	// The leaves since the trusted range, appended to it, must reach the
	// last head's root (when they cross it) and the new root.
	tree := c.tree.Clone()
	for start := c.next; start < st.Size; start += maxBundle {
		end := min(start+maxBundle, st.Size)
		es, err := c.DB.LeavesBetween(ctx, start, end)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			tree.Append(e.Leaf, nil)
			if h := c.head; h != nil && tree.Size() == h.Size && !bytes.Equal(tree.Root(), h.Root) {
				return nil, refuse("the leaves up to %d do not give the signed root", h.Size)
			}
		}
		if c.Store != nil {
			if err := c.Store.Put(ctx, bundleKey(start, end), EncodeEntries(es)); err != nil {
				return nil, fmt.Errorf("write leaf bundle: %w", err)
			}
		}
	}
	if !bytes.Equal(tree.Root(), st.Root) {
		return nil, refuse("the leaves up to %d do not give the tree's root", st.Size)
	}
	cp := c.Signer.SignGenesis(st.Size, st.Root, now, g)
	if c.Store != nil {
		if err := c.Store.Put(ctx, checkpointKey(&cp), MarshalCheckpoint(&cp)); err != nil {
			return nil, fmt.Errorf("write checkpoint: %w", err)
		}
	}
	head := cp
	c.head, c.tree, c.next = &head, tree, tree.Size()
	n, err := c.DB.AddCheckpoint(ctx, &cp)
	if err != nil {
		return nil, err
	}
	cp.N = n
	if c.OnCheckpoint != nil {
		c.OnCheckpoint(&cp)
	}
	return &cp, nil
}

// genesisTimeout bounds a checkpoint that computes the genesis.
const genesisTimeout = 10 * time.Minute

// genesisPending reports whether the next checkpoint may compute the
// genesis (no signed one is known yet).
func (c *Checkpointer) genesisPending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.head == nil || c.head.Genesis == nil
}

// Run makes a checkpoint every interval until ctx ends, then one last one
// (with a fresh short context) at shutdown.
func (c *Checkpointer) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if _, err := c.Once(sctx, time.Now()); err != nil {
				c.Log.Warn("final checkpoint failed", "err", err)
			}
			return
		case <-t.C:
			timeout := c.Timeout
			if timeout <= 0 {
				timeout = 30 * time.Second
			}
			if c.genesisPending() {
				// The first checkpoint to sign the genesis reads every row
				// from before the trail once (millions after an upgrade).
				timeout = max(timeout, genesisTimeout)
			}
			octx, cancel := context.WithTimeout(ctx, timeout)
			_, err := c.Once(octx, time.Now())
			cancel()
			switch {
			case err == nil || ctx.Err() != nil:
			case errors.Is(err, ErrNotExtension):
				c.Log.Error("checkpoint refused: the database's tree does not extend the last signed one; nothing signed", "err", err)
			default:
				c.Log.Warn("checkpoint failed; retried at the next tick", "err", err)
				if c.OnError != nil {
					c.OnError(err)
				}
			}
		}
	}
}
