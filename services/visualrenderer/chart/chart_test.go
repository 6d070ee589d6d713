package chart_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"slices"
	"strings"
	"testing"
	"time"

	"threatview/visualrenderer"
	"threatview/visualrenderer/chart"
)

// monthHourly is a month of hourly counts for six keys, as a dashboard asks.
func monthHourly(keys int) visualrenderer.Stats {
	from := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	s := visualrenderer.Stats{Dimension: visualrenderer.Country, Granularity: visualrenderer.Hour, From: from, To: from.Add(744 * time.Hour)}
	for k := 0; k < keys; k++ {
		ser := visualrenderer.Series{Key: fmt.Sprintf("C%d", k)}
		for h := 0; h < 744; h += 1 + k%3 { // some buckets absent
			n := int64(10 + (h*7+k*13)%50)
			ser.Points = append(ser.Points, visualrenderer.Point{T: from.Add(time.Duration(h) * time.Hour), Count: n})
			ser.Total += n
		}
		s.Series = append(s.Series, ser)
		s.Total += ser.Total
	}
	return s
}

func TestRender(t *testing.T) {
	s := monthHourly(6)
	s.Series[0].Key = `<script>alert(1)</script>`
	t.Run("SVGEscapesKeys", func(t *testing.T) {
		var buf bytes.Buffer
		if err := chart.Render(&buf, s, "", chart.Options{Format: chart.SVG}); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(buf.Bytes(), []byte("<script")) {
			t.Fatal("a key reached the SVG unescaped")
		}
		if err := xml.Unmarshal(buf.Bytes(), new(struct{})); err != nil {
			t.Fatalf("not XML: %v", err)
		}
		for _, want := range []string{"Events per hour by country, all apps", "Time (UTC)", "Events per hour", "C1 ("} {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("SVG lacks %q", want)
			}
		}
	})
	t.Run("PNGSize", func(t *testing.T) {
		var buf bytes.Buffer
		if err := chart.Render(&buf, s, "app-1", chart.Options{Format: chart.PNG, Kind: chart.Bars, Width: 640, Height: 360}); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(&buf)
		if err != nil || img.Bounds().Dx() != 640 || img.Bounds().Dy() != 360 {
			t.Fatalf("PNG %v, %v; want 640x360", img.Bounds(), err)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		empty := visualrenderer.Stats{Dimension: visualrenderer.Threat, Granularity: visualrenderer.Day, From: s.From, To: s.From.AddDate(0, 0, 7)}
		for _, k := range []chart.Kind{chart.Lines, chart.Bars} {
			var buf bytes.Buffer
			if err := chart.Render(&buf, empty, "", chart.Options{Format: chart.SVG, Kind: k}); err != nil || !strings.Contains(buf.String(), "no events in this range") {
				t.Fatalf("empty %s chart: %v", k, err)
			}
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, o := range []chart.Options{{Format: "gif"}, {Format: chart.SVG, Kind: "pie"}, {Format: chart.PNG, Width: 10}, {Format: chart.PNG, Height: 5000}} {
			if err := chart.Render(new(bytes.Buffer), s, "", o); !errors.Is(err, chart.ErrInvalid) {
				t.Errorf("Render(%+v) = %v, want ErrInvalid", o, err)
			}
		}
	})
}

// BenchmarkRender draws a month of hourly counts for six keys at 800×400,
// as the dashboards' charts do, and reports the 95th percentile.
func BenchmarkRender(b *testing.B) {
	s := monthHourly(6)
	for _, bc := range []struct {
		name string
		o    chart.Options
	}{
		{"LinesSVG", chart.Options{Format: chart.SVG}},
		{"LinesPNG", chart.Options{Format: chart.PNG}},
		{"BarsSVG", chart.Options{Format: chart.SVG, Kind: chart.Bars}},
		{"BarsPNG", chart.Options{Format: chart.PNG, Kind: chart.Bars}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var ds []time.Duration
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				t0 := time.Now()
				if err := chart.Render(&buf, s, "", bc.o); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
			}
			slices.Sort(ds)
			b.ReportMetric(float64(ds[(len(ds)*95+99)/100-1].Microseconds())/1000, "p95-ms")
		})
	}
}
