package flame

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// testProfile builds a CPU profile from stacks written root first
// ("main;a;b") with a sample count each; every sample is 10 ms.
func testProfile(stacks map[string]int64) *profile.Profile {
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		DurationNanos: 5e9,
	}
	funcs := map[string]*profile.Function{}
	locs := map[string]*profile.Location{}
	loc := func(name string) *profile.Location {
		if l, ok := locs[name]; ok {
			return l
		}
		f := &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
		funcs[name] = f
		p.Function = append(p.Function, f)
		l := &profile.Location{ID: uint64(len(locs) + 1), Line: []profile.Line{{Function: f}}}
		locs[name] = l
		p.Location = append(p.Location, l)
		return l
	}
	for stack, n := range stacks {
		names := strings.Split(stack, ";")
		s := &profile.Sample{Value: []int64{n, n * 10e6}}
		for i := len(names) - 1; i >= 0; i-- { // leaf first
			s.Location = append(s.Location, loc(names[i]))
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

type svgDoc struct {
	Groups []struct {
		Title string `xml:"title"`
		Rect  struct {
			Width string `xml:"width,attr"`
			Y     string `xml:"y,attr"`
		} `xml:"rect"`
		Text string `xml:"text"`
	} `xml:"g"`
}

func render(t *testing.T, p *profile.Profile) (svgDoc, string) {
	t.Helper()
	var b strings.Builder
	if err := SVG(p, "collector <1500 req/s>", &b); err != nil {
		t.Fatalf("SVG = %v", err)
	}
	var doc svgDoc
	if err := xml.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatalf("SVG does not parse as XML: %v", err)
	}
	return doc, b.String()
}

func TestSVG_Widths(t *testing.T) {
	// 1000 samples: 600 in a (of which 450 in a;c), 399 in b, 1 in tiny
	// (0.1%, the narrowest kept); gc has samples but no CPU time.
	p := testProfile(map[string]int64{"main;a": 150, "main;a;c": 450, "main;b": 399, "main;tiny": 1, "gc": 0})
	doc, raw := render(t, p)
	widths := map[string]float64{}
	ys := map[string]float64{}
	for _, g := range doc.Groups {
		name := g.Title[:strings.Index(g.Title, " (")]
		w, err := strconv.ParseFloat(g.Rect.Width, 64)
		if err != nil {
			t.Fatalf("width %q: %v", g.Rect.Width, err)
		}
		y, _ := strconv.ParseFloat(g.Rect.Y, 64)
		widths[name], ys[name] = w, y
	}
	for name, share := range map[string]float64{"main": 1, "a": 0.6, "b": 0.399, "c": 0.45} {
		got := widths[name] / widths["all"]
		if math.Abs(got-share) > 0.001 {
			t.Errorf("width(%s)/width(all) = %.4f, want %.4f", name, got, share)
		}
	}
	if _, ok := widths["gc"]; ok {
		t.Error("a stack with no CPU time got a frame")
	}
	// Root at the bottom: a callee is drawn above (smaller y) its caller.
	if !(ys["c"] < ys["a"] && ys["a"] < ys["main"] && ys["main"] < ys["all"]) {
		t.Errorf("frames not stacked root-down: y = %v", ys)
	}
	for _, want := range []string{"c (450 samples, 45.00%)", "10.00 s CPU in 1000 samples", "collector &lt;1500 req/s&gt;"} {
		if !strings.Contains(raw, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if strings.Contains(raw, "<script") {
		t.Error("SVG has a script")
	}
}

func TestSVG_DropsNarrowFrames(t *testing.T) {
	p := testProfile(map[string]int64{"main;big": 100000, "main;narrow": 50})
	doc, _ := render(t, p)
	for _, g := range doc.Groups {
		if strings.HasPrefix(g.Title, "narrow ") {
			t.Errorf("frame at 0.05%% drawn: %q", g.Title)
		}
	}
}

func TestSVG_Idle(t *testing.T) {
	doc, raw := render(t, testProfile(nil))
	if len(doc.Groups) != 0 || !strings.Contains(raw, "no CPU samples") {
		t.Errorf("SVG of an empty profile = %s, want no frames and a note", raw)
	}
	if err := SVG(nil, "x", io.Discard); !errors.Is(err, ErrNoProfile) {
		t.Errorf("SVG(nil) = %v, want ErrNoProfile", err)
	}
}

func TestFit(t *testing.T) {
	tests := []struct {
		name string
		w    float64
		want string
	}{
		{"main.main", 200, "main.main"},
		{"runtime.mallocgc", 6 + 8*charW, "runtim.."},
		{"runtime.mallocgc", 10, ""},
	}
	for _, tt := range tests {
		if got := fit(tt.name, tt.w); got != tt.want {
			t.Errorf("fit(%q, %v) = %q, want %q", tt.name, tt.w, got, tt.want)
		}
	}
}
