package testenv

import (
	"encoding/json"
	"strings"
)

// ListenAddr finds the bound address in the "http server listening" line of
// a service's JSON log (platform/httpserver.Run writes it), or "" when it is
// not there yet: tests run a service's run() on HTTP_ADDR=127.0.0.1:0 and
// find it this way.
func ListenAddr(log string) string {
	for _, line := range strings.Split(log, "\n") {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "http server listening" {
			return rec.Addr
		}
	}
	return ""
}
