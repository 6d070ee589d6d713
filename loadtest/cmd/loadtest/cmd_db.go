package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"threatview/loadtest/storage"
	"threatview/loadtest/verify"
)

var errVerifyFailed = errors.New("verification failed")

// VerifyResult is what `verify` writes to verify.json.
type VerifyResult struct {
	Manifest         verify.Manifest `json:"manifest"`
	Events           verify.Events   `json:"events"`
	Rollups          []verify.Rollup `json:"rollups"`
	EventsMinusFacts int64           `json:"events_minus_facts"`
	Audit            *verify.Audit   `json:"audit,omitempty"`
	// RollupsSkipped: run with -rollups=false, so Rollups and
	// EventsMinusFacts were not compared.
	RollupsSkipped bool     `json:"rollups_skipped,omitempty"`
	Problems       []string `json:"problems"`
	OK             bool     `json:"ok"`
}

func connectPG(ctx context.Context, getenv func(string) string) (*pgx.Conn, error) {
	url := getenv("EVENTS_DATABASE_URL")
	if url == "" {
		return nil, errors.New("EVENTS_DATABASE_URL is not set (source .run/env)")
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect events DB: %w", err)
	}
	return conn, nil
}

func connectAudit(ctx context.Context, getenv func(string) string) (*sql.DB, error) {
	dsn := getenv("AUDIT_DATABASE_DSN")
	if dsn == "" {
		return nil, errors.New("AUDIT_DATABASE_DSN is not set (source .run/env)")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("open audit DB: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect audit DB: %w", err)
	}
	return db, nil
}

func cmdVerify(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", defaultOut(getenv), "directory holding run.json and ids.txt (written by run), or sweep.json and sweep-ids.txt (written by sweep)")
	of := fs.String("of", "run", "what to verify: run (run.json; writes verify.json, verify.md) or sweep (sweep.json; writes sweep-verify.json, sweep-verify.md)")
	out := fs.String("out", "", "directory for the results (default: -in)")
	wait := fs.Duration("wait", 2*time.Minute, "how long to wait for the processor and the audit worker")
	noAudit := fs.Bool("no-audit", false, "skip the audit check")
	rollups := fs.Bool("rollups", true, "compare every rollup with count(*) over all stored events, and events.events with facts.facts (minutes on a database of millions of events)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		*out = *in
	}
	m, prefix, err := readManifest(*in, *of)
	if err != nil {
		return err
	}
	ids, err := verify.ReadIDsFile(m.IDsFile)
	if err != nil {
		return fmt.Errorf("read accepted ids: %w", err)
	}
	logf := logTo(stderr)
	conn, err := connectPG(ctx, getenv)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())

	res := VerifyResult{Manifest: m}
	if res.Events, err = verify.CheckEvents(ctx, conn, ids, *wait, logf); err != nil {
		return err
	}
	if *rollups {
		if res.Rollups, res.EventsMinusFacts, err = verify.CheckRollups(ctx, conn); err != nil {
			return err
		}
	} else {
		res.RollupsSkipped = true
	}
	if m.Audited && !*noAudit {
		db, err := connectAudit(ctx, getenv)
		if err != nil {
			return err
		}
		defer db.Close()
		a, err := verify.CheckAudit(ctx, db, m, *wait, logf)
		if err != nil {
			return err
		}
		res.Audit = &a
	}
	res.Problems = verifyProblems(res, len(ids), m.Events)
	res.OK = len(res.Problems) == 0
	md := verifyMD(res)
	fmt.Fprint(stdout, md)
	if err := writeJSON(*out, prefix+"verify.json", res); err != nil {
		return err
	}
	if err := writeFile(*out, prefix+"verify.md", md); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("%w: %s", errVerifyFailed, strings.Join(res.Problems, "; "))
	}
	return nil
}

// readManifest reads what `verify -of kind` checks from dir, and the prefix
// of the files its results go to.
func readManifest(dir, kind string) (verify.Manifest, string, error) {
	switch kind {
	case "run":
		var run RunResult
		if err := readJSON(dir, "run.json", &run); err != nil {
			return verify.Manifest{}, "", fmt.Errorf("read run results: %w", err)
		}
		return run.Manifest, "", nil
	case "sweep":
		var sw SweepResult
		if err := readJSON(dir, "sweep.json", &sw); err != nil {
			return verify.Manifest{}, "", fmt.Errorf("read sweep results: %w", err)
		}
		if sw.Manifest == nil {
			return verify.Manifest{}, "", fmt.Errorf("%s: sweep.json has no manifest (written by a loadtest that kept no sweep ids)", dir)
		}
		return *sw.Manifest, "sweep-", nil
	default:
		return verify.Manifest{}, "", fmt.Errorf("-of %q: want run or sweep", kind)
	}
}

