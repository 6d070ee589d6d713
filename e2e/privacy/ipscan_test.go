// Package privacy checks the privacy promises end to end on the running
// stack: the collector keeps only a truncated client address in every
// store, and an erasure removes a data subject everywhere.
package privacy

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// The test traffic's client addresses: documentation ranges no other test
// uses, so finding one anywhere means the collector let it out.
const (
	fullV4 = "198.51.100.177"
	fullV6 = "2001:db8:77:4242::77"
	// what truncation keeps of them (IPv4 /24, IPv6 /48)
	keptV4 = "198.51.100.0"
	keptV6 = "2001:db8:77::"
)

// needles are the forms a full address could take in a store or a log.
var needles = []string{fullV4, fullV6, "2001:db8:77:4242", "2001:0db8:0077:4242"}

func event(app, device string, extra string) string {
	return fmt.Sprintf(`{"type":"app.startup","app":{"id":%q,"version":"1.0"},"device":{"id":%q,"model":"Pixel 8","os":"android","os_version":"14"},"threats":["root"]%s}`, app, device, extra)
}

// TestIPScan_NoFullAddressAnywhere posts events through a trusted proxy
// (the stack trusts 127.0.0.1's X-Forwarded-For) from two distinctive
// addresses, then scans PostgreSQL, MariaDB, the broker's journal, every
// service log and the collector's metrics for the full addresses.
func TestIPScan_NoFullAddressAnywhere(t *testing.T) {
	env := e2etest.MustEnv(t)
	root := testenv.MustEnv(t, "THREATVIEW_ROOT")
	app := e2etest.NewApp(t, env, "ipscan")
	since := time.Now().Add(-time.Minute)

	for k, ip := range []string{fullV4, fullV6} {
		for i := 0; i < 3; i++ {
			body := []byte(`{"events":[` + event(app.ID, fmt.Sprintf("dev-%d", k), "") + `,` + event(app.ID, "dev2", "") + `]}`)
			r := e2etest.Do(t, http.MethodPost, env.CollectorURL+"/v1/events", app.Token, body, map[string]string{"X-Forwarded-For": ip})
			if r.Status != http.StatusAccepted {
				t.Fatalf("post from %s: %d %s", ip, r.Status, r.Body)
			}
		}
		// A refused request (403: not the token's app) is audited too.
		r := e2etest.Do(t, http.MethodPost, env.CollectorURL+"/v1/events", app.Token, []byte(event("someone-else", "d", "")), map[string]string{"X-Forwarded-For": ip})
		e2etest.CheckError(t, "other app", r, http.StatusForbidden)
	}

	// The broker's journal first, while it surely still holds the messages
	// (a data file is removed once all its messages are acked).
	t.Run("Broker", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(root, ".run", "activemq", "data", "kahadb", "*.log"))
		if len(files) == 0 {
			t.Fatalf("no broker journal under .run/activemq/data/kahadb")
		}
		seen := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// The app's messages must be in the journal, else the scan proves nothing.
			seen = seen || bytes.Contains(b, []byte(app.ID))
			checkClean(t, "broker journal "+filepath.Base(f), string(b))
		}
		if !seen {
			t.Errorf("the app's messages are not in the broker journal: the scan saw nothing")
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pool := e2etest.Events(t, env)
	if err := e2etest.WaitFor(60*time.Second, func() (bool, error) {
		n, err := e2etest.StoredCounts(ctx, pool, app.ID, since)
		return len(n) == 12, err
	}); err != nil {
		t.Fatalf("events not stored: %v", err)
	}

	t.Run("PostgreSQL", func(t *testing.T) {
		rows, err := pool.Query(ctx, `SELECT coalesce(host(client_ip), ''), e::text FROM events.events e WHERE app_id = $1`, app.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		kept := map[string]int{}
		for rows.Next() {
			var ip, text string
			if err := rows.Scan(&ip, &text); err != nil {
				t.Fatal(err)
			}
			kept[ip]++
			checkClean(t, "events.events row", text)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if kept[keptV4] != 6 || kept[keptV6] != 6 {
			t.Errorf("stored client_ip = %v, want 6 x %s and 6 x %s", kept, keptV4, keptV6)
		}
		var late int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM events.late_events e WHERE e::text LIKE '%' || $1 || '%' OR e::text LIKE '%2001:db8:77:4242%'`, fullV4).Scan(&late); err != nil {
			t.Fatal(err)
		}
		if late != 0 {
			t.Errorf("%d late_events rows hold a full test address", late)
		}
	})

	t.Run("MariaDB", func(t *testing.T) {
		db := e2etest.MariaDB(t, env.AuditDSN)
		var rows [][]byte
		if err := e2etest.WaitFor(60*time.Second, func() (bool, error) {
			rows = rows[:0]
			rs, err := db.QueryContext(ctx, `SELECT client_ip, CONCAT_WS('|', actor_app_id, action, resource, user_agent, request_id, COALESCE(body, '')) FROM audit_events WHERE actor_app_id = ? AND time >= ?`, app.ID, since.UTC())
			if err != nil {
				return false, err
			}
			defer rs.Close()
			for rs.Next() {
				var ip, text []byte
				if err := rs.Scan(&ip, &text); err != nil {
					return false, err
				}
				rows = append(rows, ip, text)
			}
			return len(rows) >= 2*8, rs.Err() // 6 accepted + 2 refused
		}); err != nil {
			t.Fatalf("audit rows: %d of 8: %v", len(rows)/2, err)
		}
		kept := map[string]int{}
		for i := 0; i < len(rows); i += 2 {
			a, ok := netip.AddrFromSlice(rows[i])
			if !ok {
				t.Errorf("audit client_ip %x is not an address", rows[i])
				continue
			}
			kept[a.Unmap().String()]++
			checkClean(t, "audit row", string(rows[i+1]))
		}
		if kept[keptV4] != 4 || kept[keptV6] != 4 {
			t.Errorf("audit client_ip = %v, want 4 x %s and 4 x %s", kept, keptV4, keptV6)
		}
	})

	t.Run("Logs", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(root, ".run", "log", "*.log"))
		if len(files) < 3 {
			t.Fatalf("only %d logs under .run/log", len(files))
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			checkClean(t, "log "+filepath.Base(f), string(b))
		}
	})

	t.Run("Metrics", func(t *testing.T) {
		for name, u := range env.ServiceURLs() {
			r := e2etest.Do(t, http.MethodGet, u+"/metrics", "", nil, nil)
			checkClean(t, name+" /metrics", string(r.Body))
		}
	})
}

// checkClean fails the test when text holds a full test address.
func checkClean(t *testing.T, where, text string) {
	t.Helper()
	for _, n := range needles {
		if i := strings.Index(text, n); i >= 0 {
			lo, hi := max(0, i-60), min(len(text), i+60)
			t.Errorf("%s holds the full address %s: …%q…", where, n, text[lo:hi])
			return
		}
	}
}
