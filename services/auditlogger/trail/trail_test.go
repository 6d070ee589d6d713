package trail

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"threatview/auditlogger"
	"threatview/platform/wire"
)

// TestLeafData_RawAgrees: the verifier computes leaves from raw column
// bytes, the worker from records; both must give the same bytes.
func TestLeafData_RawAgrees(t *testing.T) {
	sum := sha256.Sum256([]byte("body"))
	for _, tc := range []struct{ name, ip, sum string }{
		{"IPv4", "203.0.113.7", hex.EncodeToString(sum[:])},
		{"IPv6", "2001:db8::1", ""},
		{"IPv4-mapped", "::ffff:10.1.2.3", ""},
		{"no address", "", hex.EncodeToString(sum[:])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := wire.AuditRecord{ID: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", Time: time.Date(2026, 12, 1, 5, 44, 22, 123456000, time.UTC),
				ActorToken: "tok", ActorApp: "app é", Action: "events.collect", Resource: "/v1/events", Outcome: 202,
				ClientIP: tc.ip, UserAgent: "ua", RequestID: "rid", EventCount: 3, BodySHA256: tc.sum}
			id, _ := auditlogger.ParseID(r.ID)
			var ip []byte
			if a, err := netip.ParseAddr(tc.ip); err == nil {
				ip = a.Unmap().AsSlice()
			}
			raw, _ := hex.DecodeString(tc.sum)
			got := AppendLeafData(nil, LeafFields{ID: id, Time: r.Time, ActorToken: []byte("tok"), ActorApp: []byte("app é"),
				Action: []byte("events.collect"), Resource: []byte("/v1/events"), Outcome: 202, ClientIP: ip,
				UserAgent: []byte("ua"), RequestID: []byte("rid"), EventCount: 3, BodySHA256: raw})
			if want := LeafData(&r); !bytes.Equal(got, want) {
				t.Fatalf("AppendLeafData = %x, LeafData = %x", got, want)
			}
		})
	}
}

