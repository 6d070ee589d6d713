package tokens

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"threatview/platform/wire"
)

// Audit actions recorded by the service.
const (
	ActionCreate = "tokens.create"
	ActionRevoke = "tokens.revoke"
)

// Auditor records an audited action durably. Audit returns an error wrapping
// ErrAuditUnavailable when the record is not known to be durable.
type Auditor interface {
	Audit(ctx context.Context, rec wire.AuditRecord) error
}

// Meta describes the request behind an action, for the audit record.
type Meta struct {
	// Actor is who acted: a person's username, or "admin-key" (see
	// platform/authz).
	Actor     string
	ClientIP  string
	UserAgent string
	RequestID string
}

// NewToken is what an operator asks for.
type NewToken struct {
	AppID string
	Name  string
}

// Service implements the token operations on a Store.
//
// Auditing (when an Auditor is given) is part of each change:
//   - Create inserts the token in a transaction, sends the audit record, and
//     commits only when the audit logger confirmed it. With the audit logger
//     down creation fails with ErrAuditUnavailable and no token exists.
//     Should the commit fail after the record was sent, the audit log holds a
//     creation that did not happen; its token was never shown to anyone.
//   - Revoke commits first and audits afterwards: a leaked token must be
//     revocable even while the audit logger is down. When the record cannot
//     be sent, Revoke returns ErrAuditUnavailable with the token revoked; the
//     operator retries, and a repeated revocation sends the same record again
//     (its id derives from the token id, so the audit log stores it once).
//
// Revoke also announces the revocation (when an Announcer is given) after
// the commit and before it answers, so every collector drops the token
// within moments even if this service dies right after answering. When the
// announcement is not confirmed Revoke returns ErrNotAnnounced with the
// token revoked; a repeated revocation announces it again.
type Service struct {
	store    Store
	audit    Auditor
	announce Announcer
	log      *slog.Logger
	now      func() time.Time
	interval time.Duration

	mu      sync.Mutex
	written map[string]time.Time // token id → when its last_used_at was last queued
	pending map[string]time.Time // token id → last use not yet written
}

// NewService returns a Service on store. audit may be nil (auditing off),
// and so may announce (revocations are not announced). lastUsedInterval
// bounds how often last_used_at is written per token.
func NewService(store Store, audit Auditor, announce Announcer, lastUsedInterval time.Duration, log *slog.Logger) *Service {
	if lastUsedInterval <= 0 {
		lastUsedInterval = time.Minute
	}
	return &Service{
		store:    store,
		audit:    audit,
		announce: announce,
		log:      log,
		now:      func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
		interval: lastUsedInterval,
		written:  map[string]time.Time{},
		pending:  map[string]time.Time{},
	}
}

// Create issues a token for nt.AppID and returns it with its plain form,
// which is never available again. Errors: ErrInvalid, ErrAuditUnavailable.
func (s *Service) Create(ctx context.Context, nt NewToken, meta Meta) (Token, string, error) {
	if err := ValidateAppID(nt.AppID); err != nil {
		return Token{}, "", err
	}
	if len([]rune(nt.Name)) > MaxNameLen {
		return Token{}, "", fmt.Errorf("%w: name is longer than %d characters", ErrInvalid, MaxNameLen)
	}
	plain, hash, err := NewPlain()
	if err != nil {
		return Token{}, "", err
	}
	t := Token{ID: uuid.NewString(), AppID: nt.AppID, Name: nt.Name, Hash: hash, CreatedAt: s.now()}
	var confirm func(context.Context) error
	if s.audit != nil {
		confirm = func(ctx context.Context) error {
			return s.audit.Audit(ctx, s.record(uuid.NewString(), ActionCreate, t, t.CreatedAt, 201, meta))
		}
	}
	if err := s.store.Create(ctx, t, confirm); err != nil {
		return Token{}, "", fmt.Errorf("create token for app %s: %w", t.AppID, err)
	}
	return t, plain, nil
}

// Get returns the token with id. Errors: ErrMalformed, ErrNotFound.
func (s *Service) Get(ctx context.Context, id string) (Token, error) {
	id, err := ParseID(id)
	if err != nil {
		return Token{}, err
	}
	return s.store.Get(ctx, id)
}

// List returns the tokens matching f, newest first. Errors: ErrInvalid.
func (s *Service) List(ctx context.Context, f Filter) ([]Token, error) {
	if f.AppID != "" {
		if err := ValidateAppID(f.AppID); err != nil {
			return nil, err
		}
	}
	return s.store.List(ctx, f)
}

