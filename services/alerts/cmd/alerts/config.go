package main

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"threatview/alerts/egress"
	"threatview/alerts/notify"
	"threatview/platform/httpserver"
)

// Config is the alerts service's configuration, from the environment.
type Config struct {
	HTTP httpserver.Config
	// DatabaseURL is a postgres:// URL of the events DB (schema alerts; the
	// processor writes alerts.outbox there).
	DatabaseURL string `env:"ALERTS_DATABASE_URL,required" secret:"true"`
	// DBMaxConns bounds the pool (the API, the evaluator and one
	// connection per forwarder share it; the leader lock has its own).
	DBMaxConns int32 `env:"ALERTS_DB_MAX_CONNS" envDefault:"8"`
	// AdminKey is accepted as a bearer credential with role admin.
	AdminKey string `env:"ADMIN_KEY,required" secret:"true"`
	// InternalKey authenticates to the audit logger.
	InternalKey string `env:"INTERNAL_KEY,required" secret:"true"`
	// AuditURL is the audit logger every change is recorded with before it
	// commits; a change that cannot be audited is refused with 503.
	AuditURL     string        `env:"AUDITLOGGER_SERVICE_URL,required"`
	AuditTimeout time.Duration `env:"AUDITLOGGER_TIMEOUT" envDefault:"5s"`
	// IdentityURL is the identity service's base URL (its JWK set verifies
	// access tokens). Blank: only the admin key is accepted.
	IdentityURL string `env:"IDENTITY_SERVICE_URL"`
	// EvaluateEvery is the period of evaluation (folding the outbox,
	// measuring rules, sending notifications): at most 30 s.
	EvaluateEvery time.Duration `env:"ALERTS_EVALUATE_EVERY" envDefault:"15s"`
	// LeaderPoll is how often a standby replica tries the leader lock and
	// the leader checks it.
	LeaderPoll time.Duration `env:"ALERTS_LEADER_POLL" envDefault:"1s"`
	// NotifyAttempts is how many times a notification is tried before it
	// moves to the dead letters; the waits double from NotifyBackoff up to
	// NotifyBackoffMax.
	NotifyAttempts   int           `env:"ALERTS_NOTIFY_ATTEMPTS" envDefault:"8"`
	NotifyBackoff    time.Duration `env:"ALERTS_NOTIFY_BACKOFF" envDefault:"5s"`
	NotifyBackoffMax time.Duration `env:"ALERTS_NOTIFY_BACKOFF_MAX" envDefault:"10m"`
	NotifyTimeout    time.Duration `env:"ALERTS_NOTIFY_TIMEOUT" envDefault:"10s"`
	// OutboxKeep is how long an outbox row every cursor has passed is kept;
	// CountsKeep how long minute counts are (8 days: baselines look 7 back).
	OutboxKeep time.Duration `env:"ALERTS_OUTBOX_KEEP" envDefault:"1h"`
	CountsKeep time.Duration `env:"ALERTS_COUNTS_KEEP" envDefault:"192h"`
	// ForwardBatch is how many outbox rows a forwarder reads and sends at
	// once; ForwardPoll how long it waits when there is nothing new.
	ForwardBatch int           `env:"ALERTS_FORWARD_BATCH" envDefault:"500"`
	ForwardPoll  time.Duration `env:"ALERTS_FORWARD_POLL" envDefault:"500ms"`
	// S3 serves the buckets of s3 forwarders (blank endpoint: AWS);
	// credentials come from the AWS SDK's default chain (AWS_* variables,
	// web identity, instance role).
	S3Endpoint  string `env:"ALERTS_S3_ENDPOINT"`
	S3Region    string `env:"ALERTS_S3_REGION" envDefault:"us-east-1"`
	S3PathStyle bool   `env:"ALERTS_S3_PATH_STYLE"`
	// S3Buckets are the only buckets an s3 forwarder may write to (comma
	// separated; blank: s3 forwarders are refused with 422). The service's
	// credentials may reach other buckets (the archive's, the audit
	// trail's): an admin must not be able to point a forwarder at them.
	S3Buckets []string `env:"ALERTS_S3_BUCKETS" envSeparator:","`
	// EgressAllow is the operator's allow-list of destinations on private,
	// loopback, link-local or other special-purpose addresses, which are
	// otherwise refused for webhooks, Slack URLs and syslog and HTTP
	// forwarders, at creation (422) and at every dial on the address the
	// name resolved to: comma-separated CIDRs ("10.20.0.0/16"), addresses,
	// and host:port pairs ("siem.internal:6514"). The local stack allows
	// 127.0.0.1/32 (scripts/svc/alerts.sh).
	EgressAllow string `env:"ALERTS_EGRESS_ALLOW"`
	// ForwardMaxBacklog bounds each forwarder's backlog in outbox rows:
	// when its destination is down (or its sink cannot start) and more rows
	// than this wait after its cursor, the oldest are skipped, counted in
	// its status's "skipped" and alerts_forward_skipped_total, so the
	// outbox (in the events database) stops growing. About 300 bytes a
	// row: 1,000,000 rows is about 300 MB.
	ForwardMaxBacklog int64 `env:"ALERTS_FORWARD_MAX_BACKLOG" envDefault:"1000000"`
	// SMTP relay of email channels (blank address: email notifications
	// fail and are dead-lettered).
	SMTPAddr     string `env:"ALERTS_SMTP_ADDR"`
	SMTPFrom     string `env:"ALERTS_SMTP_FROM" envDefault:"threatview-alerts@localhost"`
	SMTPUsername string `env:"ALERTS_SMTP_USERNAME"`
	SMTPPassword string `env:"ALERTS_SMTP_PASSWORD" secret:"true"`
	// SMTPTLS is how mail reaches the relay: starttls (the default: the
	// relay must offer STARTTLS and its certificate must verify, else the
	// mail is not sent), tls (implicit TLS from the first byte, port 465),
	// or none (plain text, only when set explicitly, for a relay on the
	// same host).
	SMTPTLS string `env:"ALERTS_SMTP_TLS" envDefault:"starttls"`
	// SMTPCAFile is a PEM file of the CAs that sign the relay's
	// certificate (blank: the system's).
	SMTPCAFile string `env:"ALERTS_SMTP_CA_FILE"`
	LogLevel   string `env:"LOG_LEVEL" envDefault:"info"`
}

