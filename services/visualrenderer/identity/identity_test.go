package identity_test

import (
	"testing"

	"threatview/platform/httpserver"
	"threatview/visualrenderer/identity"
)

// TestForwarderKey: without RENDERER_IDENTITY_FORWARDER_KEY the renderer
// derives the key from INTERNAL_KEY exactly as identity does when its
// IDENTITY_FORWARDER_KEY is blank; a set key wins; neither set forwards
// nothing.
func TestForwarderKey(t *testing.T) {
	const internal = "internal-key-of-the-deployment-0123456789"
	if got, want := identity.ForwarderKey("", internal), httpserver.ForwarderKey(internal); got == "" || got != want {
		t.Errorf("derived key differs from httpserver.ForwarderKey (empty: %t)", got == "")
	}
	if got := identity.ForwarderKey("explicit-forwarder-key-0123456789abcdef", internal); got != "explicit-forwarder-key-0123456789abcdef" {
		t.Errorf("a set RENDERER_IDENTITY_FORWARDER_KEY was not used")
	}
	if got := identity.ForwarderKey("", ""); got != "" {
		t.Errorf("no keys gave a non-empty forwarder key")
	}
}
