package plot

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

func TestChart_WriteSVG_ValidXML(t *testing.T) {
	c := Chart{
		Title: "Latency <p95> & friends", XLabel: "req/s", YLabel: "ms",
		Series: []Series{
			{Name: "median", Points: []Point{{105, 2}, {500, 3}, {1000, 5}}},
			{Name: "95th pct", Points: []Point{{105, 4}, {500, 8}, {1000, 25}}},
			{Name: "empty"},
		},
		Threshold: 20, ThreshTxt: "p95 target",
	}
	var b strings.Builder
	if err := c.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(b.String()))
	polylines, root := 0, ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, b.String())
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
				if se.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace = %q", se.Name.Space)
				}
			}
			if se.Name.Local == "polyline" {
				polylines++
			}
		}
	}
	if root != "svg" {
		t.Errorf("root element = %q, want svg", root)
	}
	if polylines != 2 {
		t.Errorf("%d polylines, want 2 (one per non-empty series)", polylines)
	}
	if !strings.Contains(b.String(), "Latency &lt;p95&gt; &amp; friends") {
		t.Error("title not escaped")
	}
}

func TestNiceCeil(t *testing.T) {
	tests := []struct{ in, want float64 }{{0, 1}, {0.3, 1}, {3, 5}, {12, 20}, {20, 20}, {2100, 5000}, {101, 200}}
	for _, tt := range tests {
		if got := niceCeil(tt.in); got != tt.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