// Revoke revokes the token with id (a no-op for a revoked one, apart from
// announcing and auditing it again) and returns it. Errors: ErrMalformed,
// ErrNotFound, ErrNotAnnounced and ErrAuditUnavailable (in both the token is
// revoked; see Service).
func (s *Service) Revoke(ctx context.Context, id string, meta Meta) (Token, error) {
	id, err := ParseID(id)
	if err != nil {
		return Token{}, err
	}
	t, err := s.store.Revoke(ctx, id, s.now())
	if err != nil {
		return Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	if s.announce != nil {
		if err := s.announce.Announce(ctx, t); err != nil {
			return t, fmt.Errorf("announce revocation of token %s: %w", t.ID, err)
		}
	}
	if s.audit != nil {
		recID := uuid.NewSHA1(auditNamespace, []byte(ActionRevoke+":"+t.ID)).String()
		if err := s.audit.Audit(ctx, s.record(recID, ActionRevoke, t, *t.RevokedAt, 204, meta)); err != nil {
			return t, fmt.Errorf("audit revocation of token %s: %w", t.ID, err)
		}
	}
	return t, nil
}

// Introspect returns the active token whose plain form is plain, or
// ErrNotFound when it is malformed, unknown or revoked. Its last use is
// recorded lazily (see RunLastUsed).
func (s *Service) Introspect(ctx context.Context, plain string) (Token, error) {
	if !WellFormed(plain) {
		return Token{}, ErrNotFound
	}
	h := HashPlain(plain)
	t, err := s.store.ByHash(ctx, h)
	if err != nil {
		return Token{}, err
	}
	// The lookup went through an index; compare again in constant time so
	// the answer never depends on a non-constant-time comparison.
	if subtle.ConstantTimeCompare(t.Hash[:], h[:]) != 1 || !t.Active() {
		return Token{}, ErrNotFound
	}
	s.used(t.ID)
	return t, nil
}

// MaxActive is the most tokens Active returns at once.
const MaxActive = 100_000

// Active returns at most limit (1..MaxActive) active tokens, most recently
// used or created first, for a collector to fill its cache in one request
// when it starts. Errors: ErrInvalid.
func (s *Service) Active(ctx context.Context, limit int) ([]Token, error) {
	if limit < 1 || limit > MaxActive {
		return nil, fmt.Errorf("%w: limit must be between 1 and %d", ErrInvalid, MaxActive)
	}
	return s.store.Active(ctx, limit)
}

// used queues a write of last_used_at unless one was queued for the token
// within the interval.
func (s *Service) used(id string) {
	now := s.now()
	s.mu.Lock()
	if last, ok := s.written[id]; ok && now.Sub(last) < s.interval {
		s.mu.Unlock()
		return
	}
	s.written[id] = now
	s.pending[id] = now
	s.mu.Unlock()
}

// RunLastUsed writes queued last_used_at updates off the request path until
// ctx ends, then writes what is left with a fresh short context.
func (s *Service) RunLastUsed(ctx context.Context) {
	every := s.interval / 4
	every = min(max(every, 100*time.Millisecond), 10*time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s.FlushLastUsed(fctx)
			cancel()
			return
		case <-tick.C:
			s.FlushLastUsed(ctx)
		}
	}
}

// FlushLastUsed writes the queued last_used_at updates now.
func (s *Service) FlushLastUsed(ctx context.Context) {
	now := s.now()
	s.mu.Lock()
	batch := s.pending
	s.pending = map[string]time.Time{}
	for id, at := range s.written {
		if now.Sub(at) >= s.interval {
			delete(s.written, id)
		}
	}
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	if err := s.store.TouchLastUsed(ctx, batch); err != nil && !errors.Is(err, context.Canceled) {
		// last_used_at is advisory; a lost update is retried at the next use.
		s.log.Warn("last used update failed", "tokens", len(batch), "err", err)
		s.mu.Lock()
		for id := range batch {
			delete(s.written, id)
		}
		s.mu.Unlock()
	}
}

// auditNamespace derives stable audit record ids for revocations.
var auditNamespace = uuid.MustParse("5b0f3c52-8f2e-4a8e-9d0c-3a7d1f6e2b41")

func (s *Service) record(id, action string, t Token, at time.Time, outcome int, meta Meta) wire.AuditRecord {
	body, _ := json.Marshal(struct {
		TokenID string `json:"token_id"`
		AppID   string `json:"app_id"`
		Name    string `json:"name"`
	}{t.ID, t.AppID, t.Name})
	return wire.AuditRecord{
		ID:         id,
		Time:       at,
		ActorToken: meta.Actor,
		Action:     action,
		Resource:   "token:" + t.ID,
		Outcome:    outcome,
		ClientIP:   meta.ClientIP,
		UserAgent:  meta.UserAgent,
		RequestID:  meta.RequestID,
		Body:       body,
	}
}

// ParseID checks that id is a UUID in canonical form and returns it in lower
// case. The error wraps ErrMalformed.
func ParseID(id string) (string, error) {
	if len(id) != 36 {
		return "", fmt.Errorf("%w: token id %.40q is not a UUID", ErrMalformed, id)
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return "", fmt.Errorf("%w: token id %q is not a UUID", ErrMalformed, id)
	}
	return u.String(), nil
}
