// Package countries tells which country a point on the globe lies in, from
// Natural Earth's 1:50m admin-0 country shapes (public domain) embedded in
// the binary: no file, no network. countries.bin is written by
// tools/worldmap (`npm ci && npm run build`); its format is described there
// and in Parse.
//
// A lookup rejects polygons by a 2-degree bucket index and their bounding
// boxes, then casts a ray through the few polygons left. The loaded shapes
// take about 1.1 MB (Shapes.Bytes) and are parsed in about 9 ms; a lookup
// costs 0.1-9 µs by the size of the shapes it tests. Cache keeps the
// answers per grid cell so that the hot path rarely casts a ray at all.
package countries

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
)

//go:embed countries.bin
var embedded []byte

// Source names the embedded data, for logs and docs.
const Source = "Natural Earth 1:50m admin 0 countries (public domain) via world-atlas 2.0.2"

// bucketDeg is the side of the index's buckets in degrees.
const bucketDeg = 2

const (
	bucketsX = 360 / bucketDeg
	bucketsY = 180 / bucketDeg
)

// ring is a closed ring: pts[off : off+2*n] holds x, y pairs.
type ring struct{ off, n int32 }

// polygon is an outer ring and its holes, rings[first:last], with the
// bounding box of all of them in quantized units.
type polygon struct {
	minX, minY, maxX, maxY int32
	first, last            int32
	code                   uint16
}

// Shapes is the loaded country polygons. It is read-only after Parse and safe
// for concurrent use.
type Shapes struct {
	lon0, lat0, dlon, dlat float64
	codes                  []string
	pts                    []int32
	rings                  []ring
	polys                  []polygon
	// bucket b's polygons are index[start[b]:start[b+1]].
	start []int32
	index []uint16
}

var (
	defaultOnce   sync.Once
	defaultShapes *Shapes
	defaultErr    error
)

// Default returns the embedded shapes, parsed once.
func Default() (*Shapes, error) {
	defaultOnce.Do(func() { defaultShapes, defaultErr = Parse(embedded) })
	return defaultShapes, defaultErr
}

// ErrFormat is returned by Parse for data that is not a shapes file.
var ErrFormat = errors.New("countries: bad shapes file")

