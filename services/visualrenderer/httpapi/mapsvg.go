package httpapi

import (
	"bytes"
	"fmt"
	"html"
	"net/http"
	"sort"
	"strconv"

	"threatview/platform/httpserver"
	"threatview/visualrenderer"
	"threatview/visualrenderer/chart/worldmap"
)

// mapShades colour a country by its share of the largest count (5 steps).
var mapShades = []string{"#e8eef6", "#c6d6ec", "#93b3dc", "#5a88c6", "#2a5ea8", "#163d78"}

// mapSVG answers GET /v1/charts/map.svg: the map query's countries shaded
// on the world map (each with its counts as a tooltip) and the K-anonymous
// cells as dots.
func (h *Handler) mapSVG(w http.ResponseWriter, r *http.Request) {
	if h.inv == nil {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no map here", nil)
		return
	}
	q, err := visualrenderer.ParseRollupQuery(r.URL.Query(), h.now())
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	m, err := h.inv.Store.Map(r.Context(), q)
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	wm, err := worldmap.Load()
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	var max int64
	by := map[string]visualrenderer.MapCountry{}
	for _, c := range m.Countries {
		by[c.Country] = c
		if c.Events > max {
			max = c.Events
		}
	}
	codes := make([]string, 0, len(wm.Countries))
	for code := range wm.Countries {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	var b bytes.Buffer
	p := wm.Projection
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" role="img" aria-label="Events by country">`, p.Width, p.Height)
	fmt.Fprintf(&b, `<title>Events by country, %s to %s</title>`, q.From.Format("2006-01-02"), q.To.Format("2006-01-02"))
	for _, code := range codes {
		c := wm.Countries[code]
		fill := mapShades[0]
		label := html.EscapeString(c.Name) + ": no events"
		if n, ok := by[code]; ok && max > 0 {
			fill = mapShades[1+int(float64(len(mapShades)-2)*float64(n.Events)/float64(max)+0.5)]
			label = html.EscapeString(c.Name) + ": " + strconv.FormatInt(n.Events, 10) + " events, " + strconv.FormatInt(n.Devices, 10) + " devices"
		}
		fmt.Fprintf(&b, `<path d="%s" fill="%s" stroke="#ffffff" stroke-width="0.3"><title>%s</title></path>`, c.D, fill, label)
	}
	for _, c := range m.Cells {
		x, y := wm.Point(c.Lat, c.Lon)
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2" fill="#d9480f" fill-opacity="0.8"><title>%g, %g: %d events, %d devices</title></circle>`,
			x, y, c.Lat, c.Lon, c.Events, c.Devices)
	}
	b.WriteString(`</svg>`)
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Content-Security-Policy", svgCSP)
	w.Header().Set("Cache-Control", "private, max-age=10")
	_, _ = w.Write(b.Bytes())
}
