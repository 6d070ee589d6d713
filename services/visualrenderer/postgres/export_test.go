package postgres

import (
	"context"

	"threatview/visualrenderer"
)

// DistinctDevices is the threat report's unique devices, for tests.
func DistinctDevices(ctx context.Context, s *Store, q visualrenderer.RollupQuery, threats []string) (int64, error) {
	return s.distinct(ctx, q, recentDevices, threats)
}

// SetAmbiguousLimit sets how many subjects distinct looks up one by one.
func SetAmbiguousLimit(n int) { ambiguousLimit = n }
