package webui

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
	"sync"

	"threatview/admininterface/web"
)

// worldMap is the embedded Natural Earth 110m country shapes
// (tools/worldmap), projected once: SVG path data per ISO alpha-2 code.
type worldMap struct {
	Projection struct {
		Width          float64 `json:"width"`
		Height         float64 `json:"height"`
		LonLeft        float64 `json:"lon_left"`
		LatTop         float64 `json:"lat_top"`
		UnitsPerDegree float64 `json:"units_per_degree"`
	} `json:"projection"`
	Countries map[string]struct {
		Name string  `json:"name"`
		D    string  `json:"d"`
		CX   float64 `json:"cx"`
		CY   float64 `json:"cy"`
	} `json:"countries"`
	codes []string
}

var loadWorld = sync.OnceValues(func() (*worldMap, error) {
	b, err := web.Static.ReadFile("static/worldmap.json")
	if err != nil {
		return nil, err
	}
	var m worldMap
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("worldmap.json: %w", err)
	}
	for c := range m.Countries {
		m.codes = append(m.codes, c)
	}
	sort.Strings(m.codes)
	return &m, nil
})

// countryName is the map's English name for an alpha-2 code, or the code.
func countryName(code string) string {
	if m, err := loadWorld(); err == nil {
		if c, ok := m.Countries[strings.ToUpper(code)]; ok {
			return c.Name
		}
	}
	if code == "" {
		return "Unknown"
	}
	return code
}

// mapCount is one country's number on a map.
type mapCount struct {
	Code, Name string
	Count      int64
	Devices    int64
	Href       string
}

// mapPoint is one location cell's circle.
type mapPoint struct {
	Lat, Lon float64
	Count    int64
}

// drawMap returns an SVG world map: each country filled by its count (five
// classes), a circle sized by count at each counted country (and location
// cell), each counted country a link (href) with a <title> tooltip. The
// script (analyst.js) adds zoom, pan and a richer tooltip; without it the
// map is still a picture with titles, and the table beside it holds the
// same numbers.
func drawMap(id, label string, counts []mapCount, points []mapPoint) template.HTML {
	m, err := loadWorld()
	if err != nil {
		return template.HTML("<p class=\"error\">The world map is unavailable.</p>")
	}
	var max int64
	by := map[string]mapCount{}
	for _, c := range counts {
		by[strings.ToUpper(c.Code)] = c
		max = maxInt(max, c.Count)
	}
	for _, p := range points {
		max = maxInt(max, p.Count)
	}
	w, h := m.Projection.Width, m.Projection.Height
	var b strings.Builder
	fmt.Fprintf(&b, `<div class="map" id="%s" data-map><div class="map-tools" role="group" aria-label="Map zoom">`+
		`<button type="button" data-zoom="in" aria-label="Zoom in">+</button><button type="button" data-zoom="out" aria-label="Zoom out">−</button>`+
		`<button type="button" data-zoom="reset">Reset</button></div>`, template.HTMLEscapeString(id))
	fmt.Fprintf(&b, `<svg viewBox="0 0 %g %g" role="img" aria-label="%s" tabindex="0" data-w="%g" data-h="%g"><g class="map-layer">`,
		w, h, template.HTMLEscapeString(label), w, h)
	b.WriteString(`<rect class="sea" x="-2000" y="-2000" width="5000" height="5000"/>`)
	for _, code := range m.codes {
		c := m.Countries[code]
		cnt, ok := by[code]
		class := "c0"
		if ok && cnt.Count > 0 && max > 0 {
			class = fmt.Sprintf("c%d", 1+int(4*math.Log1p(float64(cnt.Count))/math.Log1p(float64(max)+0.0001)))
			if class == "c5" {
				class = "c4"
			}
		}
		if ok && cnt.Count > 0 {
			tip := fmt.Sprintf("%s: %d events", c.Name, cnt.Count)
			fmt.Fprintf(&b, `<a href="%s" data-tip="%s" data-country="%s"><path class="%s" d="%s"><title>%s</title></path></a>`,
				template.HTMLEscapeString(cnt.Href), template.HTMLEscapeString(tip), code, class, c.D, template.HTMLEscapeString(tip))
		} else {
			fmt.Fprintf(&b, `<path class="%s" d="%s" data-country="%s"/>`, class, c.D, code)
		}
	}
	radius := func(n int64) float64 { return 2 + 14*math.Sqrt(float64(n)/float64(max)) }
	for _, code := range m.codes {
		if cnt, ok := by[code]; ok && cnt.Count > 0 {
			c := m.Countries[code]
			fmt.Fprintf(&b, `<circle class="dot" cx="%.1f" cy="%.1f" r="%.1f" aria-hidden="true"/>`, c.CX, c.CY, radius(cnt.Count))
		}
	}
	for _, p := range points {
		x := (p.Lon - m.Projection.LonLeft) * m.Projection.UnitsPerDegree
		y := (m.Projection.LatTop - p.Lat) * m.Projection.UnitsPerDegree
		fmt.Fprintf(&b, `<circle class="cell" cx="%.1f" cy="%.1f" r="%.1f"><title>%.1f, %.1f: %d events</title></circle>`, x, y, radius(p.Count), p.Lat, p.Lon, p.Count)
	}
	b.WriteString(`</g></svg><p class="map-tip" role="status" aria-live="polite" hidden></p></div>`)
	return template.HTML(b.String()) //nolint:gosec // every value above is escaped or a number
}

func maxInt(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// bars draws counts over time as an SVG bar chart (a tooltip with the
// exact number on each bar); the table beside it holds the same numbers.
func bars(label string, rows []KeyCount) template.HTML {
	var max int64
	for _, r := range rows {
		max = maxInt(max, r.Count)
	}
	if len(rows) == 0 || max == 0 {
		return template.HTML(`<p class="note">No events in this period.</p>`)
	}
	const w, h = 600.0, 160.0
	bw := math.Min(w/float64(len(rows)), 48)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="bars" viewBox="0 0 %g %g" role="img" aria-label="%s">`, w, h+16, template.HTMLEscapeString(label))
	for i, r := range rows {
		bh := h * float64(r.Count) / float64(max)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %d</title></rect>`,
			float64(i)*bw+1, h-bh, math.Max(bw-2, 1), bh, template.HTMLEscapeString(r.Key), r.Count)
	}
	fmt.Fprintf(&b, `<text x="0" y="%g">%s</text><text x="%g" y="%g" text-anchor="end">%s</text></svg>`,
		h+14, template.HTMLEscapeString(rows[0].Key), w, h+14, template.HTMLEscapeString(rows[len(rows)-1].Key))
	return template.HTML(b.String()) //nolint:gosec // escaped
}

// thousands prints n with thin spaces between thousands.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "\u202f" + s[i:]
	}
	return s
}
