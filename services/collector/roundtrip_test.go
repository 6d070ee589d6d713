package collector_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"threatview/collector"
	"threatview/platform/wire"
)

// hostileSeeds are bodies a hostile app has sent (issue 14) and their
// neighbours: each must be refused with a 4xx or survive the round trip.
var hostileSeeds = []string{
	// Skew correction moved this to year -74, which RFC 3339 cannot carry.
	`{"type":"t","app":{"id":"a"},"occurred_at":"0000-01-01T00:00:00Z","sent_at":"2100-01-01T00:00:00Z"}`,
	`{"type":"t","app":{"id":"a"},"occurred_at":"1971-01-01T00:00:00Z","sent_at":"2100-01-01T00:00:00Z"}`,
	`{"type":"t","app":{"id":"a"},"occurred_at":"9999-12-31T23:59:59Z","sent_at":"1970-01-01T00:00:00Z"}`,
	`{"type":"t","app":{"id":"a"},"occurred_at":"9999-12-31T23:59:59-01:00"}`,
	`{"type":"t","app":{"id":"a"},"occurred_at":"1970-01-01T00:00:00+01:00"}`,
	`{"type":"t","app":{"id":"a"},"occurred_at":"2016-12-31T23:59:60Z"}`,
	`{"type":"t","app":{"id":"a"},"sent_at":"0001-01-01T00:00:00Z"}`,
	// Under encoding/json's 10,000 levels, over it once inside the envelope.
	`{"type":"t","app":{"id":"a"},"threats":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"type":"t","app":{"id":"a"},"threats":` + strings.Repeat("[", 32) + strings.Repeat("]", 32) + `}`,
	`{"type":"t","app":{"id":"a"},"threats":` + strings.Repeat("[", 33) + strings.Repeat("]", 33) + `}`,
	`{"type":"t","app":{"id":"a"},"attributes":{"a":` + strings.Repeat(`{"a":`, 31) + `1` + strings.Repeat("}", 32) + `}`,
	`{"type":"t","app":{"id":"a"},"threats":["\ud800"],"attributes":{"k":"\udfff"}}`,
	`{"type":"t","app":{"id":"a"},"attributes":{"a\u0000b":1}}`,
	`{"type":"t\u0000","app":{"id":"a"}}`,
	`{"type":"t","app":{"id":"a"},"attributes":{"n":1e400,"m":-1e-400}}`,
	`{"type":"t","app":{"id":"a"},"attributes":{"n":` + strings.Repeat("7", 5000) + `}}`,
	`{"type":"t","type":"u","app":{"id":"a"},"attributes":{"k":1,"k":2}}`,
	`{"type":"t","app":{"id":"a"},"threats":[{"type":"root","type":5}]}`,
	`{"type":"t","app":{"id":"a"},"threats":[{"type":5,"type":"root"}, "jailbreak", {"Type":"x"}]}`,
	`{"type":"t","app":{"id":"a"},"threats":[null]}`,
	`{"type":"t","app":{"id":"a"},"threats":null,"attributes":null}`,
}

