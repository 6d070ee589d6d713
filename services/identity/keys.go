package identity

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"threatview/platform/authz"
)

// Keyring holds the Ed25519 keys that sign access tokens: the first signs,
// every one is published in the JWK set so tokens signed before a rotation
// stay valid until they expire.
//
// Rotation: put a new key first in IDENTITY_SIGNING_KEYS and keep the old one
// after it for at least the access token lifetime; then remove it.
type Keyring struct {
	keys []ed25519.PrivateKey
	pubs authz.StaticKeys
}

// ParseKeyring reads a comma-separated list of Ed25519 seeds (32 bytes each,
// in hex or base64). The error never contains key material.
func ParseKeyring(list string) (*Keyring, error) {
	kr := &Keyring{pubs: authz.StaticKeys{}}
	for i, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		seed, err := decodeSeed(s)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		priv := ed25519.NewKeyFromSeed(seed)
		pub := priv.Public().(ed25519.PublicKey)
		if _, dup := kr.pubs[authz.KeyID(pub)]; dup {
			return nil, fmt.Errorf("key %d repeats an earlier key", i+1)
		}
		kr.keys = append(kr.keys, priv)
		kr.pubs[authz.KeyID(pub)] = pub
	}
	if len(kr.keys) == 0 {
		return nil, fmt.Errorf("no key given")
	}
	return kr, nil
}

func decodeSeed(s string) ([]byte, error) {
	if len(s) == 2*ed25519.SeedSize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == ed25519.SeedSize {
			return b, nil
		}
	}
	return nil, fmt.Errorf("not a 32-byte Ed25519 seed in hex or base64")
}

// Sign returns an access token for u, valid for ttl from now.
func (k *Keyring) Sign(u User, now time.Time, ttl time.Duration, id string) (string, error) {
	return authz.Sign(k.keys[0], u.Username, u.Roles, now, ttl, id)
}

// Key implements authz.KeySource over the ring's public keys.
func (k *Keyring) Key(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	return k.pubs.Key(ctx, kid)
}

// JWKSet returns the public keys, the signing one first.
func (k *Keyring) JWKSet() authz.JWKSet {
	set := authz.JWKSet{Keys: make([]authz.JWK, 0, len(k.keys))}
	for _, priv := range k.keys {
		set.Keys = append(set.Keys, authz.PublicJWK(priv.Public().(ed25519.PublicKey)))
	}
	return set
}
