package contract

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	alertsapi "threatview/alerts/httpapi"
	"threatview/api"
	auditapi "threatview/auditlogger/httpapi"
	collectorapi "threatview/collector/httpapi"
	"threatview/identity"
	identityapi "threatview/identity/httpapi"
	"threatview/platform/authz"
	"threatview/platform/httpserver"
	tokensapi "threatview/tokens/httpapi"
	rendererapi "threatview/visualrenderer/httpapi"
)

// TestRoutes_Documented walks each service's real router: a route the
// document lacks fails (so is a documented operation the router lacks).
// A file server mounted at /static/* (every method) is the operation
// GET /static/{path}.
func TestRoutes_Documented(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	routers := map[string]http.Handler{
		"collector": collectorapi.New(collectorapi.Deps{Log: log}),
		"tokens":    tokensapi.New(nil, tokensapi.Keys{Admin: "a", Internal: "i"}, httpserver.NewRegistry(), nil, log),
		// With a trail configured (AUDIT_PUBLIC_KEYS), as the stack and the
		// chart run it: the tamper-evidence routes are served.
		"auditlogger": auditapi.New(nil, nil, auditapi.Options{InternalKey: "i", AdminKey: "a", Trail: &auditapi.Trail{}}, log).
			Handler(httpserver.NewRegistry(), nil),
		"identity": identityapi.New(identity.NewService(nil, nil, nil, nil, identity.Options{}, log), identityapi.Options{AdminKey: "a"},
			httpserver.NewRegistry(), nil, log),
		"visualrenderer": rendererapi.New(nil, nil, httpserver.NewRegistry(), nil, log, rendererapi.Investigation{}),
		"alerts":         alertsapi.New(nil, authz.New(nil, "a", log), nil, alertsapi.Destinations{}, httpserver.NewRegistry(), nil, log),
	}
	for name, h := range routers {
		t.Run(name, func(t *testing.T) {
			for _, problem := range compareRoutes(t, h, name, api.Documents()[name]) {
				t.Error(problem)
			}
		})
	}
}

// compareRoutes lists the differences between the routes h serves and the
// operations doc declares.
func compareRoutes(t *testing.T, h http.Handler, name string, doc []byte) []string {
	t.Helper()
	routes, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("%s's handler is a %T, not a chi router", name, h)
	}
	var served []string
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.HasSuffix(route, "/*") && !strings.Contains(route, "{") {
			if method != http.MethodGet {
				return nil // a file server: GET (and HEAD) only
			}
			route = strings.TrimSuffix(route, "*") + "{path}"
		}
		if !slices.Contains(served, method+" "+route) {
			served = append(served, method+" "+route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	documented, err := api.Operations(doc)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, r := range served {
		if !slices.Contains(documented, r) {
			problems = append(problems, fmt.Sprintf("%s serves %s, which its OpenAPI document (api/%s.openapi.json) lacks", name, r, name))
		}
	}
	for _, d := range documented {
		if !slices.Contains(served, d) {
			problems = append(problems, fmt.Sprintf("api/%s.openapi.json documents %s, which the router does not serve", name, d))
		}
	}
	return problems
}

// TestCompareRoutes checks that the check sees an undocumented route.
func TestCompareRoutes(t *testing.T) {
	r := chi.NewRouter()
	httpserver.MountOps(r, httpserver.NewRegistry(), nil)
	httpserver.MountSpec(r, api.Collector)
	r.Post("/v1/events", http.NotFound)
	if p := compareRoutes(t, r, "collector", api.Collector); len(p) != 0 {
		t.Errorf("compareRoutes(the collector's routes) = %v, want none", p)
	}
	r.Get("/v1/secret", http.NotFound)
	r.Delete("/v1/events", http.NotFound)
	p := compareRoutes(t, r, "collector", api.Collector)
	if len(p) != 2 || !strings.Contains(p[0]+p[1], "GET /v1/secret") || !strings.Contains(p[0]+p[1], "DELETE /v1/events") {
		t.Errorf("compareRoutes(two extra routes) = %v, want both named", p)
	}
}
