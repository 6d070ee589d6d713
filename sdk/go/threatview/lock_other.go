//go:build !unix

package threatview

import (
	"os"
	"path/filepath"
)

// lockDir opens dir/lock; without flock, keeping to one client per
// directory is the caller's duty.
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
}
