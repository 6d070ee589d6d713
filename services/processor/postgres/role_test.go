package postgres_test

import (
	"context"
	"math/rand/v2"
	"net/url"
	"testing"
	"time"

	"threatview/platform/testenv"
	"threatview/platform/wire"
	"threatview/processor/internal/pgtest"
	"threatview/processor/postgres"
)

// TestStore_AsProcessorRole: the processor's grants (role
// threatview_processor, migration events 000091) are enough to write
// batches, with threats, over several days and again for the same keys,
// although the investigation tables' triggers (migration 000015) insert,
// update and delete rows of the recency tables and the summaries over
// apps. Before migration 000017 the triggers ran as the processor, whose
// role may not delete there: every write failed with "permission denied for
// table inv_threat_daily_all" (seen in a clean stack's first run).
func TestStore_AsProcessorRole(t *testing.T) {
	dbURL, pool := pgtest.MustEventsDB(t)
	ctx := context.Background()
	var ok bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'threatview_processor' AND rolcanlogin)`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	if !ok {
		if testenv.Required() {
			t.Fatal("role threatview_processor does not exist (scripts/stack.sh pg_service_roles makes it)")
		}
		t.Skip("role threatview_processor does not exist")
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("threatview_processor", "threatview_processor")
	s, err := postgres.Open(ctx, u.String(), 2)
	if err != nil {
		t.Fatalf("Open as threatview_processor: %v", err)
	}
	t.Cleanup(s.Close)
	r := rand.New(rand.NewPCG(3, 4))
	now := time.Now().UTC()
	stored := 0
	for b := 0; b < 3; b++ {
		batch := make([]wire.Event, 300)
		for i := range batch {
			batch[i] = pgtest.Event(r, now.Add(time.Duration(b*300+i)*time.Millisecond), 72*time.Hour)
		}
		res, err := s.WriteBatch(ctx, batch)
		if err != nil {
			t.Fatalf("batch %d as threatview_processor: %v", b, err)
		}
		stored += res.Stored
	}
	var diff, summaries int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM (SELECT day, threat, dim, key, sum(count) AS n FROM facts.inv_threat_daily GROUP BY 1, 2, 3, 4) a
		 FULL JOIN facts.inv_threat_daily_all b USING (day, threat, dim, key) WHERE a.n IS DISTINCT FROM b.count),
		(SELECT count(*) FROM facts.inv_threat_daily_all)`).Scan(&diff, &summaries); err != nil {
		t.Fatal(err)
	}
	if stored != 900 || diff != 0 || summaries == 0 {
		t.Fatalf("stored %d of 900; %d summary keys off the sum over apps (of %d)", stored, diff, summaries)
	}
}