// Parse reads a shapes file: "TVC1"; float64 lon0, lat0, dlon, dlat
// (little-endian; lon = lon0 + x*dlon, lat = lat0 + y*dlat); uvarint
// countries; per country two ASCII bytes and uvarint polygons; per polygon
// uvarint rings (outer first, then holes); per ring uvarint points, then
// zigzag varint dx, dy per point from the previous one (the first from 0,
// 0). It returns an error wrapping ErrFormat when data is truncated or
// malformed.
func Parse(data []byte) (*Shapes, error) {
	if len(data) < 36 || !bytes.Equal(data[:4], []byte("TVC1")) {
		return nil, fmt.Errorf("%w: no TVC1 header", ErrFormat)
	}
	f := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(data[4+8*i:])) }
	s := &Shapes{lon0: f(0), lat0: f(1), dlon: f(2), dlat: f(3)}
	if !(s.dlon > 0 && s.dlat > 0) {
		return nil, fmt.Errorf("%w: scale %v, %v", ErrFormat, s.dlon, s.dlat)
	}
	r := reader{b: data[36:]}
	nc := r.uvarint()
	if nc > math.MaxUint16 {
		return nil, fmt.Errorf("%w: %d countries", ErrFormat, nc)
	}
	for c := uint64(0); c < nc && r.err == nil; c++ {
		code := string(r.take(2))
		s.codes = append(s.codes, code)
		np := r.uvarint()
		for p := uint64(0); p < np && r.err == nil; p++ {
			poly := polygon{first: int32(len(s.rings)), code: uint16(c), minX: math.MaxInt32, minY: math.MaxInt32, maxX: math.MinInt32, maxY: math.MinInt32}
			nr := r.uvarint()
			for k := uint64(0); k < nr && r.err == nil; k++ {
				n := r.uvarint()
				if n < 3 || n > uint64(len(r.b)) {
					r.fail("ring of %d points", n)
					break
				}
				rg := ring{off: int32(len(s.pts)), n: int32(n)}
				var x, y int64
				for i := uint64(0); i < n; i++ {
					x += r.varint()
					y += r.varint()
					if x < math.MinInt32 || x > math.MaxInt32 || y < math.MinInt32 || y > math.MaxInt32 {
						r.fail("point out of range")
					}
					s.pts = append(s.pts, int32(x), int32(y))
					poly.minX, poly.maxX = min(poly.minX, int32(x)), max(poly.maxX, int32(x))
					poly.minY, poly.maxY = min(poly.minY, int32(y)), max(poly.maxY, int32(y))
				}
				s.rings = append(s.rings, rg)
			}
			poly.last = int32(len(s.rings))
			if poly.last == poly.first {
				r.fail("polygon without rings")
			}
			s.polys = append(s.polys, poly)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	s.buildIndex()
	return s, nil
}

// buildIndex lists every polygon in each bucket its bounding box touches.
func (s *Shapes) buildIndex() {
	lists := make([][]uint16, bucketsX*bucketsY)
	for i, p := range s.polys {
		x0, y0 := s.bucket(s.lon(p.minX), s.lat(p.minY))
		x1, y1 := s.bucket(s.lon(p.maxX), s.lat(p.maxY))
		for by := y0; by <= y1; by++ {
			for bx := x0; bx <= x1; bx++ {
				b := by*bucketsX + bx
				lists[b] = append(lists[b], uint16(i))
			}
		}
	}
	s.start = make([]int32, len(lists)+1)
	for b, l := range lists {
		s.start[b+1] = s.start[b] + int32(len(l))
	}
	s.index = make([]uint16, 0, s.start[len(lists)])
	for _, l := range lists {
		s.index = append(s.index, l...)
	}
}

func (s *Shapes) lon(x int32) float64 { return s.lon0 + float64(x)*s.dlon }
func (s *Shapes) lat(y int32) float64 { return s.lat0 + float64(y)*s.dlat }

// bucket returns the index bucket of a point, clamped to the globe.
func (s *Shapes) bucket(lon, lat float64) (bx, by int) {
	bx = int(math.Floor((lon + 180) / bucketDeg))
	by = int(math.Floor((lat + 90) / bucketDeg))
	return min(max(bx, 0), bucketsX-1), min(max(by, 0), bucketsY-1)
}

// Country returns the ISO 3166-1 alpha-2 code of the country whose shape
// contains lat, lon, or "" when none does (sea, or a coast finer than the
// 1:50m shapes). Where shapes overlap, the first code in alphabetical
// order wins.
func (s *Shapes) Country(lat, lon float64) string {
	if !(lat >= -90 && lat <= 90 && lon >= -180 && lon <= 180) {
		return ""
	}
	x, y := (lon-s.lon0)/s.dlon, (lat-s.lat0)/s.dlat
	bx, by := s.bucket(lon, lat)
	b := by*bucketsX + bx
	for _, pi := range s.index[s.start[b]:s.start[b+1]] {
		if p := &s.polys[pi]; s.contains(p, x, y) {
			return s.codes[p.code]
		}
	}
	return ""
}

// contains reports whether the quantized point x, y lies in p: inside an
// odd number of its rings (the outer ring and not a hole; for Antarctica,
// whose rings go around the pole, between the pole cap and the coast).
func (s *Shapes) contains(p *polygon, x, y float64) bool {
	if x < float64(p.minX) || x > float64(p.maxX) || y < float64(p.minY) || y > float64(p.maxY) {
		return false
	}
	in := false
	for _, r := range s.rings[p.first:p.last] {
		if s.inRing(r, x, y) {
			in = !in
		}
	}
	return in
}

// inRing casts a ray from x, y towards +x and counts the edges it crosses.
func (s *Shapes) inRing(r ring, x, y float64) bool {
	pts := s.pts[r.off : r.off+2*r.n]
	in := false
	jx, jy := float64(pts[len(pts)-2]), float64(pts[len(pts)-1])
	for i := 0; i+1 < len(pts); i += 2 {
		ix, iy := float64(pts[i]), float64(pts[i+1])
		if (iy > y) != (jy > y) && x < (jx-ix)*(y-iy)/(jy-iy)+ix {
			in = !in
		}
		jx, jy = ix, iy
	}
	return in
}

// Nearest returns the country whose border lies closest to lat, lon when
// that distance is at most within degrees (measured on the lon/lat plane),
// else "". It scans every bounding box: it is the slow path, for points at
// sea.
func (s *Shapes) Nearest(lat, lon, within float64) string {
	best, bestD := -1, within*within
	for i := range s.polys {
		p := &s.polys[i]
		if lon < s.lon(p.minX)-within || lon > s.lon(p.maxX)+within || lat < s.lat(p.minY)-within || lat > s.lat(p.maxY)+within {
			continue
		}
		for _, r := range s.rings[p.first:p.last] {
			if d := s.ringDist2(r, lat, lon); d <= bestD {
				best, bestD = i, d
			}
		}
	}
	if best < 0 {
		return ""
	}
	return s.codes[s.polys[best].code]
}

// ringDist2 is the squared distance in degrees from lat, lon to r's edges.
func (s *Shapes) ringDist2(r ring, lat, lon float64) float64 {
	pts := s.pts[r.off : r.off+2*r.n]
	d := math.Inf(1)
	jx, jy := s.lon(pts[len(pts)-2]), s.lat(pts[len(pts)-1])
	for i := 0; i+1 < len(pts); i += 2 {
		ix, iy := s.lon(pts[i]), s.lat(pts[i+1])
		d = min(d, segDist2(lon, lat, jx, jy, ix, iy))
		jx, jy = ix, iy
	}
	return d
}

func segDist2(px, py, ax, ay, bx, by float64) float64 {
	dx, dy := bx-ax, by-ay
	t := 0.0
	if l := dx*dx + dy*dy; l > 0 {
		t = min(max(((px-ax)*dx+(py-ay)*dy)/l, 0), 1)
	}
	ex, ey := ax+t*dx-px, ay+t*dy-py
	return ex*ex + ey*ey
}

// CountryAt returns the country of the grid cell whose south-west corner is
// lat, lon and whose side is grid degrees: the country containing the
// corner (the point the collector stores), else the country whose border
// passes within one grid step of the cell's centre (a coastal cell whose
// corner is at sea), else "".
func (s *Shapes) CountryAt(lat, lon, grid float64) string {
	if c := s.Country(lat, lon); c != "" {
		return c
	}
	if grid <= 0 {
		return ""
	}
	return s.Nearest(lat+grid/2, lon+grid/2, grid)
}

// Codes returns the country codes present, sorted.
func (s *Shapes) Codes() []string {
	out := append([]string(nil), s.codes...)
	sort.Strings(out)
	return out
}

// Bytes returns the memory the loaded shapes hold (points, rings, polygons
// and index), not counting the embedded file itself.
func (s *Shapes) Bytes() int {
	return 4*cap(s.pts) + 8*cap(s.rings) + 28*cap(s.polys) + 4*cap(s.start) + 2*cap(s.index) + 18*cap(s.codes)
}

// reader decodes varints and remembers the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	r.skip(n)
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	r.skip(n)
	return v
}

// skip moves past a varint of n bytes; n <= 0 is Uvarint's and Varint's
// "truncated or too long" (their value is then 0).
func (r *reader) skip(n int) {
	if n <= 0 {
		r.fail("truncated varint")
		return
	}
	r.b = r.b[n:]
}

func (r *reader) take(n int) []byte {
	if len(r.b) < n {
		r.fail("truncated")
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
