// Package worldmap embeds the world map the map chart draws: Natural Earth
// 1:110m countries as projected SVG paths per ISO 3166-1 alpha-2 code
// (tools/worldmap writes worldmap.json).
package worldmap

import (
	_ "embed"
	"encoding/json"
	"sync"
)

//go:embed worldmap.json
var raw []byte

// Map is the decoded file.
type Map struct {
	Source     string `json:"source"`
	Projection struct {
		Width          float64 `json:"width"`
		Height         float64 `json:"height"`
		LonLeft        float64 `json:"lon_left"`
		LatTop         float64 `json:"lat_top"`
		UnitsPerDegree float64 `json:"units_per_degree"`
	} `json:"projection"`
	Countries map[string]Country `json:"countries"`
}

// Country is one country's shape.
type Country struct {
	Name string  `json:"name"`
	D    string  `json:"d"`
	CX   float64 `json:"cx"`
	CY   float64 `json:"cy"`
}

// Point projects a coordinate onto the map.
func (m *Map) Point(lat, lon float64) (x, y float64) {
	p := m.Projection
	return (lon - p.LonLeft) * p.UnitsPerDegree, (p.LatTop - lat) * p.UnitsPerDegree
}

var load = sync.OnceValues(func() (*Map, error) {
	var m Map
	err := json.Unmarshal(raw, &m)
	return &m, err
})

// Load returns the map (decoded once).
func Load() (*Map, error) { return load() }
