package postgres_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/processor"
	"threatview/processor/internal/pgtest"
)

// TestStore_WriteBatch_Investigation stores events with the investigation
// fields and checks the columns and every investigation rollup, including
// that a redelivered batch counts once and a non-threat event never counts
// as a threat.
func TestStore_WriteBatch_Investigation(t *testing.T) {
	s, pool := mustStore(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 9))
	now := time.Now().UTC().Truncate(time.Microsecond)
	mk := func(device, threats string) wire.Event {
		e := pgtest.Event(r, now, 0)
		e.App = wire.App{ID: "inv-app", Version: "2.1"}
		e.OccurredAt = now
		e.Country = "DE"
		e.Device = wire.Device{ID: device, Model: "Pixel 8", Manufacturer: "Google", OS: "android", OSVersion: "14.2.1", Language: "de-DE"}
		e.Session = &wire.Session{ID: "sess-" + device}
		e.User = &wire.User{Pseudonym: "k1:" + device}
		e.Location = &wire.Location{Lat: 48.1, Lon: 11.5}
		e.Threats = nil
		if threats != "" {
			e.Threats = json.RawMessage(threats)
		}
		return e
	}
	batch := []wire.Event{
		mk("d1", `["Hooks","root_detected"]`),
		mk("d1", `[{"type":"Hooks"}]`),
		mk("d2", ``), // network.info-like: no threats
	}
	batch[2].Type = "network.info"
	if res := write(t, s, batch...); res != (processor.WriteResult{Stored: 3}) {
		t.Fatalf("WriteBatch = %+v, want 3 stored", res)
	}
	// The same batch again (a redelivery): nothing stored, nothing counted.
	if res := write(t, s, batch...); res.Stored != 0 {
		t.Fatalf("redelivered WriteBatch = %+v, want 0 stored", res)
	}

	var sess, user, lang string
	var major, minor int
	var lat, lon float32
	var types []string
	if err := pool.QueryRow(ctx, `SELECT session_id, user_pseudonym, language, os_major, os_minor, lat, lon, threat_types
		FROM events.events WHERE id = $1`, batch[0].ID).Scan(&sess, &user, &lang, &major, &minor, &lat, &lon, &types); err != nil {
		t.Fatal(err)
	}
	if sess != "sess-d1" || user != "k1:d1" || lang != "de-DE" || major != 14 || minor != 2 || lat != 48.1 || lon != 11.5 ||
		len(types) != 2 || types[0] != "Hooks" || types[1] != "root_detected" {
		t.Errorf("stored %q %q %q %d.%d %v,%v %v, want the event's fields", sess, user, lang, major, minor, lat, lon, types)
	}

	for _, c := range []struct {
		query string
		want  int
	}{
		{`SELECT events FROM facts.inv_daily WHERE app_id = 'inv-app'`, 3},
		{`SELECT threat_events FROM facts.inv_daily WHERE app_id = 'inv-app'`, 2},
		{`SELECT count(*) FROM facts.inv_daily_users WHERE app_id = 'inv-app'`, 2},
		{`SELECT count(DISTINCT device_id) FROM facts.inv_device_days WHERE threat = ''`, 2},
		{`SELECT count(DISTINCT device_id) FROM facts.inv_device_days WHERE threat = 'Hooks'`, 1},
		{`SELECT count(*) FROM facts.inv_device_days WHERE threat = 'network.info' OR device_id = 'd2' AND threat <> ''`, 0},
		{`SELECT events FROM facts.inv_geo_daily WHERE threat = '' AND cell = '48.1,11.5' AND country = 'DE'`, 3},
		{`SELECT events FROM facts.inv_geo_daily WHERE threat = 'Hooks'`, 2},
		{`SELECT count FROM facts.inv_threat_daily WHERE threat = 'Hooks' AND dim = 'os_version' AND key = 'android 14.2'`, 2},
		{`SELECT count FROM facts.inv_threat_daily WHERE threat = 'root_detected' AND dim = 'device_model' AND key = 'Google Pixel 8'`, 1},
		{`SELECT sum(count) FROM facts.inv_threat_daily WHERE threat = 'Hooks' AND dim = 'hour'`, 2},
		{`SELECT count(*) FROM facts.inv_threat_daily WHERE threat = ''`, 0},
	} {
		if got := pgtest.Count(t, pool, c.query); got != c.want {
			t.Errorf("%s = %d, want %d", c.query, got, c.want)
		}
	}
}
