// Package badinput sends the running stack's public APIs every kind of bad
// input and checks that each gets its 4xx with the JSON error body, that
// nothing is stored, and that the services stay healthy.
package badinput

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
)

// badCase is one bad request to POST /v1/events.
type badCase struct {
	name   string
	body   []byte
	header map[string]string
	status int
}

// event returns a valid event body with the fields in extra replacing or
// adding to the defaults (raw JSON values).
func event(app string, extra map[string]string) []byte {
	fields := map[string]string{
		"type":   `"app.startup"`,
		"app":    `{"id":"` + app + `","version":"1.0.0"}`,
		"device": `{"model":"Pixel 8","manufacturer":"Google","os":"android","os_version":"14"}`,
	}
	for k, v := range extra {
		if v == "" {
			delete(fields, k)
			continue
		}
		fields[k] = v
	}
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for _, k := range []string{"type", "event_id", "occurred_at", "app", "device", "threats", "attributes"} {
		if v, ok := fields[k]; ok {
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.WriteString(`"` + k + `":` + v)
			delete(fields, k)
		}
	}
	for k, v := range fields { // unknown fields, after the known ones
		b.WriteString(`,"` + k + `":` + v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func gzipped(tb testing.TB, data []byte, repeat int) []byte {
	tb.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	for i := 0; i < repeat; i++ {
		if _, err := zw.Write(data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func manyAttributes(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"attribute_`)
		b.WriteString(strings.Repeat("x", 4))
		b.WriteString(itoa(i))
		b.WriteString(`":1`)
	}
	b.WriteByte('}')
	return b.String()
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

func batch(app string, n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"events":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(event(app, nil))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func collectorCases(t *testing.T, app string) []badCase {
	good := event(app, nil)
	deep := `{"a":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`
	gzipJSON := map[string]string{"Content-Encoding": "gzip"}
	bomb := gzipped(t, make([]byte, 1<<20), 20) // 20 MiB of zeros, about 20 KiB on the wire
	jsonBomb := gzipped(t, []byte(`{"type":"app.startup","app":{"id":"`+app+`"},"attributes":{"pad":"`+strings.Repeat("a", 4<<20)+`"}}`), 1)
	return []badCase{
		// Malformed and truncated JSON.
		{name: "Malformed", body: []byte(`{"type": app.startup}`), status: 400},
		{name: "Truncated", body: good[:len(good)/2], status: 400},
		{name: "TruncatedBatch", body: batch(app, 3)[:200], status: 400},
		{name: "Empty", body: []byte{}, status: 400},
		{name: "NotAnObject", body: []byte(`[1,2,3]`), status: 400},
		{name: "TrailingData", body: append(append([]byte{}, good...), []byte(` {"x":1}`)...), status: 400},
		{name: "TwoObjects", body: append(append([]byte{}, good...), good...), status: 400},
		// Invalid UTF-8. encoding/json silently replaces invalid bytes in
		// strings with U+FFFD and keeps them in raw objects, so the
		// collector must check the body itself.
		{name: "InvalidUTF8InString", body: event(app, map[string]string{"device": "{\"model\":\"Pixel \xff\xfe\"}"}), status: 400},
		{name: "InvalidUTF8InAttributes", body: event(app, map[string]string{"attributes": "{\"k\":\"\xc3\x28\"}"}), status: 400},
		{name: "InvalidUTF8InKey", body: event(app, map[string]string{"attributes": "{\"\xff\":1}"}), status: 400},
		// Deep nesting beyond encoding/json's limit (10,000 levels).
		{name: "DeeplyNested", body: event(app, map[string]string{"attributes": deep}), status: 400},
		{name: "DeeplyNestedBody", body: []byte(strings.Repeat(`{"events":[`, 20000)), status: 400},
		// Thousands of attributes exceed the 32 KiB event limit.
		{name: "ThousandsOfAttributes", body: event(app, map[string]string{"attributes": manyAttributes(10000)}), status: 413},
		{name: "ThousandsOfThreats", body: event(app, map[string]string{"threats": `[` + strings.Repeat(`"root",`, 20000) + `"root"]`}), status: 413},
		// Huge strings: over the event limit, over the request limit.
		{name: "HugeStringInEvent", body: event(app, map[string]string{"attributes": `{"s":"` + strings.Repeat("a", 64<<10) + `"}`}), status: 413},
		{name: "HugeBody", body: event(app, map[string]string{"type": `"` + strings.Repeat("a", 2<<20) + `"`}), status: 413},
		{name: "LongType", body: event(app, map[string]string{"type": `"` + strings.Repeat("t", 65) + `"`}), status: 422},
		{name: "LongDeviceModel", body: event(app, map[string]string{"device": `{"model":"` + strings.Repeat("m", 257) + `"}`}), status: 422},
		{name: "TooManyEvents", body: batch(app, 501), status: 413},
		{name: "EmptyBatch", body: []byte(`{"events":[]}`), status: 422},
		// Gzip: bombs stop at 1 MiB of output; broken streams are 400.
		{name: "GzipBombZeros", body: bomb, header: gzipJSON, status: 413},
		{name: "GzipBombJSON", body: jsonBomb, header: gzipJSON, status: 413},
		{name: "GzipBroken", body: []byte("\x1f\x8b\x08\x00garbage-not-deflate"), header: gzipJSON, status: 400},
		{name: "GzipTruncated", body: gzipped(t, good, 1)[:20], header: gzipJSON, status: 400},
		{name: "GzipLabelPlainBody", body: good, header: gzipJSON, status: 400},
		// Wrong content types and encodings.
		{name: "TextPlain", body: good, header: map[string]string{"Content-Type": "text/plain"}, status: 415},
		{name: "FormURLEncoded", body: good, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, status: 415},
		{name: "NoContentType", body: good, header: map[string]string{"Content-Type": ""}, status: 415},
		{name: "XML", body: []byte(`<event/>`), header: map[string]string{"Content-Type": "application/xml"}, status: 415},
		{name: "Latin1Charset", body: good, header: map[string]string{"Content-Type": "application/json; charset=latin1"}, status: 415},
		{name: "BrotliEncoding", body: good, header: map[string]string{"Content-Encoding": "br"}, status: 415},
		// Unknown fields, at the top and inside objects.
		{name: "UnknownTopLevelField", body: event(app, map[string]string{"admin": "true"}), status: 422},
		{name: "UnknownAppField", body: event(app, map[string]string{"app": `{"id":"` + app + `","owner":"x"}`}), status: 422},
		{name: "UnknownFieldBesideEvents", body: []byte(`{"events":[` + string(good) + `],"extra":1}`), status: 422},
		// Wrong types.
		{name: "TypeIsNumber", body: event(app, map[string]string{"type": "5"}), status: 422},
		{name: "AppIsString", body: event(app, map[string]string{"app": `"` + app + `"`}), status: 422},
		{name: "ThreatsIsString", body: event(app, map[string]string{"threats": `"root"`}), status: 422},
		{name: "AttributesIsArray", body: event(app, map[string]string{"attributes": `[1]`}), status: 422},
		{name: "EventsIsObject", body: []byte(`{"events":{}}`), status: 422},
		{name: "EventIsNotObject", body: []byte(`{"events":[1]}`), status: 422},
		{name: "OccurredAtNotTime", body: event(app, map[string]string{"occurred_at": `"yesterday"`}), status: 422},
		{name: "EventIDNotUUID", body: event(app, map[string]string{"event_id": `"42"`}), status: 422},
		{name: "MissingType", body: event(app, map[string]string{"type": ""}), status: 422},
		{name: "MissingApp", body: event(app, map[string]string{"app": ""}), status: 422},
		{name: "NumberBeyondNumeric", body: event(app, map[string]string{"attributes": `{"n":1e200000}`}), status: 422},
		// NUL bytes: raw (invalid JSON) and escaped (valid JSON that
		// Postgres text and jsonb cannot hold).
		{name: "RawNUL", body: event(app, map[string]string{"type": "\"app\x00startup\""}), status: 400},
		{name: "EscapedNULInType", body: event(app, map[string]string{"type": `"app\u0000startup"`}), status: 422},
		{name: "EscapedNULInAttributes", body: event(app, map[string]string{"attributes": `{"k":"a\u0000b"}`}), status: 422},
		{name: "EscapedNULInThreats", body: event(app, map[string]string{"threats": `["a\u0000b"]`}), status: 422},
	}
}

// TestCollector_BadInput sends every bad request of collectorCases with a
// fresh app's token, then one good marker event: afterwards the app must
// have exactly that one event and one events.collect audit row (outcome
// 202), and every service must still be healthy.
func TestCollector_BadInput(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "e2e-bad")
	start := time.Now().Add(-time.Minute)
	for _, c := range collectorCases(t, app.ID) {
		t.Run(c.name, func(t *testing.T) {
			r, err := e2etest.TryDo(http.MethodPost, env.CollectorURL+"/v1/events", app.Token, c.body, c.header)
			if err != nil {
				t.Fatalf("POST: %v", err)
			}
			e2etest.CheckError(t, c.name, r, c.status)
		})
	}
	// A lone UTF-16 surrogate escape is valid JSON that Postgres jsonb
	// refuses: the collector must refuse it too, or the 202 would end in the
	// dead-letter queue.
	t.Run("LoneSurrogate", func(t *testing.T) {
		r := e2etest.Do(t, http.MethodPost, env.CollectorURL+"/v1/events", app.Token, event(app.ID, map[string]string{"attributes": `{"k":"\ud800"}`}), nil)
		e2etest.CheckError(t, "lone surrogate", r, 422)
	})
	t.Run("HugeHeader", func(t *testing.T) {
		// Answered by net/http before any handler (MaxHeaderBytes, 16 KiB):
		// 431 with a plain-text body, not the JSON error body.
		r, err := e2etest.TryDo(http.MethodPost, env.CollectorURL+"/v1/events", app.Token, event(app.ID, nil),
			map[string]string{"X-Padding": strings.Repeat("p", 64<<10)})
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		if r.Status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("status %d, want 431", r.Status)
		}
	})
	t.Run("ManyHeaders", func(t *testing.T) {
		h := map[string]string{}
		for i := 0; i < 2000; i++ {
			h["X-H"+itoa(i)] = "v"
		}
		r, err := e2etest.TryDo(http.MethodPost, env.CollectorURL+"/v1/events", app.Token, event(app.ID, nil), h)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		if r.Status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("status %d, want 431", r.Status)
		}
	})

	e2etest.Healthy(t, env)
	checkOnlyMarker(t, env, app, start)
}

// checkOnlyMarker sends one good event for app and waits until it is
// stored and audited; then app must have exactly that row and that audit row.
func checkOnlyMarker(t *testing.T, env e2etest.Env, app e2etest.App, since time.Time) {
	t.Helper()
	id := e2etest.UUID()
	rid := e2etest.Name("marker")
	r := e2etest.Do(t, http.MethodPost, env.CollectorURL+"/v1/events", app.Token, e2etest.GoodEvent(app.ID, id), map[string]string{"X-Request-ID": rid})
	if r.Status != http.StatusAccepted {
		t.Fatalf("marker event: status %d %s", r.Status, r.Body)
	}
	pool := e2etest.Events(t, env)
	audit := e2etest.MariaDB(t, env.AuditDSN)
	ctx := context.Background()
	var stored, audited map[string]int
	err := e2etest.WaitFor(60*time.Second, func() (bool, error) {
		var err error
		if stored, err = e2etest.StoredCounts(ctx, pool, app.ID, since); err != nil {
			return false, err
		}
		if audited, err = e2etest.AuditCounts(ctx, audit, app.ID, since); err != nil {
			return false, err
		}
		return stored[id] > 0 && audited[rid] > 0, nil
	})
	if err != nil {
		t.Fatalf("marker event %s not stored and audited: %v (stored %v, audited %v)", id, err, stored, audited)
	}
	if len(stored) != 1 || stored[id] != 1 {
		t.Errorf("app %s has stored events %v, want only the marker %s once", app.ID, stored, id)
	}
	if len(audited) != 1 || audited[rid] != 1 {
		t.Errorf("app %s has events.collect 202 audit rows %v, want only the marker's request %s once", app.ID, audited, rid)
	}
}
