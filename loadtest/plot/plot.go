// Package plot draws line charts as SVG: latency percentiles against request
// rate. It is small on purpose; the charts have a handful of series and
// points.
package plot

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Point is one (x, y) value.
type Point struct{ X, Y float64 }

// Series is one line.
type Series struct {
	Name   string
	Points []Point
}

// Chart is a line chart with an optional horizontal threshold line.
type Chart struct {
	Title     string
	XLabel    string
	YLabel    string
	Series    []Series
	Threshold float64 // drawn when > 0
	ThreshTxt string
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"}

// WriteSVG renders c as a standalone SVG document.
func (c Chart) WriteSVG(w io.Writer) error {
	const (
		width, height = 720.0, 420.0
		left, right   = 70.0, 150.0
		top, bottom   = 40.0, 50.0
	)
	pw, ph := width-left-right, height-top-bottom
	xmax, ymax := 0.0, c.Threshold
	for _, s := range c.Series {
		for _, p := range s.Points {
			xmax = math.Max(xmax, p.X)
			ymax = math.Max(ymax, p.Y)
		}
	}
	xmax, ymax = niceCeil(xmax), niceCeil(ymax*1.1)
	sx := func(x float64) float64 { return left + x/xmax*pw }
	sy := func(y float64) float64 { return top + ph - y/ymax*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%g" height="%g" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%g" y="22" text-anchor="middle" font-size="15">%s</text>`+"\n", left+pw/2, esc(c.Title))
	// Grid and ticks.
	for i := 0; i <= 5; i++ {
		xv, yv := xmax*float64(i)/5, ymax*float64(i)/5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, sy(yv), left+pw, sy(yv))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, sy(yv)+4, num(yv))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", sx(xv), top, sx(xv), top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", sx(xv), top+ph+16, num(xv))
	}
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">%s</text>`+"\n", left+pw/2, height-10, esc(c.XLabel))
	fmt.Fprintf(&b, `<text x="16" y="%g" text-anchor="middle" transform="rotate(-90 16 %g)">%s</text>`+"\n", top+ph/2, top+ph/2, esc(c.YLabel))
	if c.Threshold > 0 {
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#d62728" stroke-dasharray="6 4"/>`+"\n", left, sy(c.Threshold), left+pw, sy(c.Threshold))
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" fill="#d62728">%s</text>`+"\n", left+4, sy(c.Threshold)-4, esc(c.ThreshTxt))
	}
	for i, s := range c.Series {
		col := palette[i%len(palette)]
		if len(s.Points) > 0 {
			pts := make([]string, len(s.Points))
			for j, p := range s.Points {
				pts[j] = fmt.Sprintf("%.1f,%.1f", sx(p.X), sy(p.Y))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
			for _, p := range s.Points {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", sx(p.X), sy(p.Y), col)
			}
		}
		ly := top + 10 + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2"/>`+"\n", left+pw+12, ly, left+pw+32, ly, col)
		fmt.Fprintf(&b, `<text x="%g" y="%g">%s</text>`+"\n", left+pw+38, ly+4, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func num(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func esc(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")
	return r.Replace(s)
}
