package countries

import "testing"

// TestShapes_Index checks that the bucket index drops no polygon: on a
// 1.5-degree sweep of the globe, Country answers what a scan of every
// polygon answers.
func TestShapes_Index(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	scan := func(lat, lon float64) string {
		x, y := (lon-s.lon0)/s.dlon, (lat-s.lat0)/s.dlat
		best := ""
		for i := range s.polys {
			if c := s.codes[s.polys[i].code]; s.contains(&s.polys[i], x, y) && (best == "" || c < best) {
				best = c
			}
		}
		return best
	}
	land := 0
	for lat := -89.95; lat < 90; lat += 1.5 {
		for lon := -179.95; lon < 180; lon += 1.5 {
			got, want := s.Country(lat, lon), scan(lat, lon)
			if got != want {
				t.Errorf("Country(%v, %v) = %q, want %q (scan of every polygon)", lat, lon, got, want)
			}
			if got != "" {
				land++
			}
		}
	}
	// About 29 % of the globe's surface is land, more of a lon/lat sweep
	// (the poles are land or sea ice drawn as Antarctica).
	if all := 120 * 240; land < all/5 || land > all/2 {
		t.Errorf("%d of %d points on land, want 20-50 %%", land, all)
	}
}

// TestShapes_Holes checks that a hole is not part of its polygon: Lesotho
// is a hole in South Africa's shape.
func TestShapes_Holes(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	lat, lon := -29.4, 27.4 // Maseru
	x, y := (lon-s.lon0)/s.dlon, (lat-s.lat0)/s.dlat
	inBox := 0
	for i := range s.polys {
		p := &s.polys[i]
		if s.codes[p.code] != "ZA" || x < float64(p.minX) || x > float64(p.maxX) || y < float64(p.minY) || y > float64(p.maxY) {
			continue
		}
		inBox++
		if p.last-p.first < 2 {
			t.Errorf("South Africa's polygon around Maseru has no hole")
		}
		if s.contains(p, x, y) {
			t.Errorf("South Africa's polygon contains Maseru")
		}
	}
	if inBox == 0 {
		t.Fatalf("no South African polygon around Maseru")
	}
}
