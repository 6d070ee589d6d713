package httpserver_test

import (
	"context"
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"threatview/platform/cli"
	"threatview/platform/httpserver"
)

// TestNewRegistry_BuildInfo checks that a command started through cli exposes
// NAME_build_info{version, goversion} 1 on /metrics without code of its own,
// and that a registry made outside cli.Main has none.
func TestNewRegistry_BuildInfo(t *testing.T) {
	scrape := func() string {
		r := chi.NewRouter()
		httpserver.MountOps(r, httpserver.NewRegistry(), nil)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	if body := scrape(); cli.Name() == "" && strings.Contains(body, "_build_info") {
		t.Fatalf("build_info exposed before cli.Main ran:\n%s", grepLines(body, "_build_info"))
	}

	var body string
	cli.MainArgs("audit-worker", func(context.Context, []string, func(string) string, io.Writer) error {
		body = scrape()
		return nil
	})
	want := `audit_worker_build_info{goversion="` + runtime.Version() + `",version="` + cli.Version + `"} 1`
	if !strings.Contains(body, want+"\n") {
		t.Fatalf("/metrics lacks %s; build_info lines:\n%s", want, grepLines(body, "_build_info"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
