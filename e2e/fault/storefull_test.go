//go:build fault

package fault

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// TestFaultBrokerStoreFull fills a broker's store to its limit (issue 28):
// a throw-away ActiveMQ with the stack's configuration but a 200 MB
// storeUsage, and a collector of its own in front of it, flooded with gzip
// batches. Before the first refusal the collector's broker_store_percent_usage
// must have crossed the alert's 70%; then every request is 503 unavailable
// with Retry-After and a JSON error, answered by the broker's refusal
// (sendFailIfNoSpaceAfterTimeout, 3 s) within 4.5 s, not outcome_unknown
// after the collector's 5 s receipt timeout (never a hang or a connection
// timeout); and the broker's queue holds every event answered 202 exactly
// once, and none answered 503 with a definite outcome. Its collector audits,
// so each message goes with its audit records in one broker transaction, as
// deployed.
func TestFaultBrokerStoreFull(t *testing.T) {
	env := e2etest.MustEnv(t)
	b := startOwnBroker(t, "200 mb", "-Xms64m", "-Xmx256m")
	base, collectorLog := startOwnCollector(t, env, b.stompPort, true)

	// Flood it, watching the store gauge, until the store refuses.
	app := e2etest.NewApp(t, env, "e2e-storefull")
	fenv := env
	fenv.CollectorURL = base
	f := newFlood(fenv, app, 250)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stopWatch := watchBroker(ctx, base, b.pid, 200*time.Millisecond)
	took := f.run(ctx, 2, 0, true)
	storeMax, _ := stopWatch()
	ids, statuses, samples := f.summary()
	t.Logf("%d events accepted in %.1fs before the first refusal; answers %v; broker_store_percent_usage reached %.0f%%",
		len(ids), took.Seconds(), statuses, storeMax)
	if len(ids) == 0 {
		t.Fatalf("nothing accepted: %v %s\n%s", statuses, strings.Join(samples, " | "), tail(collectorLog))
	}
	if storeMax < 70 {
		t.Errorf("broker_store_percent_usage reached only %.0f%% before the first refusal: the store alert (70%%) would not have fired first", storeMax)
	}

	// Full: every request 503 with Retry-After and a JSON error, quickly.
	for i := 0; i < 5; i++ {
		body, _, _, err := f.body(int64(1000 + i))
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		r, err := e2etest.TryDo(http.MethodPost, base+"/v1/events", app.Token, body, map[string]string{"Content-Encoding": "gzip"})
		if err != nil {
			t.Fatalf("request %d to a collector whose broker store is full: %v (a hang or a cut connection)", i, err)
		}
		// The broker refuses a send to a full store after
		// sendFailIfNoSpaceAfterTimeout (3 s); the collector's receipt
		// timeout is 5 s. The refusal must be what answers: at once and
		// definite (nothing kept), not outcome_unknown after the timeout.
		took := time.Since(began)
		if took > 4500*time.Millisecond {
			t.Errorf("request %d answered after %s: not the broker's 3 s refusal", i, took)
		}
		eb := e2etest.CheckError(t, "store full", r, http.StatusServiceUnavailable)
		if eb.Error.Code != "unavailable" {
			t.Errorf("request %d: 503 %s, want unavailable (the broker refused it: a definite outcome)", i, eb.Error.Code)
		}
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("503 %s without Retry-After", eb.Error.Code)
		}
		if i == 0 {
			t.Logf("store full: 503 %s %q in %s, Retry-After %s", eb.Error.Code, eb.Error.Message, time.Since(began).Round(time.Millisecond), r.Header.Get("Retry-After"))
		}
	}

	// Nothing lost: the queue holds every event answered 202, once.
	cfg := mq.Config{Addr: "127.0.0.1:" + fmt.Sprint(b.stompPort)}
	onQueue := drainQueue(t, ctx, cfg, "/queue/threatview.events")
	t.Logf("the small broker's queue held %d events; %d accepted", len(onQueue), len(ids))
	checkQueueOnce(t, ids, onQueue, samples)
}

