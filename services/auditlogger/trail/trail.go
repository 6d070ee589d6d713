// Package trail makes the audit trail tamper-evident: each stored audit
// record is a leaf of an append-only Merkle tree in the style of RFC 6962
// (its position is its sequence number), the audit worker signs the tree's
// size and root with Ed25519 (a checkpoint), and a verifier recomputes every
// leaf from the stored row and compares it with the signed trees.
//
// A leaf covers a row's canonical fields including body_sha256 but not the
// body itself, so a body may be redacted (for a data-subject erasure)
// without breaking any proof. The leaf does not include the sequence number:
// the position in the tree binds it, and a row found at another position is
// reported as reordered.
package trail

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"threatview/auditlogger"
	"threatview/platform/wire"
)

// LeafVersion is the first byte of every leaf's canonical encoding; a change
// of encoding gets a new version and old leaves keep theirs.
const LeafVersion = 1

// HashSize is the size of every hash in the tree (SHA-256).
const HashSize = 32

// Hasher is the tree's hasher: RFC 6962 with SHA-256.
var Hasher = rfc6962.DefaultHasher

// rangeFactory builds compact ranges with the RFC 6962 node hash.
var rangeFactory = &compact.RangeFactory{Hash: hashChildren}

// hashChildren is Hasher.HashChildren without a hash.Hash a call (one
// allocation, the result): SHA-256(0x01 || l || r).
func hashChildren(l, r []byte) []byte {
	if len(l) != HashSize || len(r) != HashSize {
		return Hasher.HashChildren(l, r)
	}
	var b [1 + 2*HashSize]byte
	b[0] = rfc6962.RFC6962NodeHashPrefix
	copy(b[1:], l)
	copy(b[1+HashSize:], r)
	h := sha256.Sum256(b[:])
	return h[:]
}

// AppendLeafInput appends the bytes a leaf hash is taken over, 0x00 and
// the leaf data of f, to b; HashLeafInput of them is the leaf hash. The
// worker and the verifier reuse b, so hashing a row allocates only its
// 32-byte result.
func AppendLeafInput(b []byte, f LeafFields) []byte {
	return AppendLeafData(append(b, rfc6962.RFC6962LeafHashPrefix), f)
}

// HashLeafInput returns SHA-256 of b (from AppendLeafInput).
func HashLeafInput(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

// LeafData returns the canonical encoding of a stored record: the version
// byte, the 16 id bytes, the time in Unix microseconds (8 bytes big-endian),
// then actor_token_id, actor_app_id, action, resource, each as a 4-byte
// big-endian length and the bytes, outcome (2 bytes), the client address
// (1 length byte and its 0, 4 or 16 bytes), user_agent, request_id (length
// and bytes), event_count (4 bytes) and body_sha256 (1 length byte and its
// 0 or 32 bytes). The body is not part of it.
func LeafData(r *wire.AuditRecord) []byte {
	id, _ := auditlogger.ParseID(r.ID)
	var ip []byte
	if a, err := netip.ParseAddr(r.ClientIP); err == nil {
		ip = a.Unmap().AsSlice()
	}
	var sum []byte
	if s, err := hex.DecodeString(r.BodySHA256); err == nil && len(s) == HashSize {
		sum = s
	}
	return AppendLeafData(nil, LeafFields{ID: id, Time: r.Time, ActorToken: []byte(r.ActorToken), ActorApp: []byte(r.ActorApp),
		Action: []byte(r.Action), Resource: []byte(r.Resource), Outcome: r.Outcome, ClientIP: ip, UserAgent: []byte(r.UserAgent),
		RequestID: []byte(r.RequestID), EventCount: r.EventCount, BodySHA256: sum})
}

// LeafFields are a row's columns as stored (the client address and digest
// as their raw bytes), for computing a leaf straight from a database row.
type LeafFields struct {
	ID                                     [16]byte
	Time                                   time.Time
	ActorToken, ActorApp, Action, Resource []byte
	Outcome                                int
	ClientIP                               []byte // 0, 4 or 16 bytes
	UserAgent, RequestID                   []byte
	EventCount                             int
	BodySHA256                             []byte // 0 or 32 bytes
}

// AppendLeafData appends the canonical encoding (see LeafData) to b.
func AppendLeafData(b []byte, f LeafFields) []byte {
	b = append(b, LeafVersion)
	b = append(b, f.ID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(f.Time.UTC().UnixMicro()))
	for _, s := range [][]byte{f.ActorToken, f.ActorApp, f.Action, f.Resource} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(f.Outcome))
	b = append(b, byte(len(f.ClientIP)))
	b = append(b, f.ClientIP...)
	for _, s := range [][]byte{f.UserAgent, f.RequestID} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(f.EventCount))
	b = append(b, byte(len(f.BodySHA256)))
	return append(b, f.BodySHA256...)
}

