package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/processor"
	"threatview/processor/internal/pgtest"
)

// TestCheckStorable_MatchesJSONB checks processor.CheckStorable against
// Postgres itself: a JSON value it passes must be accepted by jsonb, and one
// it rejects must be rejected, so no message blocks the queue and none is
// dead-lettered needlessly.
func TestCheckStorable_MatchesJSONB(t *testing.T) {
	_, pool := pgtest.MustEventsDB(t)
	ctx := context.Background()
	docs := []string{
		`[1e131071]`, `[1e131072]`, `[1.5e131071]`, `[12e131070]`, `[12e131071]`,
		`[0.00001e131076]`, `[0.00001e131077]`, `[-1e131072]`, `[1E+131071]`,
		`[1e-16383]`, `[1e-16384]`, `[0.5e-16382]`, `[0.5e-16383]`, `[0e-16383]`, `[0e-16384]`,
		`[0.0e-16383]`, `[123.456e-16380]`, `[123.456e-16381]`, `[1000e-16386]`,
		`[1e9999999999]`, `[0e9999999999]`, `{"n":1.5,"s":"1e999999"}`, `["\\u0000"]`, `["\u0000"]`,
		`[0, -0, 0.0, 1e0, 1E-0, 123456789.123456789e-5]`,
	}
	r := rand.New(rand.NewPCG(11, 11))
	for range 300 {
		exp := fmt.Sprint(131060 + r.IntN(20))
		if r.IntN(2) == 0 {
			exp = fmt.Sprint(-16370 - r.IntN(20))
		} else if r.IntN(2) == 0 {
			exp = "+" + exp
		}
		docs = append(docs, fmt.Sprintf(`[%s%se%s]`,
			[]string{"1", "12", "0.5", "0.0001", "99.99", "0", "7000", "-3.25"}[r.IntN(8)],
			[]string{"", "0", "00"}[r.IntN(3)], exp))
	}
	now := time.Now()
	for _, doc := range docs {
		if !json.Valid([]byte(doc)) {
			continue // the generator's 0 followed by zeros
		}
		e := wire.Event{ReceivedAt: now, Attributes: json.RawMessage(doc)}
		checked := processor.CheckStorable(&e, now) == nil
		_, err := pool.Exec(ctx, "SELECT $1::text::jsonb", doc)
		if accepted := err == nil; checked != accepted {
			t.Errorf("CheckStorable(%.60s) passes = %v, jsonb accepts = %v (%v)", doc, checked, accepted, err)
		}
	}
}
