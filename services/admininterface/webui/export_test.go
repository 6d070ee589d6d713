package webui

import (
	"encoding/csv"
	"strings"
	"testing"
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
