// Package retention keeps the time-partitioned tables of Threat View bounded
// without ever losing data that was not archived first.
//
// Two jobs run once each (Kubernetes CronJobs):
//
//   - the archiver streams every finished month (a partition whose whole range
//     lies before the current month) that has no archive yet to a Store as
//     gzip NDJSON files of ARCHIVE_CHUNK_ROWS rows, writes the manifest last,
//     re-reads and checks the archive against the database and only then
//     records it as archived; `archiver restore` loads an archived month back;
//   - cleanup drops whole monthly partitions older than the retention and,
//     when an archive is required, only those with a verified archive.
//
// Managed tables: events.events and facts.facts (events DB, partitioned by
// month of received_at) and audit_events (audit DB, partitioned by month of
// time). The rollups facts.events_by_* are small and kept forever.
//
// Retention of N months (N ≥ 1) in month M keeps the partitions of M and the
// N months before it and drops those of M-N-1 and older: a partition goes
// once every row it can hold is more than N months old. With N = 1 on any day
// of November, October and November stay and September and older go.
package retention

import (
	"context"
	"errors"
	"io"
	"time"
)

// Sentinel errors.
var (
	// ErrNotFound: the archive object, record or partition does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnarchived: cleanup refused to drop partitions without a verified archive.
	ErrUnarchived = errors.New("partitions without a verified archive were not dropped")
	// ErrVerify: an archive does not match the database it was taken from.
	ErrVerify = errors.New("archive verification failed")
	// ErrBusy: another cleanup or archiver run holds the database's lock.
	ErrBusy = errors.New("another retention job is running on this database")
	// ErrChanged: a partition's row count changed between its archive check
	// and its drop; it was not dropped.
	ErrChanged = errors.New("partition changed since it was checked")
)

// Partition is one monthly partition of a managed table.
type Partition struct {
	Table string    // parent table, for example events.events or audit_events
	Name  string    // partition name, for example events_y2026m08 or p202608
	Month time.Time // first instant of the month it holds (UTC)
	// From and To are the partition's bounds; From is zero when the partition
	// has no lower bound (the lowest MariaDB partition takes everything below To).
	From, To time.Time
	Bytes    int64 // size on disk with indexes, as the database estimates it
}

// MonthString formats a month as 2026-08.
func MonthString(m time.Time) string { return m.UTC().Format("2006-01") }

// ParseMonth parses 2026-08 into the first instant of that month (UTC).
func ParseMonth(s string) (time.Time, error) { return time.Parse("2006-01", s) }

// MonthStart returns the first instant of t's month in UTC.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// Column describes one column of an archived table, in table order.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Binary columns are base64 strings in the NDJSON rows.
	Binary bool `json:"binary,omitempty"`
}

// Record is the row an archive leaves in the database's archive table once
// it has been verified; cleanup drops a partition only if one exists.
type Record struct {
	Table          string
	Partition      string
	From, To       time.Time // the month archived: [From, To)
	Rows           int64
	Bytes          int64
	Files          []FileEntry
	ContentSHA256  string
	ManifestSHA256 string
	Location       string // where the archive lives, e.g. s3://bucket/prefix/events.events/2026-08/
	SchemaVersion  int64
	VerifiedAt     time.Time
}

// Source is one database holding managed partitioned tables. The postgres
// and mariadb packages implement it.
type Source interface {
	// Name is "events" or "audit".
	Name() string
	// Partitions lists the monthly partitions of every managed table, oldest first.
	Partitions(ctx context.Context) ([]Partition, error)
	// Columns describes table's columns as Export writes them.
	Columns(ctx context.Context, table string) ([]Column, error)
	// Export streams every row of p, ordered by primary key, as one JSON
	// object per call of emit. The line is only valid during the call.
	Export(ctx context.Context, p Partition, emit func(line []byte) error) error
	// Count returns the number of rows in p.
	Count(ctx context.Context, p Partition) (int64, error)
	// SchemaVersion is the database's migration version.
	SchemaVersion(ctx context.Context) (int64, error)
	// Record returns the archive record of p's table and month, or ErrNotFound.
	Record(ctx context.Context, table string, month time.Time) (Record, error)
	// SaveRecord inserts or replaces an archive record.
	SaveRecord(ctx context.Context, r Record) error
	// DeleteRecord removes the archive record of table and month, if any.
	DeleteRecord(ctx context.Context, table string, month time.Time) error
	// Drop removes partition p and its rows.
	Drop(ctx context.Context, p Partition) error
	// DropCounted removes partition p only if it holds exactly rows rows,
	// counted under the same lock that drops it, so that no row committed
	// after the count is dropped with it. It returns ErrChanged otherwise.
	DropCounted(ctx context.Context, p Partition, rows int64) error
	// EnsurePartition creates table's partition for month unless it exists.
	EnsurePartition(ctx context.Context, table string, month time.Time) (Partition, error)
	// Insert writes rows (lines as Export wrote them) into table, skipping
	// rows whose primary key exists; it returns how many it inserted.
	Insert(ctx context.Context, table string, cols []Column, lines [][]byte) (int64, error)
	// Lock takes the database's retention lock or returns ErrBusy.
	Lock(ctx context.Context) (unlock func(), err error)
	// Close releases the connections.
	Close()
}

// LateSource is a Source that holds late rows: events received for a month
// that was archived and dropped, kept aside (events.late_events) instead of
// re-creating the month. The postgres Source implements it.
type LateSource interface {
	// LateMonths lists the months with held rows, as partitions of the table
	// the rows belong to (Name "late_events").
	LateMonths(ctx context.Context) ([]Partition, error)
	// ExportLate streams p's month of held rows in primary-key order, each
	// as Export writes a row of p.Table, from one snapshot.
	ExportLate(ctx context.Context, p Partition, emit func(line []byte) error) error
	// SaveLate records a verified supplementary archive and removes the held
	// rows it holds (lines as ExportLate wrote them) in one transaction; it
	// returns how many rows it removed.
	SaveLate(ctx context.Context, r LateRecord, lines [][]byte) (int64, error)
	// ReplaceLate makes r the record of the supplementary archive that was
	// under oldPrefix (rewritten as r after an erasure); an old archive
	// without a record gets one.
	ReplaceLate(ctx context.Context, oldPrefix string, r LateRecord) error
}

// LateRecord is the database's row for one verified supplementary archive.
type LateRecord struct {
	Table          string
	Month          time.Time
	Prefix         string // key prefix in the store
	Rows           int64
	ContentSHA256  string
	ManifestSHA256 string
	Location       string
	VerifiedAt     time.Time
}

// Store keeps archive objects: a directory or an S3 bucket. Put makes an
// object appear whole or not at all.
type Store interface {
	// Put writes data under key, replacing any object there.
	Put(ctx context.Context, key string, data []byte) error
	// Get opens the object under key or returns ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// List returns the keys starting with prefix.
	List(ctx context.Context, prefix string) ([]string, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Location renders key as a URL for logs and records.
	Location(key string) string
}

// Summary is what a job reports at the end.
type Summary struct {
	Partitions int
	Rows       int64
	Bytes      int64
	Seconds    float64
}