// checkRoundTrip is the property: whatever Decode accepts, once enriched and
// encoded into an envelope next to another app's request, decodes and
// passes every check the processor makes before writing.
func checkRoundTrip(t *testing.T, body []byte, recv time.Time) (accepted bool) {
	in, err := collector.Decode(body)
	if err != nil {
		if !errors.Is(err, collector.ErrMalformed) && !errors.Is(err, collector.ErrInvalid) && !errors.Is(err, collector.ErrTooLarge) {
			t.Fatalf("Decode(%.200q) = %v, want a 4xx sentinel", body, err)
		}
		return false
	}
	en := collector.NewEnricher(nil, nil)
	out := make([]wire.Event, len(in))
	req := collector.Request{Identity: collector.Identity{TokenID: "tok", AppID: "a"}, RemoteAddr: "192.0.2.1:5000", RequestID: "r1", ReceivedAt: recv}
	if err := en.Enrich(req, in, out); err != nil {
		if !errors.Is(err, collector.ErrInvalid) {
			t.Fatalf("Enrich(%.200q) = %v, want ErrInvalid", body, err)
		}
		return false
	}
	goodIn, err := collector.Decode([]byte(validEvent))
	if err != nil {
		t.Fatalf("Decode(validEvent) = %v", err)
	}
	good := make([]wire.Event, 1)
	if err := en.Enrich(collector.Request{RequestID: "r0", ReceivedAt: recv}, goodIn, good); err != nil {
		t.Fatalf("Enrich(validEvent) = %v", err)
	}
	msg := collector.AppendEnvelope(nil, good, out)
	reqs, err := wire.DecodeEvents(msg)
	if err != nil || len(reqs) != 2 {
		t.Fatalf("accepted body %.200q: envelope does not split into 2 requests: %d, %v", body, len(reqs), err)
	}
	var events []wire.Event
	for i, r := range reqs {
		if r.Err != nil {
			t.Fatalf("accepted body %.200q: request %d does not decode: %v", body, i, r.Err)
		}
		events = append(events, r.Events...)
	}
	if len(reqs[1].Events) != len(in) {
		t.Fatalf("accepted body %.200q: request holds %d events, want %d", body, len(reqs[1].Events), len(in))
	}
	if len(events) != len(in)+1 {
		t.Fatalf("accepted body %.200q: envelope holds %d events, want %d", body, len(events), len(in)+1)
	}
	for i := range events {
		if err := events[i].Storable(); err != nil {
			t.Fatalf("accepted body %.200q: event %d not storable: %v", body, i, err)
		}
		if !collector.InTimeRange(events[i].OccurredAt) {
			t.Fatalf("accepted body %.200q: occurred_at %s out of range", body, events[i].OccurredAt)
		}
	}
	return true
}

func TestDecode_HostileSeedsRoundTrip(t *testing.T) {
	recv := time.Now().UTC()
	for i, s := range hostileSeeds {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkRoundTrip(t, []byte(s), recv) })
	}
}

// TestDecode_RulesRefuse checks the rules refuse what they say.
func TestDecode_RulesRefuse(t *testing.T) {
	tests := []struct {
		name, body, field string
	}{
		{"YearZero", `{"type":"t","app":{"id":"a"},"occurred_at":"0000-01-01T00:00:00Z"}`, "occurred_at"},
		{"BeforeEpoch", `{"type":"t","app":{"id":"a"},"occurred_at":"1969-12-31T23:59:59Z"}`, "occurred_at"},
		{"BeforeEpochByOffset", `{"type":"t","app":{"id":"a"},"occurred_at":"1970-01-01T00:00:00+01:00"}`, "occurred_at"},
		{"AfterYear9999ByOffset", `{"type":"t","app":{"id":"a"},"occurred_at":"9999-12-31T23:59:59-01:00"}`, "occurred_at"},
		{"SentAtYear1", `{"type":"t","app":{"id":"a"},"sent_at":"0001-01-01T00:00:00Z"}`, "sent_at"},
		{"Nesting33", `{"type":"t","app":{"id":"a"},"threats":` + strings.Repeat("[", 33) + strings.Repeat("]", 33) + `}`, "threats"},
		{"Nesting9999", `{"type":"t","app":{"id":"a"},"threats":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`, "threats"},
		{"AttributesNesting33", `{"type":"t","app":{"id":"a"},"attributes":` + strings.Repeat(`{"a":`, 33) + `1` + strings.Repeat("}", 33) + `}`, "attributes"},
		{"ThreatNumber", `{"type":"t","app":{"id":"a"},"threats":[1]}`, "threats[0]"},
		{"ThreatNull", `{"type":"t","app":{"id":"a"},"threats":["ok",null]}`, "threats[1]"},
		{"ThreatNoType", `{"type":"t","app":{"id":"a"},"threats":[{"kind":"root"}]}`, "threats[0]"},
		{"ThreatTypeCase", `{"type":"t","app":{"id":"a"},"threats":[{"Type":"root"}]}`, "threats[0]"},
		{"ThreatLastTypeNumber", `{"type":"t","app":{"id":"a"},"threats":[{"type":"root","type":5}]}`, "threats[0]"},
		{"ThreatArray", `{"type":"t","app":{"id":"a"},"threats":[["root"]]}`, "threats[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := collector.Decode([]byte(tt.body))
			var fe *collector.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, collector.ErrInvalid) || fe.Field != tt.field {
				t.Fatalf("Decode(%.120s) = %v, want ErrInvalid on %s", tt.body, err, tt.field)
			}
		})
	}
	ok := []string{
		`{"type":"t","app":{"id":"a"},"occurred_at":"1970-01-01T00:00:00Z","sent_at":"9999-12-31T23:59:59.999999999Z"}`,
		`{"type":"t","app":{"id":"a"},"attributes":` + strings.Repeat(`{"a":`, 31) + `[]` + strings.Repeat("}", 31) + `}`,
		`{"type":"t","app":{"id":"a"},"threats":[{"type":"x","deep":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}]}`,
		`{"type":"t","app":{"id":"a"},"threats":["root",{"type":"hook","extra":[1]},{"type":5,"type":"x"}],"attributes":{"s":"[[[["}}`,
	}
	for _, body := range ok {
		if _, err := collector.Decode([]byte(body)); err != nil {
			t.Errorf("Decode(%.120s) = %v, want nil", body, err)
		}
	}
}