// checkQueueOnce checks that every id answered 202 is on the queue once
// (onQueue, from drainQueue) and that nothing else is, unless a refusal was
// outcome_unknown (samples: the refusals' answers), whose events may have
// been kept.
func checkQueueOnce(t *testing.T, ids []string, onQueue map[string]int, samples []string) {
	t.Helper()
	missing, dup := 0, 0
	for _, id := range ids {
		switch onQueue[id] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	if missing != 0 || dup != 0 {
		t.Errorf("of %d events answered 202, %d are not on the broker's queue and %d are there twice", len(ids), missing, dup)
	}
	if extra := len(onQueue) - (len(ids) - missing); extra > 0 && !strings.Contains(strings.Join(samples, " "), "outcome_unknown") {
		t.Errorf("%d events are on the queue that were answered 503 with a definite outcome", extra)
	}
}

// watchBroker samples the collector's broker_store_percent_usage at base
// and the RSS of the broker process pid every interval until the function
// it returns is called; that returns the highest of each.
func watchBroker(ctx context.Context, base string, pid int, every time.Duration) func() (storeMax float64, rssMax int64) {
	var storeMax float64
	var rssMax int64
	done := make(chan struct{})
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(done)
		for wctx.Err() == nil {
			if v, err := metricValue(base, "broker_store_percent_usage"); err == nil && v > storeMax {
				storeMax = v
			}
			if r := pidRSS(pid); r > rssMax {
				rssMax = r
			}
			time.Sleep(every)
		}
	}()
	return func() (float64, int64) {
		cancel()
		<-done
		return storeMax, rssMax
	}
}

// drainQueue consumes dest until it stays empty for 10 s and counts every
// event id the messages carry.
func drainQueue(t *testing.T, ctx context.Context, cfg mq.Config, dest string) map[string]int {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := mq.Subscribe(sctx, cfg, dest, 50, log)
	out := map[string]int{}
	for {
		select {
		case d := <-sub.C():
			reqs, err := wire.DecodeEvents(d.Body)
			if err != nil {
				t.Fatalf("a message on the queue does not decode: %v", err)
			}
			for _, r := range reqs {
				for _, e := range r.Events {
					out[e.ID]++
				}
			}
			if err := d.Ack(); err != nil {
				t.Fatalf("ack: %v", err)
			}
		case <-time.After(10 * time.Second):
			return out
		case <-ctx.Done():
			t.Fatalf("draining the queue: %v", ctx.Err())
		}
	}
}

// start runs a process of the test's own in its own process group, its
// output in logPath, killed (the group) when the test ends; it returns the
// process id.
func start(t *testing.T, name, logPath, dir string, extraEnv []string, argv ...string) int {
	t.Helper()
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_, _ = cmd.Process.Wait()
		lf.Close()
	})
	return cmd.Process.Pid
}

// ownBroker is an ActiveMQ of a test's own: the stack's configuration with
// another storeUsage limit.
type ownBroker struct {
	stompPort int
	dir, log  string
	pid       int
}