// LeafHash returns the RFC 6962 leaf hash of a stored record.
func LeafHash(r *wire.AuditRecord) []byte {
	return Hasher.HashLeaf(LeafData(r))
}

// Tree is the worker's O(log n) view of the tree: its size and the compact
// range [0, size), from which the root follows and new leaves are appended.
type Tree struct {
	rng *compact.Range
}

// NewTree rebuilds a tree from its size and compact range hashes (as
// returned by Hashes); size 0 with no hashes is the empty tree.
func NewTree(size uint64, hashes [][]byte) (*Tree, error) {
	r, err := rangeFactory.NewRange(0, size, hashes)
	if err != nil {
		return nil, fmt.Errorf("tree of size %d: %w", size, err)
	}
	return &Tree{rng: r}, nil
}

// Size returns the number of leaves.
func (t *Tree) Size() uint64 { return t.rng.End() }

// Hashes returns the compact range's hashes (at most 64), enough to resume
// the tree.
func (t *Tree) Hashes() [][]byte { return t.rng.Hashes() }

// Append adds a leaf hash. visit, when not nil, is called with every
// complete subtree the append finishes (level, index, hash).
func (t *Tree) Append(leaf []byte, visit func(level uint, index uint64, hash []byte)) {
	var fn compact.VisitFn
	if visit != nil {
		fn = func(id compact.NodeID, h []byte) { visit(id.Level, id.Index, h) }
	}
	if err := t.rng.Append(leaf, fn); err != nil {
		panic(err) // only for a hash of the wrong size, a programming error
	}
}

// Root returns the tree's root hash (the hash of the empty string for the
// empty tree).
func (t *Tree) Root() []byte {
	if t.rng.End() == 0 {
		return Hasher.EmptyRoot()
	}
	h, err := t.rng.GetRootHash(nil)
	if err != nil {
		panic(err)
	}
	return h
}

// Clone returns an independent copy.
func (t *Tree) Clone() *Tree {
	c, _ := NewTree(t.Size(), t.Hashes())
	return c
}

// EncodeHashes concatenates hashes (the stored form of a compact range).
func EncodeHashes(hs [][]byte) []byte {
	b := make([]byte, 0, len(hs)*HashSize)
	for _, h := range hs {
		b = append(b, h...)
	}
	return b
}

// DecodeHashes splits a concatenation of hashes.
func DecodeHashes(b []byte) ([][]byte, error) {
	if len(b)%HashSize != 0 {
		return nil, errors.New("hashes: length not a multiple of 32")
	}
	hs := make([][]byte, 0, len(b)/HashSize)
	for i := 0; i < len(b); i += HashSize {
		hs = append(hs, b[i:i+HashSize:i+HashSize])
	}
	return hs, nil
}

// Entry is what the trail keeps of one leaf outside the database: enough
// to name a row that went missing (id, time) and to compare it (leaf).
type Entry struct {
	Seq  uint64
	ID   [16]byte
	Time time.Time
	Leaf []byte
}

// entrySize is an Entry's encoded size: id, time (Unix µs), leaf.
const entrySize = 16 + 8 + HashSize

// EncodeEntries renders consecutive entries as a leaf bundle: 8 bytes of
// the first sequence number, then 56 bytes per entry.
func EncodeEntries(es []Entry) []byte {
	b := make([]byte, 8, 8+len(es)*entrySize)
	if len(es) > 0 {
		binary.BigEndian.PutUint64(b, es[0].Seq)
	}
	var n [8]byte
	for _, e := range es {
		b = append(b, e.ID[:]...)
		binary.BigEndian.PutUint64(n[:], uint64(e.Time.UnixMicro()))
		b = append(b, n[:]...)
		b = append(b, e.Leaf...)
	}
	return b
}

// DecodeEntries parses a leaf bundle made by EncodeEntries.
func DecodeEntries(b []byte) ([]Entry, error) {
	if len(b) < 8 || (len(b)-8)%entrySize != 0 {
		return nil, errors.New("leaf bundle: bad length")
	}
	first := binary.BigEndian.Uint64(b)
	es := make([]Entry, 0, (len(b)-8)/entrySize)
	for i, off := uint64(0), 8; off < len(b); i, off = i+1, off+entrySize {
		var e Entry
		e.Seq = first + i
		copy(e.ID[:], b[off:])
		e.Time = time.UnixMicro(int64(binary.BigEndian.Uint64(b[off+16:]))).UTC()
		e.Leaf = b[off+24 : off+entrySize : off+entrySize]
		es = append(es, e)
	}
	return es, nil
}
