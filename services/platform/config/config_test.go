package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"threatview/platform/config"
)

type sample struct {
	Addr    string        `env:"SAMPLE_ADDR" envDefault:":9000"`
	Workers int           `env:"SAMPLE_WORKERS" envDefault:"4"`
	Wait    time.Duration `env:"SAMPLE_WAIT" envDefault:"5ms"`
	Key     string        `env:"SAMPLE_KEY,required" secret:"true"`
}

func (s *sample) Validate() error {
	if s.Workers < 1 {
		return errors.New("SAMPLE_WORKERS must be at least 1")
	}
	return nil
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		vars    map[string]string
		wantErr string // substring naming the variable; "" for success
		check   func(t *testing.T, s sample)
	}{
		{"OK defaults", map[string]string{"SAMPLE_KEY": "k"}, "", func(t *testing.T, s sample) {
			if s.Addr != ":9000" || s.Workers != 4 || s.Wait != 5*time.Millisecond {
				t.Errorf("defaults = %+v", s)
			}
		}},
		{"OK override", map[string]string{"SAMPLE_KEY": "k", "SAMPLE_WORKERS": "9"}, "", func(t *testing.T, s sample) {
			if s.Workers != 9 {
				t.Errorf("Workers = %d, want 9", s.Workers)
			}
		}},
		{"ErrMissingRequired", map[string]string{}, "SAMPLE_KEY", nil},
		{"ErrBadInt", map[string]string{"SAMPLE_KEY": "k", "SAMPLE_WORKERS": "many"}, "SAMPLE_WORKERS", nil},
		{"ErrBadDuration", map[string]string{"SAMPLE_KEY": "k", "SAMPLE_WAIT": "soon"}, "SAMPLE_WAIT", nil},
		{"ErrValidate", map[string]string{"SAMPLE_KEY": "k", "SAMPLE_WORKERS": "0"}, "SAMPLE_WORKERS", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sample
			err := config.Parse(env(tt.vars), &s)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse(%v) = %v, want nil", tt.vars, err)
				}
				tt.check(t, s)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse(%v) = %v, want an error naming %s", tt.vars, err, tt.wantErr)
			}
		})
	}
}

func TestMasked(t *testing.T) {
	s := sample{Addr: ":1", Key: "topsecret"}
	got := config.Masked(&s).String()
	if strings.Contains(got, "topsecret") {
		t.Fatalf("Masked(...) = %s, leaks the secret", got)
	}
	if !strings.Contains(got, "***") || !strings.Contains(got, ":1") {
		t.Fatalf("Masked(...) = %s, want the mask and the plain fields", got)
	}
}

func TestKeys(t *testing.T) {
	keys, err := config.Keys(&sample{})
	if err != nil {
		t.Fatal(err)
	}
	want := "SAMPLE_ADDR SAMPLE_WORKERS SAMPLE_WAIT SAMPLE_KEY"
	if got := strings.Join(keys, " "); got != want {
		t.Fatalf("Keys = %q, want %q", got, want)
	}
}
