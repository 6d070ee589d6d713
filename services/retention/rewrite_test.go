package retention_test

import (
	"testing"

	"threatview/retention/internal/retentiontest"
	"threatview/retention/store"
)

// An erasure rewrites an archived month without the subject: the new
// version lacks the subject's rows and holds every other row unchanged, the
// old version is gone, the record names the new one, cleanup accepts it and
// a restore from it brings back exactly the remaining rows.
func TestArchiver_RewriteWithout(t *testing.T) {
	st, err := store.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	retentiontest.RewriteWithout(t, st)
}
