package charts

import (
	"testing"

	"threatview/auditlogger"
	"threatview/platform/config"
	"threatview/tokens"
)

// TestChart_IdentityReachesTheOthers: with the identity service on, tokens
// and the audit logger verify people's access tokens against its JWK set, and
// tokens announce revocations on the chart's broker; with it off, no JWKS URL.
func TestChart_IdentityReachesTheOthers(t *testing.T) {
	parse := func(r rendered, comp string, cfg any) {
		t.Helper()
		env := resolveEnv(t, r, r.deployment(t, comp).Spec.Template.Spec.Containers[0])
		if err := config.Parse(func(k string) string { return env.values[k] }, cfg); err != nil {
			t.Fatalf("%s: %v", comp, err)
		}
	}
	const jwks = "http://tv-threatview-identity:8085/.well-known/jwks.json"
	r := render(t, nil)
	var tok tokens.Config
	parse(r, "tokens", &tok)
	if tok.IdentityJWKSURL != jwks || tok.Broker.Addr != "activemq:61613" || tok.Broker.Passcode == "" {
		t.Errorf("tokens: JWKS %q, broker %s (passcode set %v)", tok.IdentityJWKSURL, tok.Broker.Addr, tok.Broker.Passcode != "")
	}
	var al auditlogger.LoggerConfig
	parse(r, "audit-logger", &al)
	if al.IdentityJWKSURL != jwks {
		t.Errorf("audit-logger JWKS %q, want %s", al.IdentityJWKSURL, jwks)
	}
	off := render(t, map[string]any{"identity": map[string]any{"enabled": false}})
	tok = tokens.Config{}
	parse(off, "tokens", &tok)
	if tok.IdentityJWKSURL != "" {
		t.Errorf("identity off: tokens JWKS %q, want blank", tok.IdentityJWKSURL)
	}
}
