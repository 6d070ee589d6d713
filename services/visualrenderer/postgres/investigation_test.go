package postgres_test

import (
	"context"
	"testing"
	"time"

	"threatview/visualrenderer"
)

// TestStore_Investigation reads events, a timeline, the overview, the map
// (with K-anonymous cells) and a threat report from a fresh DB holding
// events and the rollups the processor would have written for them.
func TestStore_Investigation(t *testing.T) {
	s, exec := mustStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	day := now.Truncate(24 * time.Hour)
	exec(`SELECT events.maintain_partitions(1)`)
	// Seven events: device d1 (session s1, user k1:…) with threats, five
	// other devices in one cell, one network.info event without threats.
	exec(`INSERT INTO events.events (id, received_at, occurred_at, type, app_id, app_version, device_id, device_model,
			manufacturer, os, os_version, country, session_id, user_pseudonym, language, os_major, os_minor, lat, lon, threat_types)
		SELECT ('00000000-0000-7000-8000-00000000000' || i)::uuid, $1::timestamptz + i * interval '1 second', $1, 
			CASE WHEN i = 7 THEN 'network.info' ELSE 'app.startup' END, 'app-a', '2.0', 'd' || least(i, 6), 'Pixel 8',
			'Google', 'android', '14.1', 'DE', CASE WHEN i <= 2 THEN 's1' ELSE '' END,
			CASE WHEN i <= 2 THEN 'k1:0123456789abcdef0123456789abcdef' ELSE '' END, 'de-DE', 14, 1, 48.1, 11.5,
			CASE WHEN i <= 2 THEN ARRAY['Hooks'] WHEN i = 3 THEN ARRAY['root_detected'] ELSE '{}' END
		FROM generate_series(1, 7) i`, now.Add(-time.Hour))
	exec(`INSERT INTO facts.inv_daily VALUES ($1, 'app-a', 7, 3)`, day)
	exec(`INSERT INTO facts.inv_daily_users VALUES ($1, 'app-a', 'k1:0123456789abcdef0123456789abcdef')`, day)
	exec(`INSERT INTO facts.inv_device_days SELECT $1, 'app-a', '', 'DE', '48.1,11.5', 'd' || i FROM generate_series(1, 6) i`, day)
	exec(`INSERT INTO facts.inv_device_days VALUES ($1, 'app-a', 'Hooks', 'DE', '48.1,11.5', 'd1'), ($1, 'app-a', 'root_detected', 'DE', '48.1,11.5', 'd3')`, day)
	exec(`INSERT INTO facts.inv_geo_daily VALUES ($1, 'app-a', '', 'DE', '48.1,11.5', 7), ($1, 'app-a', 'Hooks', 'DE', '48.1,11.5', 2)`, day)
	exec(`INSERT INTO facts.inv_threat_daily VALUES ($1, 'app-a', 'Hooks', 'os', 'android', 2), ($1, 'app-a', 'Hooks', 'os_version', 'android 14.1', 2),
		($1, 'app-a', 'Hooks', 'hour', '05', 2), ($1, 'app-a', 'root_detected', 'os', 'android', 1)`, day)
	tax, err := s.Taxonomy(ctx)
	if err != nil || tax.Class("Hooks").Category != "anti-dynamic-analysis" || tax.Class("nope").Category != "other" {
		t.Fatalf("Taxonomy = %v, %v; want Hooks anti-dynamic-analysis, unknown other", tax["Hooks"], err)
	}
	base := visualrenderer.EventFilter{From: now.Add(-2 * time.Hour), To: now, Limit: 3}

	t.Run("SearchPages", func(t *testing.T) {
		p1, err := s.SearchEvents(ctx, base, tax)
		if err != nil || len(p1.Events) != 3 || p1.NextCursor == "" || p1.Events[0].Type != "network.info" {
			t.Fatalf("page 1 = %+v, %v; want 3 events, newest (network.info) first, a cursor", p1, err)
		}
		f := base
		f.Limit = 10
		c := p1.Events[2].Cursor()
		f.After = &c
		p2, err := s.SearchEvents(ctx, f, tax)
		if err != nil || len(p2.Events) != 4 || p2.NextCursor != "" || p2.Events[3].EventID != "00000000-0000-7000-8000-000000000001" {
			t.Fatalf("page 2 = %+v, %v; want the 4 older events, no cursor", p2, err)
		}
		e := p2.Events[3]
		if e.Session.ID != "s1" || e.User.Pseudonym == "" || e.Location.Lat != 48.1 || e.Device.Language != "de-DE" ||
			len(e.Threats) != 1 || e.Threats[0].Category != "anti-dynamic-analysis" {
			t.Errorf("event = %+v, want session, user, location 48.1, language, Hooks classified", e)
		}
	})
	for _, tc := range []struct {
		name string
		f    func(*visualrenderer.EventFilter)
		want int
	}{
		{"Device", func(f *visualrenderer.EventFilter) { f.DeviceID = "d6" }, 2},
		{"Session", func(f *visualrenderer.EventFilter) { f.SessionID = "s1" }, 2},
		{"User", func(f *visualrenderer.EventFilter) { f.Users = []string{"k0:x", "k1:0123456789abcdef0123456789abcdef"} }, 2},
		{"Threat", func(f *visualrenderer.EventFilter) { f.Threat = "Hooks" }, 2},
		{"Category", func(f *visualrenderer.EventFilter) { f.Category = "platform-integrity" }, 1},
		{"CategoryOther", func(f *visualrenderer.EventFilter) { f.Category = "other" }, 0},
		{"TypeNotThreat", func(f *visualrenderer.EventFilter) { f.Type = "network.info"; f.Category = "network" }, 0},
		{"Country", func(f *visualrenderer.EventFilter) { f.Country = "FR" }, 0},
	} {
		t.Run("Search"+tc.name, func(t *testing.T) {
			f := base
			f.Limit = 50
			tc.f(&f)
			p, err := s.SearchEvents(ctx, f, tax)
			if err != nil || len(p.Events) != tc.want {
				t.Errorf("SearchEvents(%+v) = %d events, %v; want %d", f, len(p.Events), err, tc.want)
			}
		})
	}
	t.Run("Timeline", func(t *testing.T) {
		tl, err := s.Timeline(ctx, "session", []string{"s1"}, "", tax)
		if err != nil || tl.Events != 2 || tl.Threats["Hooks"] != 2 || len(tl.Apps) != 1 || tl.Apps[0].Versions[0] != "2.0" ||
			len(tl.Countries) != 1 || len(tl.Recent) != 2 {
			t.Errorf("Timeline = %+v, %v", tl, err)
		}
		if _, err := s.Timeline(ctx, "device", []string{"nobody"}, "", tax); err == nil {
			t.Error("Timeline(nobody) = nil error, want ErrNotFound")
		}
	})
	q := visualrenderer.RollupQuery{From: day, To: day.Add(24 * time.Hour), K: 5}
	t.Run("Overview", func(t *testing.T) {
		o, err := s.Overview(ctx, q)
		if err != nil || o.Events != 7 || o.ThreatEvents != 3 || o.Users != 1 || o.Devices != 6 || o.Apps != 1 {
			t.Errorf("Overview = %+v, %v; want 7 events, 3 threat events, 1 user, 6 devices, 1 app", o, err)
		}
	})
	t.Run("MapK", func(t *testing.T) {
		m, err := s.Map(ctx, q)
		if err != nil || len(m.Countries) != 1 || m.Countries[0].Devices != 6 || len(m.Cells) != 1 || m.Cells[0].Events != 7 {
			t.Fatalf("Map = %+v, %v; want DE with 6 devices and the cell", m, err)
		}
		q7 := q
		q7.K = 7
		if m, _ := s.Map(ctx, q7); len(m.Cells) != 0 {
			t.Errorf("Map with K=7 shows %v, want no cell (6 devices)", m.Cells)
		}
		qh := q
		qh.Threat = "Hooks"
		if m, _ := s.Map(ctx, qh); len(m.Cells) != 0 || len(m.Countries) != 1 || m.Countries[0].Events != 2 {
			t.Errorf("Map for Hooks = %+v, want DE with 2 events and no cell (1 device < K)", m)
		}
	})
	t.Run("ThreatReport", func(t *testing.T) {
		r, err := s.ThreatReport(ctx, q, visualrenderer.ThreatSelection{Types: []string{"Hooks"}})
		if err != nil || r.Events != 2 || r.Devices != 1 || len(r.ByOSVersion) != 1 || r.ByOSVersion[0].Key != "android 14.1" ||
			len(r.Series) != 1 || !r.Series[0].T.Equal(day.Add(5*time.Hour)) {
			t.Errorf("ThreatReport = %+v, %v", r, err)
		}
	})
	t.Run("SetThreatClass", func(t *testing.T) {
		audited := false
		err := s.SetThreatClass(ctx, visualrenderer.ThreatClass{Type: "CustomThing", Category: "malware", Severity: "high"}, "alice",
			func(context.Context) error { audited = true; return nil })
		tax, _ := s.Taxonomy(ctx)
		if err != nil || !audited || tax.Class("CustomThing").Category != "malware" {
			t.Errorf("SetThreatClass = %v, audited %v, class %v", err, audited, tax.Class("CustomThing"))
		}
	})
}
