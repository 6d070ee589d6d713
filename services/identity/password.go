package identity

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2Params are the argon2id cost parameters of new hashes. Stored hashes
// carry their own parameters, so raising these re-hashes nobody but applies
// to every password set afterwards.
type Argon2Params struct {
	MemoryKiB uint32 // memory in KiB
	Time      uint32 // passes over the memory
	Threads   uint8  // lanes
}

// DefaultArgon2 is OWASP's first recommended argon2id configuration (Password
// Storage Cheat Sheet): 19 MiB of memory, 2 passes, 1 lane; about 40 ms a hash
// on one core of the 2-vCPU test machine. With a 16-byte random salt and a
// 32-byte key.
var DefaultArgon2 = Argon2Params{MemoryKiB: 19 * 1024, Time: 2, Threads: 1}

const (
	saltLen = 16
	keyLen  = 32
)

// Hasher hashes and verifies passwords with argon2id. At most a fixed number
// of hashes run at once, so a burst of sign-ins cannot exhaust memory (each
// holds MemoryKiB while it runs).
type Hasher struct {
	params Argon2Params
	slots  chan struct{}
	dummy  string // a hash of a random password, verified for unknown users
}

// NewHasher returns a Hasher with params, running at most concurrent hashes
// at a time.
func NewHasher(params Argon2Params, concurrent int) (*Hasher, error) {
	if params.MemoryKiB < 8*uint32(params.Threads) || params.Time < 1 || params.Threads < 1 {
		return nil, fmt.Errorf("argon2id parameters m=%d t=%d p=%d are too small", params.MemoryKiB, params.Time, params.Threads)
	}
	h := &Hasher{params: params, slots: make(chan struct{}, max(1, concurrent))}
	var b [24]byte
	_, _ = rand.Read(b[:])
	dummy, err := h.Hash(context.Background(), base64.RawStdEncoding.EncodeToString(b[:]))
	if err != nil {
		return nil, err
	}
	h.dummy = dummy
	return h, nil
}

// Hash returns the argon2id hash of password in PHC string form:
// $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<key> (base64, no
// padding).
func (h *Hasher) Hash(ctx context.Context, password string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("read salt: %w", err)
	}
	if err := h.acquire(ctx); err != nil {
		return "", err
	}
	defer h.release()
	p := h.params
	key := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, keyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.MemoryKiB, p.Time, p.Threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// Verify reports whether password matches encoded, comparing in constant
// time. An empty or unparsable encoded (an unknown user, a person without
// password) is compared against a dummy hash, so the answer takes about as
// long as for a real one, and is false.
func (h *Hasher) Verify(ctx context.Context, encoded, password string) (bool, error) {
	real := true
	p, salt, want, err := parsePHC(encoded)
	if err != nil {
		real = false
		p, salt, want, _ = parsePHC(h.dummy)
	}
	if err := h.acquire(ctx); err != nil {
		return false, err
	}
	defer h.release()
	got := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1 && real, nil
}

func (h *Hasher) acquire(ctx context.Context) error {
	select {
	case h.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *Hasher) release() { <-h.slots }

var errPHC = errors.New("not an argon2id hash")

func parsePHC(s string) (Argon2Params, []byte, []byte, error) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return Argon2Params{}, nil, nil, errPHC
	}
	var p Argon2Params
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Time, &p.Threads); err != nil {
		return Argon2Params{}, nil, nil, errPHC
	}
	// Refuse absurd stored parameters rather than allocate them.
	if p.MemoryKiB < 8 || p.MemoryKiB > 1<<20 || p.Time < 1 || p.Time > 64 || p.Threads < 1 {
		return Argon2Params{}, nil, nil, errPHC
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	key, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(key) < 16 {
		return Argon2Params{}, nil, nil, errPHC
	}
	return p, salt, key, nil
}
