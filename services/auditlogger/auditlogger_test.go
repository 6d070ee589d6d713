package auditlogger_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"threatview/auditlogger"
	"threatview/platform/wire"
)

func good() wire.AuditRecord {
	return wire.AuditRecord{
		ID: "0192f1c4-7a4b-7cde-8f00-1234567890ab", Time: time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC),
		ActorToken: "tok_1", ActorApp: "app-1", Action: "events.collect", Resource: "/v1/events",
		Outcome: 202, ClientIP: "203.0.113.9", UserAgent: "ua/1", RequestID: "req-1", EventCount: 3,
		BodySHA256: strings.Repeat("ab", 32),
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(r *wire.AuditRecord)
		field string // "" means valid
	}{
		{"OK", func(r *wire.AuditRecord) {}, ""},
		{"OK IPv6", func(r *wire.AuditRecord) { r.ClientIP = "2001:db8::1" }, ""},
		{"BadID", func(r *wire.AuditRecord) { r.ID = "nope" }, "id"},
		{"NoTime", func(r *wire.AuditRecord) { r.Time = time.Time{} }, "time"},
		{"OldTime", func(r *wire.AuditRecord) { r.Time = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC) }, "time"},
		{"NoAction", func(r *wire.AuditRecord) { r.Action = "" }, "action"},
		{"LongAction", func(r *wire.AuditRecord) { r.Action = strings.Repeat("a", 65) }, "action"},
		{"Outcome", func(r *wire.AuditRecord) { r.Outcome = 42 }, "outcome"},
		{"EventCount", func(r *wire.AuditRecord) { r.EventCount = -1 }, "event_count"},
		{"LongToken", func(r *wire.AuditRecord) { r.ActorToken = strings.Repeat("t", 65) }, "actor_token_id"},
		{"LongApp", func(r *wire.AuditRecord) { r.ActorApp = strings.Repeat("a", 129) }, "actor_app_id"},
		{"BadIP", func(r *wire.AuditRecord) { r.ClientIP = "300.1.1.1" }, "client_ip"},
		{"BadDigest", func(r *wire.AuditRecord) { r.BodySHA256 = "zz" }, "body_sha256"},
		{"BadUTF8", func(r *wire.AuditRecord) { r.ActorApp = "a\xffb" }, "actor_app_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good()
			tt.edit(&r)
			err := auditlogger.Validate(&r, 7)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var fe *auditlogger.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || fe.Index != 7 || !errors.Is(err, auditlogger.ErrInvalid) {
				t.Fatalf("Validate = %v, want FieldError on %s at 7", err, tt.field)
			}
			if wire.AuditRecord.Validate(r) == nil && tt.field == "id" {
				t.Fatalf("wire accepts what Validate refuses on id")
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	r := good()
	r.UserAgent = strings.Repeat("é", 300) // 600 bytes
	r.Body = []byte(`{"x":1}`)
	r.Time = r.Time.In(time.FixedZone("x", 3600))
	auditlogger.Normalize(&r, false)
	if len(r.UserAgent) > auditlogger.MaxUserAgent || !strings.HasPrefix(strings.Repeat("é", 300), r.UserAgent) || len(r.UserAgent)%2 != 0 {
		t.Fatalf("user agent cut to %d bytes, not at a character boundary under %d", len(r.UserAgent), auditlogger.MaxUserAgent)
	}
	if r.Body != nil {
		t.Fatalf("body kept with keepBody=false")
	}
	if r.Time.Location() != time.UTC {
		t.Fatalf("time not in UTC")
	}
	if err := auditlogger.Validate(&r, 0); err != nil {
		t.Fatalf("Validate after Normalize = %v", err)
	}
}

func TestCursor(t *testing.T) {
	id, ok := auditlogger.ParseID("0192F1C4-7a4b-7cde-8f00-1234567890ab")
	if !ok {
		t.Fatal("ParseID refused a UUID")
	}
	if got := auditlogger.FormatID(id); got != "0192f1c4-7a4b-7cde-8f00-1234567890ab" {
		t.Fatalf("FormatID = %q", got)
	}
	c := auditlogger.Cursor{Time: time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC), ID: id}
	got, err := auditlogger.DecodeCursor(c.Encode())
	if err != nil || !got.Time.Equal(c.Time) || got.ID != c.ID {
		t.Fatalf("DecodeCursor(Encode) = %v, %v; want %v", got, err, c)
	}
	for _, bad := range []string{"", "abc", "!!!!", c.Encode() + "AA"} {
		if _, err := auditlogger.DecodeCursor(bad); !errors.Is(err, auditlogger.ErrInvalid) {
			t.Errorf("DecodeCursor(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
