package storage

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func TestProject(t *testing.T) {
	base := Snapshot{Events: 1000, AuditRows: 1000, Tables: []Table{
		{DB: "postgres", Name: "events.events", Rows: 1000, Bytes: 1_000_000},
		{DB: "postgres", Name: "facts.facts", Rows: 1000, Bytes: 200_000},
		{DB: "mariadb", Name: "audit.audit_events", Rows: 1000, Bytes: 500_000},
		{DB: "mariadb", Name: "audit.archives", Rows: 2, Bytes: 32768},
	}}
	cur := Snapshot{Events: 11000, AuditRows: 11000, Tables: []Table{
		{DB: "postgres", Name: "events.events", Rows: 11000, Bytes: 6_000_000},      // +5 MB / 10k = 500 B
		{DB: "postgres", Name: "facts.facts", Rows: 11000, Bytes: 1_200_000},        // +1 MB / 10k = 100 B
		{DB: "postgres", Name: "facts.events_by_os_per_day", Rows: 5, Bytes: 16384}, // new table: all of it counts
		{DB: "mariadb", Name: "audit.audit_events", Rows: 11000, Bytes: 3_300_000},  // average 300 B a row
		{DB: "mariadb", Name: "audit.archives", Rows: 2, Bytes: 32768},              // gained no rows: costs nothing
	}}
	p := Project(base, cur, 105)
	if p.EventsAdded != 10000 || p.AuditAdded != 10000 {
		t.Fatalf("added = %d events, %d audit rows; want 10000 each", p.EventsAdded, p.AuditAdded)
	}
	want := map[string]float64{
		"events.events":              500,
		"facts.facts":                100,
		"facts.events_by_os_per_day": 1.6384,
		"audit.audit_events":         300,
		"audit.archives":             0,
	}
	for _, r := range p.Rows {
		if w, ok := want[r.Table.Name]; !ok || math.Abs(r.BytesPerEvent-w) > 1e-9 {
			t.Errorf("%s: %v bytes/event, want %v", r.Table.Name, r.BytesPerEvent, w)
		}
	}
	// 500 B × 105/s × 86400 s = 4.536 GB per day; a month is 30 days, 3 months 90.
	ev := p.Rows[0]
	if ev.PerDay != 500*105*86400 || ev.PerMonth != ev.PerDay*30 || ev.Per3Months != ev.PerDay*90 {
		t.Errorf("events projection = %v/%v/%v per day/month/3 months", ev.PerDay, ev.PerMonth, ev.Per3Months)
	}
	if got := p.PostgresTotal.BytesPerEvent; math.Abs(got-601.6384) > 1e-9 {
		t.Errorf("Postgres total = %v bytes/event, want 601.6384", got)
	}
	if got := p.MariaDBTotal.PerDay; got != 300*105*86400 {
		t.Errorf("MariaDB total per day = %v, want %v", got, 300*105*86400)
	}
	if ev.Reference != "~8 GB" {
		t.Errorf("events reference = %q", ev.Reference)
	}
}

func TestProject_NoBaseline(t *testing.T) {
	cur := Snapshot{Events: 200, Tables: []Table{{DB: "postgres", Name: "events.events", Rows: 200, Bytes: 100_000}}}
	p := Project(Snapshot{}, cur, 2000)
	if got := p.Rows[0].BytesPerEvent; got != 500 {
		t.Errorf("bytes/event = %v, want 500", got)
	}
	if got := p.Rows[0].PerDay; got != 500*2000*86400 {
		t.Errorf("per day = %v", got)
	}
}

func TestProject_NothingAdded(t *testing.T) {
	s := Snapshot{Events: 5, Tables: []Table{{DB: "postgres", Name: "events.events", Rows: 5, Bytes: 8192}}}
	p := Project(s, s, 105)
	if p.Rows[0].BytesPerEvent != 0 || p.PostgresTotal.PerDay != 0 {
		t.Errorf("no events added but projection = %+v", p.Rows[0])
	}
}

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{{0, "0 B"}, {999, "999 B"}, {1000, "1.0 kB"}, {4_536_000_000, "4.5 GB"}, {-2_500_000, "-2.5 MB"}, {1.5e13, "15.0 TB"}}
	for _, tt := range tests {
		if got := HumanBytes(tt.in); got != tt.want {
			t.Errorf("HumanBytes(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSnapshot_SaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap.json")
	s := Snapshot{Events: 3, AuditRows: 2, Tables: []Table{{DB: "postgres", Name: "events.events", Rows: 3, Bytes: 9}}}
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Events != 3 || got.AuditRows != 2 || len(got.Tables) != 1 || got.Tables[0] != s.Tables[0] {
		t.Errorf("Load = %+v, want %+v", got, s)
	}
}

func TestProjection_Markdown(t *testing.T) {
	p := Project(Snapshot{}, Snapshot{Events: 10, AuditRows: 10, Tables: []Table{
		{DB: "postgres", Name: "events.events", Rows: 10, Bytes: 5000},
		{DB: "mariadb", Name: "audit.audit_events", Rows: 10, Bytes: 3000},
	}}, 105)
	var b strings.Builder
	p.WriteMarkdown(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2+2+2 { // header, rule, 2 tables, 2 totals
		t.Fatalf("storage table has %d lines:\n%s", len(lines), b.String())
	}
	if !strings.Contains(lines[2], "| events.events | 10 | 5.0 kB | 500 | 4.5 GB | 136.1 GB | 408.2 GB | ~8 GB |") {
		t.Errorf("events row = %s", lines[2])
	}
	if len(p.CSV()) != 5 {
		t.Errorf("CSV has %d records, want 5", len(p.CSV()))
	}
}
