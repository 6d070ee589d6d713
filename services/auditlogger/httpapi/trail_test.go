package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/auditlogger/httpapi"
	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
)

func TestTrailEndpoints(t *testing.T) {
	ctx := context.Background()
	_, db := audittest.MustDB(t)
	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed)
	signer, keys, err := trail.ParseSigningKeys(base64.StdEncoding.EncodeToString(seed))
	if err != nil {
		t.Fatal(err)
	}
	dir := trail.Dir{Root: t.TempDir()}
	cp := &trail.Checkpointer{DB: mariadb.NewTrail(db), Store: dir, Signer: signer}
	store := mariadb.New(db)
	recs := audittest.Records(700, time.Now().Add(-time.Hour))
	for i, part := range [][]int{{0, 300}, {300, 700}} {
		if _, err := store.Insert(ctx, recs[part[0]:part[1]]); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Once(ctx, time.Now().Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	api := httpapi.New(nopPublisher{}, store, httpapi.Options{InternalKey: internalKey, AdminKey: adminKey,
		Trail: &httpapi.Trail{DB: mariadb.NewTrail(db), Ref: trail.StoreReference{Store: dir}, Keys: keys,
			Metrics: httpapi.NewTrailMetrics(prometheus.NewRegistry())}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(api.Handler(prometheus.NewRegistry(), nil))
	defer srv.Close()
	get := func(path, key string, out any) int {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatalf("GET %s: decode: %v", path, err)
			}
		}
		return resp.StatusCode
	}

	t.Run("verify OK", func(t *testing.T) {
		var rep trail.Report
		if st := get("/v1/audit/verify", adminKey, &rep); st != 200 || !rep.OK || rep.Checked != 700 || rep.Checkpoint.Size != 700 {
			t.Fatalf("verify = %d %+v; want 200, ok, 700 checked", st, rep)
		}
	})
	t.Run("verify without the store is unanchored", func(t *testing.T) {
		api := httpapi.New(nopPublisher{}, store, httpapi.Options{AdminKey: adminKey,
			Trail: &httpapi.Trail{DB: mariadb.NewTrail(db), Keys: keys}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		srv := httptest.NewServer(api.Handler(prometheus.NewRegistry(), nil))
		defer srv.Close()
		req, _ := http.NewRequest("GET", srv.URL+"/v1/audit/verify", nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if s := string(b); resp.StatusCode != 200 || !strings.Contains(s, `"ok":false`) || !strings.Contains(s, `"anchored":false`) ||
			!strings.Contains(s, `"kind":"unanchored"`) {
			t.Fatalf("verify without the store = %d %s; want 200, ok false, anchored false, an unanchored problem", resp.StatusCode, s)
		}
	})
	t.Run("ErrUnauthorized", func(t *testing.T) {
		for _, p := range []string{"/v1/audit/verify", "/v1/audit/checkpoints", "/v1/audit/" + recs[5].ID + "/proof"} {
			if st := get(p, internalKey, nil); st != 401 && st != 403 {
				t.Errorf("GET %s with the internal key = %d, want 401 or 403", p, st)
			}
		}
	})
	t.Run("bad query", func(t *testing.T) {
		var e struct {
			Error struct{ Code, Message string }
		}
		for _, p := range []string{"/v1/audit/verify?from=yesterday", "/v1/audit/verify?x=1", "/v1/audit/checkpoints?limit=0"} {
			if st := get(p, adminKey, &e); st != 400 || e.Error.Code != "invalid_query" {
				t.Errorf("GET %s = %d %+v, want 400 invalid_query", p, st, e)
			}
		}
		if st := get("/v1/audit/not-a-uuid/proof", adminKey, &e); st != 400 {
			t.Errorf("proof of a bad id = %d, want 400", st)
		}
		if st := get("/v1/audit/"+audittest.NewID()+"/proof", adminKey, &e); st != 404 {
			t.Errorf("proof of an unknown id = %d, want 404", st)
		}
	})
	t.Run("keys published", func(t *testing.T) {
		var out struct{ Keys []trail.PublicKey }
		if st := get("/v1/audit/keys", "", &out); st != 200 || len(out.Keys) != 1 || out.Keys[0].KeyID != signer.KeyID {
			t.Fatalf("keys = %d %+v", st, out)
		}
	})
	t.Run("proofs check without trusting the server", func(t *testing.T) {
		for _, i := range []int{0, 1, 255, 256, 299, 513, 699} {
			var p trail.InclusionProof
			if st := get("/v1/audit/"+recs[i].ID+"/proof", adminKey, &p); st != 200 {
				t.Fatalf("proof of row %d = %d", i, st)
			}
			if err := p.Verify(keys); err != nil {
				t.Errorf("row %d: %v", i, err)
			}
			p.Record.Outcome = 500 // a row that was changed no longer proves
			if err := p.Verify(keys); err == nil {
				t.Errorf("row %d changed: proof still verifies", i)
			}
		}
		var p trail.InclusionProof
		if st := get("/v1/audit/"+recs[400].ID+"/proof?checkpoint=1", adminKey, &p); st != 409 {
			t.Errorf("proof of a row past checkpoint 1 = %d, want 409", st)
		}
	})
	t.Run("consistency", func(t *testing.T) {
		var cps struct {
			Checkpoints []trail.Checkpoint
		}
		if st := get("/v1/audit/checkpoints", adminKey, &cps); st != 200 || len(cps.Checkpoints) != 2 {
			t.Fatalf("checkpoints = %d %+v", st, cps)
		}
		var c trail.ConsistencyProof
		if st := get("/v1/audit/checkpoints/consistency?from=1&to=2", adminKey, &c); st != 200 {
			t.Fatalf("consistency = %d", st)
		}
		if err := c.Verify(keys); err != nil || c.From.Size != 300 || c.To.Size != 700 {
			t.Fatalf("consistency 1..2: %v (%d..%d)", err, c.From.Size, c.To.Size)
		}
		c.From.Root[0] ^= 1
		if err := c.Verify(keys); err == nil {
			t.Fatal("a changed checkpoint still verifies")
		}
	})
	t.Run("verify names a modified row", func(t *testing.T) {
		if _, err := db.Exec("UPDATE audit_events SET outcome = 200 WHERE seq = 42"); err != nil {
			t.Fatal(err)
		}
		var rep trail.Report
		if st := get("/v1/audit/verify", adminKey, &rep); st != 200 || rep.OK || len(rep.Problems) != 1 ||
			rep.Problems[0].ID != recs[42].ID || rep.Problems[0].Kind != "modified" {
			t.Fatalf("verify = %d %+v; want one modified problem naming %s", st, rep, recs[42].ID)
		}
	})
}

// slowRef is a trail.Reference whose Checkpoints waits for release.
type slowRef struct {
	trail.Reference
	entered chan struct{}
	release chan struct{}
}

func (s slowRef) Checkpoints(ctx context.Context) ([]trail.Checkpoint, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Reference.Checkpoints(ctx)
}

// TestVerify_OneAtATime: a second verification while one runs gets 503 with
// Retry-After, and the first still answers.
func TestVerify_OneAtATime(t *testing.T) {
	_, db := audittest.MustDB(t)
	_, keys := mustKeys(t)
	ref := slowRef{Reference: trail.StoreReference{Store: trail.Dir{Root: t.TempDir()}}, entered: make(chan struct{}), release: make(chan struct{})}
	api := httpapi.New(nopPublisher{}, mariadb.New(db), httpapi.Options{InternalKey: internalKey, AdminKey: adminKey,
		Trail: &httpapi.Trail{DB: mariadb.NewTrail(db), Ref: ref, Keys: keys}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(api.Handler(prometheus.NewRegistry(), nil))
	defer srv.Close()
	get := func() *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/audit/verify", nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return nil
		}
		resp.Body.Close()
		return resp
	}
	first := make(chan *http.Response)
	go func() { first <- get() }()
	<-ref.entered
	if resp := get(); resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second verification = %v, want 503 with Retry-After", resp)
	}
	close(ref.release)
	if resp := <-first; resp == nil || resp.StatusCode != http.StatusOK {
		t.Errorf("first verification = %v, want 200", resp)
	}
}

func mustKeys(t *testing.T) (*trail.Signer, trail.Keyring) {
	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed)
	s, k, err := trail.ParseSigningKeys(base64.StdEncoding.EncodeToString(seed))
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}