// TestLeafHash_FieldsCovered: every field but the body changes the leaf.
func TestLeafHash_FieldsCovered(t *testing.T) {
	base := wire.AuditRecord{ID: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", Time: time.Unix(1700000000, 0).UTC(), ActorToken: "a",
		ActorApp: "b", Action: "c", Resource: "d", Outcome: 202, ClientIP: "192.0.2.1", UserAgent: "e", RequestID: "f", EventCount: 1,
		BodySHA256: strings.Repeat("ab", 32), Body: []byte("x")}
	leaf := LeafHash(&base)
	for name, change := range map[string]func(*wire.AuditRecord){
		"id":     func(r *wire.AuditRecord) { r.ID = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5d" },
		"time":   func(r *wire.AuditRecord) { r.Time = r.Time.Add(time.Microsecond) },
		"actor":  func(r *wire.AuditRecord) { r.ActorToken = "ab"; r.ActorApp = "" }, // a moved boundary
		"action": func(r *wire.AuditRecord) { r.Action = "C" }, "resource": func(r *wire.AuditRecord) { r.Resource = "" },
		"outcome": func(r *wire.AuditRecord) { r.Outcome = 500 }, "client_ip": func(r *wire.AuditRecord) { r.ClientIP = "" },
		"user_agent": func(r *wire.AuditRecord) { r.UserAgent = "E" }, "request_id": func(r *wire.AuditRecord) { r.RequestID = "" },
		"event_count": func(r *wire.AuditRecord) { r.EventCount = 2 }, "body_sha256": func(r *wire.AuditRecord) { r.BodySHA256 = "" },
	} {
		r := base
		change(&r)
		if bytes.Equal(LeafHash(&r), leaf) {
			t.Errorf("changing %s keeps the leaf", name)
		}
	}
	r := base
	r.Body = nil // a redaction
	if !bytes.Equal(LeafHash(&r), leaf) {
		t.Error("redacting the body changes the leaf")
	}
}

func TestParseSigningKeys(t *testing.T) {
	seed := func(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }
	t.Run("OK rotation", func(t *testing.T) {
		oldSigner, _, err := ParseSigningKeys(seed(1))
		if err != nil {
			t.Fatal(err)
		}
		old := oldSigner.Sign(10, make([]byte, 32), time.Now())
		signer, ring, err := ParseSigningKeys(seed(2) + ", " + seed(1))
		if err != nil || len(ring) != 2 || signer.KeyID == oldSigner.KeyID {
			t.Fatalf("ParseSigningKeys = %v, %d keys, signer %s", err, len(ring), signer.KeyID)
		}
		if err := ring.Verify(&old); err != nil {
			t.Errorf("a checkpoint of the retired key: %v", err)
		}
		pubs, err := ParsePublicKeys(base64.StdEncoding.EncodeToString(signer.Public()))
		if err != nil || pubs[signer.KeyID] == nil {
			t.Fatalf("ParsePublicKeys = %v, %v", pubs, err)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, s := range []string{"", "not base64!", base64.StdEncoding.EncodeToString([]byte("short"))} {
			if _, _, err := ParseSigningKeys(s); err == nil || !strings.Contains(err.Error(), "AUDIT_SIGNING_KEYS") {
				t.Errorf("ParseSigningKeys(%q) = %v, want an error naming the variable", s, err)
			}
		}
		if _, err := ParsePublicKeys("xyz"); err == nil {
			t.Error("ParsePublicKeys(xyz) = nil error")
		}
	})
	t.Run("ErrBadSignature", func(t *testing.T) {
		signer, ring, _ := ParseSigningKeys(seed(3))
		c := signer.Sign(5, bytes.Repeat([]byte{7}, 32), time.Now())
		for name, tamper := range map[string]func(*Checkpoint){
			"size": func(c *Checkpoint) { c.Size++ }, "root": func(c *Checkpoint) { c.Root[0] ^= 1 },
			"time": func(c *Checkpoint) { c.Time = c.Time.Add(time.Second) }, "key": func(c *Checkpoint) { c.KeyID = "other" },
			"foreign": func(c *Checkpoint) {
				_, priv, _ := ed25519.GenerateKey(nil)
				c.Signature = ed25519.Sign(priv, c.SignedText())
			},
		} {
			cc := c
			cc.Root = bytes.Clone(c.Root)
			tamper(&cc)
			if err := ring.Verify(&cc); !errors.Is(err, ErrBadSignature) {
				t.Errorf("%s changed: Verify = %v, want ErrBadSignature", name, err)
			}
		}
	})
}

func FuzzDecodeEntries(f *testing.F) {
	f.Add(EncodeEntries([]Entry{{Seq: 7, Time: time.Unix(1, 0).UTC(), Leaf: make([]byte, 32)}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := DecodeEntries(b)
		if err != nil {
			return
		}
		if again := EncodeEntries(es); len(es) > 0 && !bytes.Equal(again, b) {
			t.Fatalf("round trip: %x became %x", b, again)
		}
	})
}

func TestDir_WriteOnce(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	ctx := t.Context()
	if err := d.Put(ctx, "checkpoints/a.json", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "checkpoints/a.json", []byte("one")); err != nil {
		t.Errorf("same bytes again = %v, want nil", err)
	}
	if err := d.Put(ctx, "checkpoints/a.json", []byte("two")); !errors.Is(err, ErrExists) {
		t.Errorf("other bytes = %v, want ErrExists", err)
	}
	if keys, err := d.List(ctx, "checkpoints/"); err != nil || len(keys) != 1 {
		t.Errorf("List = %v, %v", keys, err)
	}
}

// countingStore counts the objects read from an ObjectStore.
type countingStore struct {
	Dir
	gets []string
}

func (c *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets = append(c.gets, key)
	return c.Dir.Get(ctx, key)
}

// TestStoreReference_ReadsWhatItNeeds: a verification reads the stored copy
// of the database's newest trusted checkpoint and the newest one, not every
// checkpoint; All reads every one.
func TestStoreReference_ReadsWhatItNeeds(t *testing.T) {
	ctx := t.Context()
	seed := make([]byte, ed25519.SeedSize)
	signer, ring, err := ParseSigningKeys(base64.StdEncoding.EncodeToString(seed))
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStore{Dir: Dir{Root: t.TempDir()}}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var cps []Checkpoint
	for i := range 40 {
		c := signer.Sign(uint64(10*i), make([]byte, HashSize), t0.Add(time.Duration(i)*10*time.Second))
		if err := st.Put(ctx, checkpointKey(&c), MarshalCheckpoint(&c)); err != nil {
			t.Fatal(err)
		}
		cps = append(cps, c)
	}
	ref := StoreReference{Store: st}
	for _, tc := range []struct {
		name  string
		since *Checkpoint
		want  []uint64
	}{
		{"since an older one", &cps[25], []uint64{250, 390}},
		{"since the newest", &cps[39], []uint64{390}},
		{"no trusted checkpoint in the database", nil, []uint64{390}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st.gets = nil
			got, err := ref.CheckpointsSince(ctx, tc.since)
			if err != nil {
				t.Fatal(err)
			}
			var sizes []uint64
			for _, c := range got {
				sizes = append(sizes, c.Size)
			}
			if fmt.Sprint(sizes) != fmt.Sprint(tc.want) || len(st.gets) != len(tc.want) {
				t.Errorf("read sizes %v with %d GETs, want %v", sizes, len(st.gets), tc.want)
			}
		})
	}
	st.gets = nil
	if got, err := (StoreReference{Store: st, All: true}).CheckpointsSince(ctx, &cps[39]); err != nil || len(got) != 40 || len(st.gets) != 40 {
		t.Errorf("All: %d checkpoints, %d GETs, %v; want 40", len(got), len(st.gets), err)
	}

	// An object planted under checkpoints/ by another workload (issue 37
	// item 7) is not read: it was, and every verification failed on it.
	for _, k := range []string{"checkpoints/zz-planted.json", "checkpoints/99999999999999999999-00000000000000000001.json.bak"} {
		if err := st.Put(ctx, k, []byte("not a checkpoint")); err != nil {
			t.Fatal(err)
		}
	}
	for _, all := range []bool{false, true} {
		got, err := (StoreReference{Store: st, All: all}).CheckpointsSince(ctx, &cps[39])
		if err != nil || len(got) == 0 || got[len(got)-1].Size != 390 {
			t.Errorf("with planted objects (All %v): %d checkpoints, %v; want the newest to be 390", all, len(got), err)
		}
	}
	if c, err := newestStored(ctx, st, ring, nil); err != nil || c == nil || c.Size != 390 {
		t.Errorf("newestStored with planted objects = %v, %v; want 390", c, err)
	}
}

// TestFastHashes: the worker's and verifier's allocation-free hashing gives
// RFC 6962's leaf and node hashes.
func TestFastHashes(t *testing.T) {
	f := LeafFields{ID: [16]byte{1, 2, 3}, Time: time.Date(2026, 12, 1, 5, 44, 22, 123456000, time.UTC),
		ActorToken: []byte("tok"), Action: []byte("events.collect"), Outcome: 202, ClientIP: []byte{203, 0, 113, 0},
		UserAgent: []byte("ua"), EventCount: 3}
	if got, want := HashLeafInput(AppendLeafInput([]byte("junk")[:0], f)), Hasher.HashLeaf(AppendLeafData(nil, f)); !bytes.Equal(got, want) {
		t.Errorf("HashLeafInput = %x, want %x", got, want)
	}
	l, rr := bytes.Repeat([]byte{1}, HashSize), bytes.Repeat([]byte{2}, HashSize)
	if got, want := hashChildren(l, rr), Hasher.HashChildren(l, rr); !bytes.Equal(got, want) {
		t.Errorf("hashChildren = %x, want %x", got, want)
	}
}

// TestCheckpoint_GenesisSigned: the genesis is covered by the signature; a
// checkpoint without one keeps the v1 text, so older checkpoints verify.
func TestCheckpoint_GenesisSigned(t *testing.T) {
	signer, ring, _ := ParseSigningKeys(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{4}, 32)))
	root := bytes.Repeat([]byte{7}, 32)
	g := &Genesis{Rows: 20, At: time.Date(2026, 12, 1, 5, 0, 0, 123456000, time.UTC), Digest: bytes.Repeat([]byte{9}, 32)}
	c := signer.SignGenesis(5, root, time.Now(), g)
	if err := ring.Verify(&c); err != nil {
		t.Fatalf("Verify = %v", err)
	}
	if v1 := signer.Sign(5, root, c.Time); !strings.HasPrefix(string(v1.SignedText()), "threatview audit checkpoint v1\n") ||
		!strings.HasPrefix(string(c.SignedText()), "threatview audit checkpoint v2\n") {
		t.Fatalf("signed texts:\n%s\n%s", v1.SignedText(), c.SignedText())
	}
	for name, tamper := range map[string]func(*Checkpoint){
		"rows":    func(c *Checkpoint) { c.Genesis.Rows++ },
		"at":      func(c *Checkpoint) { c.Genesis.At = c.Genesis.At.Add(time.Microsecond) },
		"digest":  func(c *Checkpoint) { c.Genesis.Digest[0] ^= 1 },
		"removed": func(c *Checkpoint) { c.Genesis = nil },
	} {
		cc := c
		gg := *g
		gg.Digest = bytes.Clone(g.Digest)
		cc.Genesis = &gg
		tamper(&cc)
		if err := ring.Verify(&cc); !errors.Is(err, ErrBadSignature) {
			t.Errorf("genesis %s changed: Verify = %v, want ErrBadSignature", name, err)
		}
	}
}