// startOwnBroker starts a broker with the stack's activemq.xml, its store
// limited to storeLimit ("200 mb", "10 gb"), with the given JVM options;
// it is killed when the test ends.
func startOwnBroker(t *testing.T, storeLimit string, jvm ...string) ownBroker {
	t.Helper()
	root := testenv.Root(t)
	dir := t.TempDir()
	stompPort, openwirePort := freePort(t), freePort(t)
	tmpl, err := os.ReadFile(filepath.Join(root, "deploy", "activemq", "activemq.xml"))
	if err != nil {
		t.Fatal(err)
	}
	limit := `<storeUsage limit="` + storeLimit + `"/>`
	conf := strings.NewReplacer("@STOMP_PORT@", fmt.Sprint(stompPort), "@OPENWIRE_PORT@", fmt.Sprint(openwirePort),
		`<storeUsage limit="10 gb"/>`, limit).Replace(string(tmpl))
	if !strings.Contains(conf, limit) {
		t.Fatal("the broker configuration has no storeUsage of 10 gb to replace")
	}
	for _, d := range []string{"conf", "data", "tmp", "lib"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(dir, "conf", "activemq.xml"), []byte(conf), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "conf", "log4j.properties"), []byte("log4j.rootLogger=WARN, console\n"+
		"log4j.appender.console=org.apache.log4j.ConsoleAppender\nlog4j.appender.console.layout=org.apache.log4j.PatternLayout\n"+
		"log4j.appender.console.layout.ConversionPattern=%d{ISO8601} | %-5p | %m%n\n"), 0o644))
	must(t, os.Symlink("/usr/share/java/xstream.jar", filepath.Join(dir, "lib", "xstream.jar")))
	brokerLog := filepath.Join(dir, "activemq.log")
	argv := append([]string{"java"}, jvm...)
	argv = append(argv,
		"-Djava.io.tmpdir="+filepath.Join(dir, "tmp"),
		"-Dlog4j.configuration=file:"+filepath.Join(dir, "conf", "log4j.properties"),
		"-Dactivemq.home=/usr/share/activemq", "-Dactivemq.base="+dir,
		"-Dactivemq.conf="+filepath.Join(dir, "conf"), "-Dactivemq.data="+filepath.Join(dir, "data"),
		"-jar", "/usr/share/activemq/bin/activemq.jar", "start", "xbean:file:"+filepath.Join(dir, "conf", "activemq.xml"))
	pid := start(t, "broker", brokerLog, dir, nil, argv...)
	waitPort(t, stompPort, 90*time.Second, brokerLog)
	return ownBroker{stompPort: stompPort, dir: dir, log: brokerLog, pid: pid}
}

// startOwnCollector starts the stack's collector binary and settings in
// front of the broker on stompPort; it returns its base URL and log file.
// With audit, each message goes with its audit records in one broker
// transaction, as deployed (the audit logger's address is the stack's);
// without, auditing is off and each message is one SEND.
func startOwnCollector(t *testing.T, env e2etest.Env, stompPort int, audit bool) (string, string) {
	t.Helper()
	root := testenv.Root(t)
	httpPort := freePort(t)
	collectorLog := filepath.Join(t.TempDir(), "collector.log")
	auditURL := ""
	if audit {
		auditURL = env.AuditURL
	}
	start(t, "collector", collectorLog, root, []string{
		"HTTP_ADDR=127.0.0.1:" + fmt.Sprint(httpPort),
		"STOMP_ADDR=127.0.0.1:" + fmt.Sprint(stompPort),
		"TOKENS_SERVICE_URL=" + env.TokensURL,
		"AUDITLOGGER_SERVICE_URL=" + auditURL,
		"GEOIP_DB_PATH=" + filepath.Join(root, ".run", "geoip", "test.mmdb"),
		"COLLECTOR_TRUSTED_PROXIES=127.0.0.1/32",
		"COLLECTOR_BROKER_STATS_INTERVAL=500ms",
		"GOMAXPROCS=1",
	}, filepath.Join(root, ".run", "bin", "collector"))
	base := "http://127.0.0.1:" + fmt.Sprint(httpPort)
	if err := e2etest.WaitFor(30*time.Second, func() (bool, error) {
		r, err := e2etest.TryDo(http.MethodGet, base+"/readyz", "", nil, nil)
		return err == nil && r.Status == http.StatusOK, err
	}); err != nil {
		t.Fatalf("the collector in front of the test's broker is not ready: %v\n%s", err, tail(collectorLog))
	}
	return base, collectorLog
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitPort(t *testing.T, port int, d time.Duration, logPath string) {
	t.Helper()
	if err := e2etest.WaitFor(d, func() (bool, error) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return true, nil
		}
		return false, err
	}); err != nil {
		t.Fatalf("port %d not open after %s: %v\n%s", port, d, err, tail(logPath))
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
