package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Pseudonymizer turns a user id into its pseudonym, "<key id>:<32 hex>": the
// first 128 bits of HMAC-SHA256 of the id under a deployment secret. The
// collector makes the pseudonym before anything durable, logged, forwarded or
// audited sees the id; the visual renderer makes it again to search by a
// raw id. Keys rotate: the first key makes new pseudonyms, and a search tries
// every key, so events stored under an older key are still found.
type Pseudonymizer struct {
	keys []pseudonymKey
}

type pseudonymKey struct {
	id  string
	key []byte
}

// MinPseudonymKeyBytes is the shortest secret accepted (128 bits).
const MinPseudonymKeyBytes = 16

// ParsePseudonymKeys parses "k2:<hex>,k1:<hex>" (the first key makes new
// pseudonyms). A blank spec gives a nil Pseudonymizer: no user ids are
// kept. Errors never include the secret.
func ParsePseudonymKeys(spec string) (*Pseudonymizer, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	p := &Pseudonymizer{}
	seen := map[string]bool{}
	for i, part := range strings.Split(spec, ",") {
		id, secret, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || id == "" || len(id) > 16 || strings.ContainsAny(id, ":, ") {
			return nil, fmt.Errorf("key %d: want <key id>:<hex secret>, the id at most 16 characters without ':'", i+1)
		}
		key, err := hex.DecodeString(secret)
		if err != nil {
			return nil, fmt.Errorf("key %s: the secret is not hex", id)
		}
		if len(key) < MinPseudonymKeyBytes {
			return nil, fmt.Errorf("key %s: the secret has %d bytes, want at least %d", id, len(key), MinPseudonymKeyBytes)
		}
		if seen[id] {
			return nil, fmt.Errorf("key %s: named twice", id)
		}
		seen[id] = true
		p.keys = append(p.keys, pseudonymKey{id: id, key: key})
	}
	return p, nil
}

// ErrNoPseudonymKey means no key is configured to make pseudonyms.
var ErrNoPseudonymKey = errors.New("no user id key configured")

// Pseudonym returns the pseudonym of userID under the current key.
func (p *Pseudonymizer) Pseudonym(userID string) string {
	return p.keys[0].make(userID)
}

// All returns the pseudonyms of userID under every key, the current first.
func (p *Pseudonymizer) All(userID string) []string {
	out := make([]string, len(p.keys))
	for i, k := range p.keys {
		out[i] = k.make(userID)
	}
	return out
}

// KeyID returns the current key's id (safe to log).
func (p *Pseudonymizer) KeyID() string { return p.keys[0].id }

func (k pseudonymKey) make(userID string) string {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte(userID))
	sum := m.Sum(nil)
	return k.id + ":" + hex.EncodeToString(sum[:16])
}

// IsPseudonym reports whether s has the form of a pseudonym.
func IsPseudonym(s string) bool {
	id, h, ok := strings.Cut(s, ":")
	if !ok || id == "" || len(id) > 16 || len(h) != 32 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}
