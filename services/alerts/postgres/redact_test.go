package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"threatview/alerts"
	"threatview/alerts/internal/pgtest"
)

// TestStore_RetryRedactsURL (issue 37 item 5): a notification's last_error,
// read by analysts in the dead letters, holds no URL path or query.
func TestStore_RetryRedactsURL(t *testing.T) {
	_, st, _ := pgtest.MustStore(t)
	ctx := context.Background()
	r := alerts.Rule{ID: uuid.NewString(), Name: "slack", WindowSeconds: 60, Threshold: 1, CreatedBy: "t",
		Channel: alerts.Channel{Type: alerts.ChannelSlack, URL: "https://hooks.slack.com/services/T0/B0/SLACKSECRET"}}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRule(ctx, &r, nil); err != nil {
		t.Fatal(err)
	}
	tr := alerts.Transition{RuleID: r.ID, State: "firing", Value: 2, Threshold: 1, At: time.Now()}
	if ok, err := st.Transition(ctx, r, "ok", &tr, []byte(`{}`)); !ok || err != nil {
		t.Fatalf("Transition = %v, %v", ok, err)
	}
	if err := st.Retry(ctx, tr.ID, time.Now(), true, `Post "https://hooks.slack.com/services/T0/B0/SLACKSECRET?x=1": EOF`); err != nil {
		t.Fatal(err)
	}
	dead, err := st.Notifications(ctx, "dead", 10)
	if err != nil || len(dead) != 1 || dead[0].LastError != `Post "https://hooks.slack.com": EOF` {
		t.Fatalf("dead letters = %+v, %v; want one whose last_error names scheme and host only", dead, err)
	}
}
