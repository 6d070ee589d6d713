package forward_test

import (
	"strings"
	"testing"
	"time"

	"threatview/alerts"
	"threatview/alerts/forward"
)

// parseCEF reads a CEF:0 record back as a receiver would (CEF 25, "Header
// information" and "Extension"): seven header fields split on unescaped
// pipes, then key=value pairs where a key is the word before an unescaped
// equals sign and a value runs to the space before the next key.
func parseCEF(t testing.TB, s string) (header []string, ext map[string]string) {
	t.Helper()
	if !strings.HasPrefix(s, "CEF:") {
		t.Fatalf("%q does not start with CEF:", s)
	}
	var field []byte
	i := 0
	for ; i < len(s) && len(header) < 7; i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '|'):
			field = append(field, s[i+1])
			i++
		case c == '|':
			header = append(header, string(field))
			field = field[:0]
		default:
			field = append(field, c)
		}
	}
	if len(header) != 7 {
		t.Fatalf("%q has %d header fields, want 7", s, len(header))
	}
	ext = map[string]string{}
	rest := s[i:]
	// Split at unescaped '=': the text before each is "<value of the
	// previous key> <key>".
	var parts []string
	start := 0
	for j := 0; j < len(rest); j++ {
		switch rest[j] {
		case '\\':
			j++
		case '=':
			parts = append(parts, rest[start:j])
			start = j + 1
		}
	}
	parts = append(parts, rest[start:])
	if len(parts) == 1 {
		return header, ext
	}
	key := parts[0]
	for k := 1; k < len(parts); k++ {
		raw := parts[k]
		next := ""
		if k < len(parts)-1 {
			sp := strings.LastIndexByte(raw, ' ')
			if sp < 0 {
				t.Fatalf("%q: no space before the key after %s's value %q", s, key, raw)
			}
			raw, next = raw[:sp], raw[sp+1:]
		}
		if _, dup := ext[key]; dup {
			t.Fatalf("%q: key %q twice", s, key)
		}
		ext[key] = unescapeCEFValue(raw)
		key = next
	}
	return header, ext
}

func unescapeCEFValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			default:
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// checkCEF formats e and checks a receiver reads back every value as it was.
func checkCEF(t testing.TB, e alerts.Event) {
	t.Helper()
	line := string(forward.AppendCEF(nil, &e, "v|1\\"))
	if strings.ContainsAny(line, "\r\n") {
		t.Fatalf("AppendCEF = %q holds a line break", line)
	}
	header, ext := parseCEF(t, line)
	if header[3] != "v|1\\" {
		t.Errorf("AppendCEF(%+v) version = %q, want %q", e, header[3], "v|1\\")
	}
	if want := "threat:" + e.Threats[0]; !strings.ContainsAny(want, "\r\n") && header[4] != want {
		t.Errorf("AppendCEF(%+v) signature id = %q, want %q", e, header[4], want)
	}
	want := map[string]string{"externalId": e.ID, "cat": e.Type, "cs1": e.AppID, "cs2": strings.Join(e.Threats, ","),
		"cs3": strings.TrimSpace(e.OS + " " + e.OSVersion), "cs4": e.DeviceModel, "cs5": e.AppVersion, "cs6": e.Country}
	for k, v := range want {
		if got, ok := ext[k]; v != "" && got != v || v == "" && ok {
			t.Errorf("AppendCEF = %q: %s = %q, want %q", line, k, got, v)
		}
	}
	if e.AppID != "" && ext["cs1Label"] != "appId" || e.Country != "" && ext["cs6Label"] != "country" {
		t.Errorf("AppendCEF = %q: labels %q, %q, want appId, country", line, ext["cs1Label"], ext["cs6Label"])
	}
}

// TestAppendCEF_Escaping: a value ending in a pipe or a backslash must not
// glue the next key onto it (issue 37 item 9: the separator was left out
// after a value ending in '|').
func TestAppendCEF_Escaping(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ name, app, model string }{
		{"pipe at the end", "evil|", "Pixel"},
		{"backslash at the end", "evil\\", "Pixel\\"},
		{"equals and key", "a=b cs2=root", "x\\=y"},
		{"newlines", "a\nb\rc", "|"},
		{"spaces", " a ", "b  "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkCEF(t, alerts.Event{ID: "e1", AppID: tc.app, DeviceModel: tc.model, Type: "app.startup", OS: "android",
				Threats: []string{"hooking|x"}, ReceivedAt: at, OccurredAt: at})
		})
	}
}

// FuzzAppendCEF: whatever an app sends, a receiver parses back each
// extension value exactly.
func FuzzAppendCEF(f *testing.F) {
	f.Add("demo|", "Pixel\\", "android", "15|", "2.0\\", "DE", "app.startup", "hooking")
	f.Add("a=b", "c d=e", "", "", "", "", "x", "root\n")
	f.Fuzz(func(t *testing.T, app, model, osName, osVersion, appVersion, country, typ, threat string) {
		if threat == "" || strings.TrimSpace(osName+" "+osVersion) != osName+" "+osVersion && osName != "" && osVersion != "" {
			t.Skip()
		}
		at := time.Unix(1_800_000_000, 0)
		checkCEF(t, alerts.Event{ID: "e1", AppID: app, DeviceModel: model, OS: osName, OSVersion: osVersion,
			AppVersion: appVersion, Country: country, Type: typ, Threats: []string{threat}, ReceivedAt: at, OccurredAt: at})
	})
}
