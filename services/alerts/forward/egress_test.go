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
