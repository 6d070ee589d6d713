package retention_test

import (
	"context"
	"testing"
	"time"

	"threatview/retention"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/mariadb"
	"threatview/retention/postgres"
	"threatview/retention/store"
)

// BenchmarkArchive measures one whole archive of a month (export in key
// order, gzip, store, manifest, re-read and verify, record): ns/op for
// rows/op rows.
func BenchmarkArchive(b *testing.B) {
	ctx := context.Background()
	b.Run("Postgres", func(b *testing.B) {
		url, db := retentiontest.Postgres(b)
		month := retentiontest.Month(-2)
		retentiontest.FillPostgres(b, db, month, 20000)
		src, err := postgres.Open(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer src.Close()
		bench(b, src, "events.events", month)
	})
	b.Run("MariaDB", func(b *testing.B) {
		dsn, db := retentiontest.MariaDB(b)
		month := retentiontest.Month(-2)
		retentiontest.FillMariaDB(b, db, month, 2000)
		src, err := mariadb.Open(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer src.Close()
		bench(b, src, mariadb.Table, month)
	})
}

func bench(b *testing.B, src retention.Source, table string, month time.Time) {
	ctx := context.Background()
	st, err := store.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	p := retentiontest.Find(b, src, table, month)
	a := &retention.Archiver{Src: src, Store: st, ChunkRows: 10000, Log: quiet}
	var rows, bytes, n int64
	for b.Loop() {
		n++
		m, err := a.Archive(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		rows += m.Rows
		bytes += m.Bytes
	}
	b.ReportMetric(float64(rows)/float64(n), "rows/op")
	b.ReportMetric(float64(bytes)/float64(rows), "gz-bytes/row")
}