// Validate checks relations the tags cannot express.
func (c *Config) Validate() error {
	for name, v := range map[string]string{"AUDITLOGGER_SERVICE_URL": c.AuditURL, "IDENTITY_SERVICE_URL": c.IdentityURL} {
		if v == "" && name == "IDENTITY_SERVICE_URL" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s %q is not an http(s) URL", name, v)
		}
	}
	switch {
	case c.EvaluateEvery < 100*time.Millisecond || c.EvaluateEvery > 30*time.Second:
		return fmt.Errorf("ALERTS_EVALUATE_EVERY %s: want 100ms to 30s", c.EvaluateEvery)
	case c.LeaderPoll < 100*time.Millisecond || c.LeaderPoll > time.Minute:
		return fmt.Errorf("ALERTS_LEADER_POLL %s: want 100ms to 1m", c.LeaderPoll)
	case c.NotifyAttempts < 1 || c.NotifyAttempts > 100:
		return fmt.Errorf("ALERTS_NOTIFY_ATTEMPTS %d: want 1 to 100", c.NotifyAttempts)
	case c.NotifyBackoff <= 0 || c.NotifyBackoffMax < c.NotifyBackoff:
		return fmt.Errorf("ALERTS_NOTIFY_BACKOFF %s, ALERTS_NOTIFY_BACKOFF_MAX %s: want 0 < backoff <= max", c.NotifyBackoff, c.NotifyBackoffMax)
	case c.NotifyTimeout <= 0:
		return fmt.Errorf("ALERTS_NOTIFY_TIMEOUT %s: want more than 0", c.NotifyTimeout)
	case c.OutboxKeep < 0 || c.CountsKeep < 24*time.Hour:
		return fmt.Errorf("ALERTS_OUTBOX_KEEP %s, ALERTS_COUNTS_KEEP %s: want keep >= 0 and counts >= 24h", c.OutboxKeep, c.CountsKeep)
	case c.ForwardBatch < 1 || c.ForwardBatch > 10000:
		return fmt.Errorf("ALERTS_FORWARD_BATCH %d: want 1 to 10000", c.ForwardBatch)
	case c.ForwardPoll < 10*time.Millisecond || c.ForwardPoll > time.Minute:
		return fmt.Errorf("ALERTS_FORWARD_POLL %s: want 10ms to 1m", c.ForwardPoll)
	case c.DBMaxConns < 2:
		return fmt.Errorf("ALERTS_DB_MAX_CONNS %d: want at least 2", c.DBMaxConns)
	}
	if _, err := egress.ParsePolicy(c.EgressAllow); err != nil {
		return fmt.Errorf("ALERTS_EGRESS_ALLOW: %w", err)
	}
	for _, b := range c.S3Buckets {
		if b == "" || strings.ContainsAny(b, "/ ") {
			return fmt.Errorf("ALERTS_S3_BUCKETS %q: want bucket names, comma separated", strings.Join(c.S3Buckets, ","))
		}
	}
	if c.ForwardMaxBacklog < int64(c.ForwardBatch) {
		return fmt.Errorf("ALERTS_FORWARD_MAX_BACKLOG %d: want at least ALERTS_FORWARD_BATCH (%d)", c.ForwardMaxBacklog, c.ForwardBatch)
	}
	switch c.SMTPTLS {
	case notify.TLSStartTLS, notify.TLSImplicit, notify.TLSNone:
	default:
		return fmt.Errorf("ALERTS_SMTP_TLS %q: want starttls, tls or none", c.SMTPTLS)
	}
	if c.SMTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.SMTPAddr); err != nil {
			return fmt.Errorf("ALERTS_SMTP_ADDR %q: want host:port", c.SMTPAddr)
		}
	}
	return nil
}