// TestEnricher_SkewOutOfRange checks the range after skew correction: the
// correction may span more than time.Duration's 292 years.
func TestEnricher_SkewOutOfRange(t *testing.T) {
	recv := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name, occurred, sent string
		ok                   bool
		want                 time.Time
	}{
		{"PastSentAt", "1971-01-01T00:00:00Z", "2100-01-01T00:00:00Z", false, time.Time{}},
		{"FarFutureSentAt", "2026-11-30T00:00:00Z", "9999-01-01T00:00:00Z", false, time.Time{}},
		{"FarPastSentAt", "1970-01-01T00:00:00Z", "1970-01-01T00:00:01Z", true, recv.Add(-time.Second)},
		{"FarPastSentAtFutureClamp", "2026-01-01T00:00:00Z", "1970-01-01T00:00:00Z", true, recv},
		{"LongSkewInRange", "2500-01-01T00:00:00Z", "2500-01-01T00:00:10Z", true, recv.Add(-10 * time.Second)},
	}
	en := collector.NewEnricher(nil, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"type":"t","app":{"id":"a"},"occurred_at":%q,"sent_at":%q}`, tt.occurred, tt.sent)
			in, err := collector.Decode([]byte(body))
			if err != nil {
				t.Fatalf("Decode = %v", err)
			}
			out := make([]wire.Event, 1)
			err = en.Enrich(collector.Request{ReceivedAt: recv}, in, out)
			if !tt.ok {
				var fe *collector.FieldError
				if !errors.As(err, &fe) || !errors.Is(err, collector.ErrInvalid) || fe.Field != "occurred_at" {
					t.Fatalf("Enrich = %v, want ErrInvalid on occurred_at", err)
				}
				return
			}
			if err != nil || !out[0].OccurredAt.Equal(tt.want) {
				t.Fatalf("Enrich = %v, occurred_at %s, want %s", err, out[0].OccurredAt, tt.want)
			}
		})
	}
}

// TestDecode_RoundTripProperty generates random events full of edge cases
// and checks the round-trip property for every one.
func TestDecode_RoundTripProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	recv := time.Now().UTC()
	n := 3000
	if testing.Short() {
		n = 300
	}
	accepted := 0
	for range n {
		if checkRoundTrip(t, randomBody(r), recv) {
			accepted++
		}
	}
	// The generator must exercise both sides of the rules.
	if accepted < n/20 || accepted > n*19/20 {
		t.Fatalf("%d of %d random bodies accepted; the generator no longer probes the rules", accepted, n)
	}
	t.Logf("%d of %d random bodies accepted", accepted, n)
}

// FuzzDecode_RoundTrip is the property over arbitrary bodies.
func FuzzDecode_RoundTrip(f *testing.F) {
	for _, s := range hostileSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(validEvent))
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		f.Add(randomBody(r))
	}
	recv := time.Now().UTC()
	f.Fuzz(func(t *testing.T, body []byte) { checkRoundTrip(t, body, recv) })
}

func randomBody(r *rand.Rand) []byte {
	n := 1 + r.IntN(3)
	evs := make([]string, n)
	for i := range evs {
		evs[i] = randomEvent(r)
	}
	if n == 1 && r.IntN(2) == 0 {
		return []byte(evs[0])
	}
	return []byte(`{"events":[` + strings.Join(evs, ",") + `]}`)
}

func randomEvent(r *rand.Rand) string {
	fields := []string{`"type":` + randomString(r), `"app":{"id":"a"}`}
	if r.IntN(2) == 0 {
		fields = append(fields, `"occurred_at":"`+randomTime(r)+`"`)
	}
	if r.IntN(2) == 0 {
		fields = append(fields, `"sent_at":"`+randomTime(r)+`"`)
	}
	if r.IntN(2) == 0 {
		fields = append(fields, `"threats":`+randomThreats(r))
	}
	if r.IntN(2) == 0 {
		fields = append(fields, `"attributes":{"k":`+randomValue(r, 0)+`,"k":`+randomValue(r, 0)+`}`)
	}
	r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	return "{" + strings.Join(fields, ",") + "}"
}

func randomTime(r *rand.Rand) string {
	years := []int{0, 1, 1969, 1970, 1971, 2000, 2026, 2100, 2500, 9998, 9999}
	y := years[r.IntN(len(years))]
	zones := []string{"Z", "+01:00", "-01:00", "+14:00", "-12:00"}
	sec := r.IntN(61) // 60: a leap second, which RFC 3339 allows and Go refuses
	return fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d.%09d%s", y, 1+r.IntN(12), 1+r.IntN(28)+3*r.IntN(2),
		r.IntN(24), r.IntN(60), sec, r.IntN(1e9), zones[r.IntN(len(zones))])
}

func randomThreats(r *rand.Rand) string {
	var items []string
	for range r.IntN(4) {
		switch r.IntN(5) {
		case 0:
			items = append(items, randomString(r))
		case 1:
			items = append(items, `{"type":`+randomString(r)+`,"extra":`+randomValue(r, 0)+`}`)
		default:
			items = append(items, randomValue(r, 0))
		}
	}
	return "[" + strings.Join(items, ",") + "]"
}

func randomValue(r *rand.Rand, depth int) string {
	switch k := r.IntN(8); {
	case k == 0 && depth < 40:
		d := 1 + r.IntN(40)
		return strings.Repeat("[", d) + randomValue(r, depth+d) + strings.Repeat("]", d)
	case k == 1 && depth < 40:
		return `{` + randomString(r) + `:` + randomValue(r, depth+1) + `}`
	case k == 2:
		return []string{"1e400", "-1e-400", "1e200000", "0.5", "-0", strings.Repeat("9", 5000), "1e-16384"}[r.IntN(7)]
	case k == 3:
		return []string{"true", "false", "null"}[r.IntN(3)]
	default:
		return randomString(r)
	}
}

func randomString(r *rand.Rand) string {
	parts := []string{`a`, `\u0000`, `\ud800`, `\udc00`, `\ud83d\ude00`, `\"`, `\\`, `é`, `\n`, `\u2028`, `x y`}
	var b strings.Builder
	b.WriteByte('"')
	for range r.IntN(5) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	b.WriteByte('"')
	s := b.String()
	if !json.Valid([]byte(s)) {
		return `"a"`
	}
	return s
}
