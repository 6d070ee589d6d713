package webui

import (
	"encoding/csv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"threatview/admininterface/upstream"
	"threatview/platform/httpserver"
)

// TestServer_AuditExportHostileCells: what strangers sent (a User-Agent, a
// resource path) reaches the CSV export; a cell a spreadsheet would run as
// a formula is written as text.
func TestServer_AuditExportHostileCells(t *testing.T) {
	h := newHarness(t)
	recs := auditRecords(6)
	hostile := []string{"=HYPERLINK(\"http://evil.example\",\"x\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)", "\t=1+1", "\r=1+1"}
	for i, v := range hostile {
		recs[i].UserAgent = v
		recs[i].Resource = v
	}
	h.fake.audit = recs
	b := h.browser(t)
	b.signIn("aud")
	resp, body := b.do("GET", "/audit/export.csv?searched=1", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("CSV export = %d", resp.StatusCode)
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(rows) != 1+len(hostile) {
		t.Fatalf("CSV export: %d rows, %v; want %d", len(rows), err, 1+len(hostile))
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for i, v := range hostile {
		for _, name := range []string{"user_agent", "resource"} {
			if got := rows[1+i][col[name]]; got != "'"+v {
				t.Errorf("row %d %s = %q, want %q (apostrophe first)", i, name, got, "'"+v)
			}
		}
		if got := rows[1+i][col["outcome"]]; strings.HasPrefix(got, "'") {
			t.Errorf("row %d outcome = %q, want the plain number", i, got)
		}
	}
}

// TestServer_AuditExportOutlivesToken: the person's access token expires
// mid-export (5 minutes at most; a long export takes longer). The export
// was cut short at the first page read after the expiry; it is authorised
// once, at its start, and reads on with the export key.
func TestServer_AuditExportOutlivesToken(t *testing.T) {
	h := newHarness(t)
	h.fake.audit = auditRecords(2500)
	var keyPages atomic.Int32
	// The audit logger as it is once the token has expired: it takes the
	// person's token for the first page only.
	expiring := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/audit" {
			switch auth := r.Header.Get("Authorization"); {
			case auth == "Bearer export-key":
				keyPages.Add(1)
			case auth != "Bearer at-aud" || r.URL.Query().Get("cursor") != "":
				httpserver.WriteError(w, http.StatusUnauthorized, "unauthorized", "token expired", nil)
				return
			}
		}
		h.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(expiring.Close)
	h.srv.deps.Audit = upstream.Audit{Client: upstream.New(expiring.URL, nil, 5*time.Second)}
	h.srv.opts.ExportKey = "export-key"
	b := h.browser(t)
	b.signIn("aud")
	resp, body := b.do("GET", "/audit/export.ndjson?searched=1", nil)
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if resp.StatusCode != 200 || len(lines) != 2500 {
		t.Fatalf("NDJSON export with the token expiring after the first page = %d with %d lines, want 200 with 2500", resp.StatusCode, len(lines))
	}
	if n := keyPages.Load(); n != 2 {
		t.Errorf("%d pages read with the export key, want 2 (the first with the person's token)", n)
	}

	t.Run("RefusedAtStart", func(t *testing.T) {
		// The export key never stands in for the person: a person the audit
		// logger refuses gets no export at all.
		b := h.browser(t)
		b.signIn("ada")
		if resp, _ := b.do("GET", "/audit/export.csv?searched=1", nil); resp.StatusCode == http.StatusOK {
			t.Fatalf("export with a refused token = %d, want an error", resp.StatusCode)
		}
		if n := keyPages.Load(); n != 2 {
			t.Errorf("the export key read %d pages more for a refused person", n-2)
		}
	})
}
