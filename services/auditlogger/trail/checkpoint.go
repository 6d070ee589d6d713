package trail

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrBadSignature means a checkpoint's signature does not verify with any
// published key (a replaced checkpoint, or one signed with a foreign key).
var ErrBadSignature = errors.New("bad checkpoint signature")

// Checkpoint is a signed tree head: the tree of Size leaves has Root at Time,
// signed by the key KeyID. N numbers the checkpoints in the database (0 for
// one read from the object store before it is matched).
type Checkpoint struct {
	N         int64     `json:"n,omitempty"`
	Size      uint64    `json:"size"`
	Root      []byte    `json:"root"`
	Time      time.Time `json:"time"`
	KeyID     string    `json:"key_id"`
	Signature []byte    `json:"signature"`
	// Genesis, when set, is signed with the tree: the rows stored before
	// the trail began (see Genesis).
	Genesis *Genesis `json:"genesis,omitempty"`
}

// Genesis describes the rows stored before the trail began (seq NULL):
// how many there were with a time up to At (when the worker's first chained
// insert ran) and a digest over them. The worker puts it in every checkpoint
// from the first one after that insert on, copied unchanged from the last
// signed checkpoint, so the database's own genesis columns (unsigned) only
// seed it once.
type Genesis struct {
	Rows   int64     `json:"rows"`
	At     time.Time `json:"at"`
	Digest []byte    `json:"digest"`
}

// genesisOrigin opens the genesis digest's input.
const genesisOrigin = "threatview audit genesis v1\n"

// GenesisDigest accumulates a genesis digest: SHA-256 of the origin line
// and the leaf hash (LeafFields of each row, body_sha256 included) of every
// row without a sequence number and with a time up to the genesis, in
// (time, id) order.
type GenesisDigest struct {
	h    hash.Hash
	Rows int64
}

// NewGenesisDigest returns an empty digest.
func NewGenesisDigest() *GenesisDigest {
	d := &GenesisDigest{h: sha256.New()}
	d.h.Write([]byte(genesisOrigin))
	return d
}

// Add adds the next row's leaf hash.
func (d *GenesisDigest) Add(leaf []byte) {
	d.h.Write(leaf)
	d.Rows++
}

// Sum returns the digest.
func (d *GenesisDigest) Sum() []byte { return d.h.Sum(nil) }

// checkpointOrigin opens every signed text, so a signature over it can never
// be taken for one over anything else.
const checkpointOrigin = "threatview audit checkpoint v1"

// checkpointOriginGenesis opens the signed text of a checkpoint carrying
// the genesis (one more line), so neither form can be read as the other.
const checkpointOriginGenesis = "threatview audit checkpoint v2"

// SignedText returns the exact bytes the signature covers: the origin line,
// the size, the root in base64, the time (RFC 3339, UTC, nanoseconds) and
// the key id, each on its own line; with a genesis the origin line is v2's
// and one more line follows: "genesis <rows> <time> <digest, base64>".
func (c *Checkpoint) SignedText() []byte {
	origin := checkpointOrigin
	if c.Genesis != nil {
		origin = checkpointOriginGenesis
	}
	b := fmt.Appendf(nil, "%s\n%d\n%s\n%s\n%s\n", origin, c.Size,
		base64.StdEncoding.EncodeToString(c.Root), c.Time.UTC().Format(time.RFC3339Nano), c.KeyID)
	if g := c.Genesis; g != nil {
		b = fmt.Appendf(b, "genesis %d %s %s\n", g.Rows, g.At.UTC().Format(time.RFC3339Nano), base64.StdEncoding.EncodeToString(g.Digest))
	}
	return b
}

// Signer signs checkpoints with one Ed25519 key.
type Signer struct {
	KeyID string
	key   ed25519.PrivateKey
}

// Sign returns a checkpoint of the tree (size, root) at t.
func (s *Signer) Sign(size uint64, root []byte, t time.Time) Checkpoint {
	return s.SignGenesis(size, root, t, nil)
}

// SignGenesis returns a checkpoint of the tree (size, root) at t that also
// signs g (nil: none).
func (s *Signer) SignGenesis(size uint64, root []byte, t time.Time, g *Genesis) Checkpoint {
	c := Checkpoint{Size: size, Root: bytes.Clone(root), Time: t.UTC().Truncate(time.Microsecond), KeyID: s.KeyID, Genesis: g}
	c.Signature = ed25519.Sign(s.key, c.SignedText())
	return c
}

