package forward_test

import (
	"context"
	"errors"
	"testing"

	"threatview/alerts"
	"threatview/alerts/egress"
	"threatview/alerts/forward"
	"threatview/alerts/internal/egresstest"
)

// TestSink_DialTimeCheck (issue 37 item 6): syslog and HTTP sinks to a name
// that now resolves to the metadata service fail the batch at dial time,
// nothing dialled; the error stored names no path or query.
func TestSink_DialTimeCheck(t *testing.T) {
	for _, f := range []alerts.Forwarder{
		{ID: "tcp", Type: alerts.ForwardSyslog, URL: "tcp://rebound.test:514", Format: alerts.FormatCEF},
		{ID: "tls", Type: alerts.ForwardSyslog, URL: "tls://rebound.test:6514", Format: alerts.FormatCEF},
		{ID: "http", Type: alerts.ForwardHTTP, URL: "https://rebound.test/collector?token=QUERYTOKEN", Format: alerts.FormatOCSF},
	} {
		guard, rec := egresstest.Rebound(nil)
		sink, err := forward.NewSink(&f, forward.Config{Version: "test", Host: "h", Guard: guard})
		if err != nil {
			t.Fatal(err)
		}
		err = sink.Send(context.Background(), []alerts.Event{event(1, "hooking")})
		if !errors.Is(err, egress.ErrDenied) || len(rec.Addrs()) != 0 {
			t.Errorf("%s sink Send = %v, dialled %v; want ErrDenied and nothing dialled", f.ID, err, rec.Addrs())
		}
		if err != nil && alerts.RedactURLs(err.Error()) != err.Error() {
			t.Errorf("%s sink error %q holds a URL", f.ID, err)
		}
		sink.Close()
	}
}

// TestNewSink_S3Buckets (issue 37 item 6): an s3 forwarder whose bucket is
// not one of ALERTS_S3_BUCKETS (one stored before the list existed) does
// not start, so it cannot write into the archive's or the audit trail's
// bucket with the service's credentials.
func TestNewSink_S3Buckets(t *testing.T) {
	f := alerts.Forwarder{ID: "s3", Type: alerts.ForwardS3, URL: "s3://audit-trail/checkpoints/", Format: alerts.FormatOCSF}
	cfg := forward.Config{Version: "test", S3: forward.S3Config{Region: "us-east-1", Buckets: []string{"siem-bucket"}}}
	if _, err := forward.NewSink(&f, cfg); err == nil {
		t.Fatal("NewSink for a bucket not configured succeeded")
	}
	f.URL = "s3://siem-bucket/threatview/"
	if _, err := forward.NewSink(&f, cfg); err != nil {
		t.Fatalf("NewSink for a configured bucket = %v", err)
	}
}
