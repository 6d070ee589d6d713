package identity_test

import (
	"reflect"
	"testing"

	"threatview/identity"
)

func TestParseRoleMap(t *testing.T) {
	got, err := identity.ParseRoleMap(" ops=admin, sec=auditor,sec=analyst ,sec=auditor,,cn=ops=analyst")
	if err != nil {
		t.Fatal(err)
	}
	// A group may contain '=' (an LDAP name): the last one splits.
	want := map[string][]string{"ops": {"admin"}, "sec": {"auditor", "analyst"}, "cn=ops": {"analyst"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseRoleMap = %v, want %v", got, want)
	}
	for _, bad := range []string{"ops", "=admin", "ops=root"} {
		if _, err := identity.ParseRoleMap(bad); err == nil {
			t.Errorf("ParseRoleMap(%q) = nil error", bad)
		}
	}
}
