package alerts

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestScope_Validate(t *testing.T) {
	if n := len(strings.Fields(isoCountries)); n != 249 {
		t.Fatalf("%d ISO 3166-1 alpha-2 codes, want the 249 assigned", n)
	}
	for c, want := range map[string]bool{"": true, "DE": true, "ZZ": true, "US": true, "XX": false, "UK": false,
		"D": false, "DEU": false, "de": false, "É": false, "D E": false} {
		if got := validCountry(c); got != want {
			t.Errorf("validCountry(%q) = %v, want %v", c, got, want)
		}
	}
	for os, want := range map[string]string{"Android": "android", "iOS": "ios", "IPADOS": "ipados", "": "other",
		"Symbian": "other", "other": "other", "macos": "macos"} {
		if got := OSFamily(os); got != want {
			t.Errorf("OSFamily(%q) = %q, want %q", os, got, want)
		}
	}
	r := Rule{Name: "x", Country: " de ", OS: " IOS", WindowSeconds: 60, Threshold: 1,
		Channel: Channel{Type: ChannelSlack, URL: "https://a.example"}}
	if err := r.Validate(); err != nil || r.Country != "DE" || r.OS != "ios" || !r.Scoped() {
		t.Fatalf("Validate = %v, country %q, os %q", err, r.Country, r.OS)
	}
	r.OS = "beos"
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "os must be one of android, ios") {
		t.Fatalf("Validate with os beos = %v", err)
	}
}

// TestScope_OpenAPI: api/alerts.openapi.json offers exactly the countries
// and OS families the service takes.
func TestScope_OpenAPI(t *testing.T) {
	raw, err := os.ReadFile("../../api/alerts.openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas struct {
				RuleInput struct {
					Properties struct {
						Country, OS struct{ Enum []string }
					}
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	p := doc.Components.Schemas.RuleInput.Properties
	want := append(append([]string{""}, strings.Fields(isoCountries)...), UnknownCountry)
	if strings.Join(p.Country.Enum, " ") != strings.Join(want, " ") {
		t.Errorf("the document's countries (%d) differ from the service's (%d)", len(p.Country.Enum), len(want))
	}
	if strings.Join(p.OS.Enum, " ") != strings.Join(append([]string{""}, OSFamilies...), " ") {
		t.Errorf("the document's OS families %v differ from %v", p.OS.Enum, OSFamilies)
	}
}