// Public returns the signer's public key.
func (s *Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Keyring holds the public keys checkpoints may be signed with, by key id.
type Keyring map[string]ed25519.PublicKey

// Verify checks c's signature; the error wraps ErrBadSignature.
func (k Keyring) Verify(c *Checkpoint) error {
	pub, ok := k[c.KeyID]
	if !ok {
		return fmt.Errorf("%w: unknown key id %q", ErrBadSignature, c.KeyID)
	}
	if len(c.Root) != HashSize || !ed25519.Verify(pub, c.SignedText(), c.Signature) {
		return fmt.Errorf("%w: key %q", ErrBadSignature, c.KeyID)
	}
	return nil
}

// PublicKey is one published key.
type PublicKey struct {
	KeyID     string `json:"key_id"`
	Algorithm string `json:"alg"`
	PublicKey []byte `json:"public_key"`
}

// List returns the keys sorted by id, for publishing.
func (k Keyring) List() []PublicKey {
	out := make([]PublicKey, 0, len(k))
	for id, pub := range k {
		out = append(out, PublicKey{KeyID: id, Algorithm: "Ed25519", PublicKey: pub})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].KeyID < out[j].KeyID })
	return out
}

// KeyID derives a key id from a public key: the first 8 bytes of its
// SHA-256 in hex.
func KeyID(pub ed25519.PublicKey) string {
	s := sha256.Sum256(pub)
	return hex.EncodeToString(s[:8])
}

// ParseSigningKeys parses AUDIT_SIGNING_KEYS: comma-separated base64
// Ed25519 seeds (32 bytes). The first signs; all of them (the newer first,
// then the retired ones still needed to check older checkpoints) are in the
// returned keyring. Rotation: put a new key first, keep the old one after
// it for as long as its checkpoints are kept.
func ParseSigningKeys(s string) (*Signer, Keyring, error) {
	ring := Keyring{}
	var signer *Signer
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		seed, err := base64.StdEncoding.DecodeString(part)
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, nil, fmt.Errorf("AUDIT_SIGNING_KEYS: key %d is not a base64 Ed25519 seed of 32 bytes", i+1)
		}
		key := ed25519.NewKeyFromSeed(seed)
		pub := key.Public().(ed25519.PublicKey)
		ring[KeyID(pub)] = pub
		if signer == nil {
			signer = &Signer{KeyID: KeyID(pub), key: key}
		}
	}
	if signer == nil {
		return nil, nil, errors.New("AUDIT_SIGNING_KEYS: no key")
	}
	return signer, ring, nil
}

// ParsePublicKeys parses AUDIT_PUBLIC_KEYS: comma-separated base64 Ed25519
// public keys (32 bytes); their ids are derived with KeyID.
func ParsePublicKeys(s string) (Keyring, error) {
	ring := Keyring{}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		pub, err := base64.StdEncoding.DecodeString(part)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("AUDIT_PUBLIC_KEYS: key %d is not a base64 Ed25519 public key of 32 bytes", i+1)
		}
		ring[KeyID(pub)] = pub
	}
	return ring, nil
}

// Merge returns a keyring with the keys of both.
func (k Keyring) Merge(o Keyring) Keyring {
	out := Keyring{}
	for id, p := range k {
		out[id] = p
	}
	for id, p := range o {
		out[id] = p
	}
	return out
}

// checkpointKey is the object-store key of a checkpoint: sortable by size
// then time.
func checkpointKey(c *Checkpoint) string {
	return "checkpoints/" + fmt.Sprintf("%020d-%020d", c.Size, c.Time.UnixNano()) + ".json"
}

// bundleKey is the object-store key of the leaf bundle [first, end): a
// bundle written again after a crash covers a different range, so no key is
// ever written twice with different contents (the store is write-once).
func bundleKey(first, end uint64) string {
	return "leaves/" + fmt.Sprintf("%020d-%020d", first, end) + ".bin"
}

// parseBundleKey returns the first sequence number of a bundle key.
func parseBundleKey(key string) (uint64, bool) {
	s, ok := strings.CutPrefix(key, "leaves/")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".bin")
	if !ok {
		return 0, false
	}
	s, _, _ = strings.Cut(s, "-")
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// MarshalCheckpoint renders a checkpoint as stored outside the database.
func MarshalCheckpoint(c *Checkpoint) []byte {
	b, _ := json.Marshal(c)
	return b
}
