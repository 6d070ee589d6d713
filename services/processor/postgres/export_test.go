package postgres

import "encoding/json"

// ThreatTypes exposes threatTypes to the external tests.
func ThreatTypes(raw json.RawMessage) []string { return threatTypes(raw) }

// BeforeCommit makes every write of s call f after its statements and
// before its commit (a test holds a write in flight with it).
func (s *Store) BeforeCommit(f func()) { s.beforeCommit = f }
