package httpapi

import (
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// cors answers preflight requests and adds CORS headers for the allowed
// origins ("*" allows any). Requests from other origins pass through
// without CORS headers, so browsers refuse them.
func cors(origins []string) func(http.Handler) http.Handler {
	any := false
	allowed := make(map[string]bool, len(origins))
	for _, o := range origins {
		if o == "*" {
			any = true
		}
		allowed[o] = true
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			origin := r.Header.Get("Origin")
			if origin == "" || !(any || allowed[origin]) {
				next.ServeHTTP(w, r)
				return
			}
			h := w.Header()
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Allow-Origin", origin)
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Add("Vary", "Access-Control-Request-Method")
				h.Add("Vary", "Access-Control-Request-Headers")
				h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Content-Encoding, X-Request-ID, Idempotency-Key")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
			h.Set("Access-Control-Expose-Headers", "X-Request-ID, Retry-After")
			next.ServeHTTP(w, r)
		})
	}
}

// appLimiter is a token bucket per app id. Apps are few (each needs a
// token), so the map is not pruned.
type appLimiter struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	apps  map[string]*rate.Limiter
}

func newAppLimiter(perSecond float64, burst int) *appLimiter {
	if burst <= 0 {
		burst = 1
	}
	return &appLimiter{limit: rate.Limit(perSecond), burst: burst, apps: map[string]*rate.Limiter{}}
}

// allow takes one request from app's bucket, or says how long to wait.
func (l *appLimiter) allow(app string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	lim, ok := l.apps[app]
	if !ok {
		lim = rate.NewLimiter(l.limit, l.burst)
		l.apps[app] = lim
	}
	l.mu.Unlock()
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return false, time.Second
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}
