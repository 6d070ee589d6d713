package notify

// This file uses the standard library only, so a receiver can copy Verify
// (and the two constants) into its own code as it is; docs/siem.md shows it.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// VerifyWindow is how far a signature's time may be from the receiver's
// clock: a captured delivery cannot be replayed after it.
const VerifyWindow = 5 * time.Minute

// Verify checks the X-ThreatView-Signature header value sig of a webhook
// delivery: its t= is within window of now and one of its v1= values is the
// hex HMAC-SHA256, keyed with secret, of "<t>.<delivery id>.<body>", where
// delivery is the X-ThreatView-Delivery header. The comparison takes
// constant time. A receiver must also drop a delivery id it has already
// taken (keep the ids it saw for at least the window): within the window a
// copy verifies again.
func Verify(secret, sig, delivery string, body []byte, now time.Time, window time.Duration) error {
	var ts string
	var macs [][]byte
	for _, part := range strings.Split(sig, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
		case k == "t":
			ts = v
		case k == "v1":
			if m, err := hex.DecodeString(v); err == nil {
				macs = append(macs, m)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(macs) == 0 {
		return errors.New("signature: want t=<unix seconds>,v1=<hex>")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > window || d < -window {
		return errors.New("signature: time outside the window")
	}
	if delivery == "" {
		return errors.New("signature: no delivery id")
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + delivery + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, got := range macs {
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("signature: no match")
}
