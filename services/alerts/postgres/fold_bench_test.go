package postgres_test

import (
	"context"
	"testing"
	"time"

	"threatview/alerts/internal/pgtest"
)

// BenchmarkFold folds b.N outbox rows, 5,000 a call as the evaluator does,
// spread over 50 apps, 20 countries, 7 OS spellings and 1 to 3 of 5 threat
// types within one minute (the width a busy minute has), into both minute
// count tables, and reports the wall time per folded row (the fold is one
// statement: the time is the database's; the alerts process only waits).
//
//	cd services/alerts && go test -run '^$' -bench Fold -benchtime 200000x ./postgres/
func BenchmarkFold(b *testing.B) {
	_, st, pool := pgtest.MustStore(b)
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Minute)
	_, err := pool.Exec(ctx, `INSERT INTO alerts.outbox (event_id, app_id, received_at, occurred_at, type, os, country, threats)
		SELECT gen_random_uuid(), 'app-' || (i % 50), $1, $1, 'app.startup',
			(ARRAY['Android','android','iOS','iPadOS','Windows','Symbian',''])[1 + i % 7],
			(ARRAY['DE','FR','US','GB','JP','IN','CN','NL','ZA','KR','BR','RU','IT','ES','AU','CA','MX','PL','SE',''])[1 + i % 20],
			(ARRAY[ARRAY['hooking','root','debugger'], ARRAY['root','emulator','jailbreak'], ARRAY['hooking','hooking','hooking']])[1 + i % 3][1:1 + i % 3]
		FROM generate_series(1, $2::int) i`, at, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	folded := 0
	for folded < b.N {
		n, err := st.Fold(ctx, 5000)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
		folded += n
	}
	b.StopTimer()
	if folded != b.N {
		b.Fatalf("folded %d of %d rows", folded, b.N)
	}
	var rows, scoped int64
	_ = pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM alerts.threat_minutes), (SELECT count(*) FROM alerts.threat_minutes_scoped)`).Scan(&rows, &scoped)
	b.ReportMetric(float64(rows), "minute-rows")
	b.ReportMetric(float64(scoped), "scoped-minute-rows")
}