func verifyProblems(r VerifyResult, idsInFile, acceptedEvents int) []string {
	var p []string
	e := r.Events
	if idsInFile != acceptedEvents {
		p = append(p, fmt.Sprintf("ids file holds %d ids but %d events were accepted", idsInFile, acceptedEvents))
	}
	if e.Distinct != e.Accepted {
		p = append(p, fmt.Sprintf("the collector returned %d ids more than once", e.Accepted-e.Distinct))
	}
	if e.Missing > 0 {
		p = append(p, fmt.Sprintf("%d accepted events lost", e.Missing))
	}
	if e.Duplicated > 0 {
		p = append(p, fmt.Sprintf("%d events stored more than once", e.Duplicated))
	}
	if e.FactsOff > 0 {
		p = append(p, fmt.Sprintf("%d stored events without exactly one fact", e.FactsOff))
	}
	for _, x := range r.Rollups {
		if x.Mismatched > 0 {
			p = append(p, fmt.Sprintf("%s: %d buckets differ from count(*)", x.Table, x.Mismatched))
		}
	}
	if r.EventsMinusFacts != 0 {
		p = append(p, fmt.Sprintf("events.events and facts.facts differ by %d rows", r.EventsMinusFacts))
	}
	if r.Audit != nil && r.Audit.Rows != r.Audit.Expected {
		p = append(p, fmt.Sprintf("audit rows %d, accepted requests %d", r.Audit.Rows, r.Audit.Expected))
	}
	return p
}

func verifyMD(r VerifyResult) string {
	var b strings.Builder
	e := r.Events
	fmt.Fprintf(&b, "| check | expected | found | result |\n|---|---:|---:|---|\n")
	row := func(name string, want, got int64, ok bool) {
		fmt.Fprintf(&b, "| %s | %d | %d | %s |\n", name, want, got, map[bool]string{true: "ok", false: "**FAILED**"}[ok])
	}
	row("accepted events stored (exactly once)", int64(e.Distinct), int64(e.Stored-e.Duplicated), e.Missing == 0 && e.Duplicated == 0)
	row("lost events", 0, int64(e.Missing), e.Missing == 0)
	row("duplicated events", 0, int64(e.Duplicated), e.Duplicated == 0)
	row("stored events without exactly one fact", 0, int64(e.FactsOff), e.FactsOff == 0)
	mism, buckets := 0, 0
	for _, x := range r.Rollups {
		mism += x.Mismatched
		buckets += x.Truth
	}
	if r.RollupsSkipped {
		b.WriteString("| rollup buckets differing from count(*) | — | — | not compared (`-rollups=false`) |\n")
		b.WriteString("| events.events rows − facts.facts rows | — | — | not compared (`-rollups=false`) |\n")
	} else {
		row(fmt.Sprintf("rollup buckets differing from count(*) (%d tables, %d buckets)", len(r.Rollups), buckets), 0, int64(mism), mism == 0)
		row("events.events rows − facts.facts rows", 0, r.EventsMinusFacts, r.EventsMinusFacts == 0)
	}
	fmt.Fprintf(&b, "| countries of the stored events (from client addresses) | — | %d | %s |\n", e.Countries,
		map[bool]string{true: "ok", false: "all one country: X-Forwarded-For not trusted?"}[e.Countries > 1])
	if r.Audit != nil {
		row("audit rows (outcome 202) for accepted requests", int64(r.Audit.Expected), int64(r.Audit.Rows), r.Audit.Rows == r.Audit.Expected)
	}
	if r.OK {
		b.WriteString("\nAll checks passed.\n")
	} else {
		b.WriteString("\nProblems: " + strings.Join(r.Problems, "; ") + "\n")
	}
	return b.String()
}

// StorageResult is what `storage` writes to storage.json.
type StorageResult struct {
	Rate       float64            `json:"rate"`
	Base       storage.Snapshot   `json:"base"`
	Current    storage.Snapshot   `json:"current"`
	Projection storage.Projection `json:"projection"`
}

func cmdStorage(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("storage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", defaultOut(getenv), "directory for storage.md, storage.csv, storage.json")
	rate := fs.Float64("rate", 105, "events per second to project at")
	save := fs.String("save", "", "only write a snapshot to this file (use it later as -baseline)")
	baseline := fs.String("baseline", "", "snapshot taken before the load: sizes are then what the load added")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := connectPG(ctx, getenv)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var cur storage.Snapshot
	if cur.Tables, cur.Events, err = storage.MeasurePostgres(ctx, conn); err != nil {
		return err
	}
	if db, err := connectAudit(ctx, getenv); err != nil {
		cur.AuditFailed = err.Error()
		fmt.Fprintln(stderr, "storage: audit DB skipped:", err)
	} else {
		tables, rows, err := storage.MeasureMariaDB(ctx, db)
		db.Close()
		if err != nil {
			return err
		}
		cur.Tables = append(cur.Tables, tables...)
		cur.AuditRows = rows
	}
	if *save != "" {
		return cur.Save(*save)
	}
	var base storage.Snapshot
	if *baseline != "" {
		if base, err = storage.Load(*baseline); err != nil {
			return err
		}
	}
	p := storage.Project(base, cur, *rate)
	var b strings.Builder
	p.WriteMarkdown(&b)
	fmt.Fprint(stdout, b.String())
	if err := writeJSON(*out, "storage.json", StorageResult{Rate: *rate, Base: base, Current: cur, Projection: p}); err != nil {
		return err
	}
	if err := writeCSV(*out, "storage.csv", p.CSV()); err != nil {
		return err
	}
	return writeFile(*out, "storage.md", b.String())
}
