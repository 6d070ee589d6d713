package identity

import (
	"fmt"
	"slices"
	"strings"

	"threatview/platform/authz"
)

// ParseRoleMap reads "group=role,group=role" (a group may appear more than
// once; a group may contain '=', the last one splits). The error names the
// bad entry.
func ParseRoleMap(s string) (map[string][]string, error) {
	m := map[string][]string{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		i := strings.LastIndex(e, "=")
		if i <= 0 {
			return nil, fmt.Errorf("entry %q is not group=role", e)
		}
		group, role := strings.TrimSpace(e[:i]), strings.TrimSpace(e[i+1:])
		if !authz.ValidRole(role) {
			return nil, fmt.Errorf("entry %q: unknown role %q (want %s)", e, role, strings.Join(authz.Roles, ", "))
		}
		if !slices.Contains(m[group], role) {
			m[group] = append(m[group], role)
		}
	}
	return m, nil
}
