package charts

import (
	"testing"
)

// TestChart_IdentityReachesTheOthers: with the identity service on, tokens
// and the audit logger verify people's access tokens against its JWK set, and
// tokens announce revocations on the chart's broker; with it off, no JWKS URL.
// (Both services' Config types live in their commands, which this module
// cannot import; TestChart_EnvIsRead checks that they read these variables.)
func TestChart_IdentityReachesTheOthers(t *testing.T) {
	envOf := func(r rendered, comp string) map[string]string {
		t.Helper()
		return resolveEnv(t, r, r.deployment(t, comp).Spec.Template.Spec.Containers[0]).values
	}
	const jwks = "http://tv-threatview-identity:8085/.well-known/jwks.json"
	r := render(t, nil)
	tok := envOf(r, "tokens")
	if tok["IDENTITY_JWKS_URL"] != jwks || tok["STOMP_ADDR"] != "activemq:61613" || tok["STOMP_PASSCODE"] == "" {
		t.Errorf("tokens: JWKS %q, broker %s (passcode set %v)", tok["IDENTITY_JWKS_URL"], tok["STOMP_ADDR"], tok["STOMP_PASSCODE"] != "")
	}
	al := envOf(r, "audit-logger")
	if al["IDENTITY_JWKS_URL"] != jwks {
		t.Errorf("audit-logger JWKS %q, want %s", al["IDENTITY_JWKS_URL"], jwks)
	}
	off := render(t, map[string]any{"identity": map[string]any{"enabled": false}, "visualRenderer": map[string]any{"adminKey": true}})
	if got := envOf(off, "tokens")["IDENTITY_JWKS_URL"]; got != "" {
		t.Errorf("identity off: tokens JWKS %q, want blank", got)
	}
}
