package countries_test

import (
	"errors"
	"runtime"
	"testing"

	"threatview/collector/geoip/countries"
)

func mustShapes(tb testing.TB) *countries.Shapes {
	tb.Helper()
	s, err := countries.Default()
	if err != nil {
		tb.Fatalf("Default() = %v", err)
	}
	return s
}

// cities are grid cells (south-west corners at 0.1 degrees, as the
// collector stores them) with the country they lie in.
var cities = []struct {
	name     string
	lat, lon float64
	want     string
}{
	{"Paris", 48.8, 2.3, "FR"},
	{"Berlin", 52.5, 13.4, "DE"},
	{"New York", 40.7, -74.1, "US"},
	{"Sydney", -33.9, 151.2, "AU"},
	{"Tokyo", 35.6, 139.6, "JP"},
	{"Strasbourg, west of the Rhine", 48.6, 7.6, "FR"},
	{"Kehl side, east of the Rhine", 48.6, 8.0, "DE"},
	{"Maseru, Lesotho inside South Africa", -29.4, 27.4, "LS"},
	{"Bloemfontein", -29.1, 26.2, "ZA"},
	{"Chukotka east of 180", 65.5, -179.5, "RU"},
	{"Chukotka west of 180", 68.9, 179.9, "RU"},
	{"Fiji", -17.8, 178.0, "FJ"},
	{"Antarctica", -80, 0, "AQ"},
	{"South Pole", -89.9, 10, "AQ"},
	{"Singapore", 1.3, 103.8, "SG"},
	{"Ciudad Juarez, the cell's corner across the Rio Grande from El Paso", 31.7, -106.5, "MX"},
}

func TestShapes_Country(t *testing.T) {
	s := mustShapes(t)
	for _, c := range cities {
		t.Run(c.name, func(t *testing.T) {
			if got := s.Country(c.lat, c.lon); got != c.want {
				t.Errorf("Country(%v, %v) = %q, want %q", c.lat, c.lon, got, c.want)
			}
		})
	}
	for name, p := range map[string][2]float64{
		"North Atlantic": {45, -30},
		"Gulf of Guinea": {0, 0},
		"Off Bondi":      {-33.9, 151.3},
		"lat 91":         {91, 0},
		"lon -181":       {0, -181},
	} {
		t.Run(name, func(t *testing.T) {
			if got := s.Country(p[0], p[1]); got != "" {
				t.Errorf("Country(%v, %v) = %q, want none", p[0], p[1], got)
			}
		})
	}
}

func TestShapes_CountryAt(t *testing.T) {
	s := mustShapes(t)
	for _, c := range []struct {
		name           string
		lat, lon, grid float64
		want           string
	}{
		{"corner on land", 48.8, 2.3, 0.1, "FR"},
		{"corner at sea, coast within the cell", -33.9, 151.3, 0.1, "AU"},
		{"corner at sea, Lower New York Bay", 40.5, -74.0, 0.1, "US"},
		{"open sea", 45, -30, 0.1, ""},
		{"open sea, a coarse grid", 45, -30, 1, ""},
		{"no grid: the corner only", -33.9, 151.3, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := s.CountryAt(c.lat, c.lon, c.grid); got != c.want {
				t.Errorf("CountryAt(%v, %v, %v) = %q, want %q", c.lat, c.lon, c.grid, got, c.want)
			}
		})
	}
}

func TestShapes_Codes(t *testing.T) {
	got := mustShapes(t).Codes()
	if len(got) < 230 {
		t.Errorf("Codes() has %d countries, want the 50m set (over 230)", len(got))
	}
	for _, c := range got {
		if len(c) != 2 || c[0] < 'A' || c[0] > 'Z' || c[1] < 'A' || c[1] > 'Z' {
			t.Errorf("code %q is not ISO alpha-2", c)
		}
	}
}

func TestParse(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":          nil,
		"wrong magic":    []byte("TVC0" + string(make([]byte, 40))),
		"no countries":   append([]byte("TVC1"), make([]byte, 32)...),
		"truncated ring": append(append([]byte("TVC1"), header()...), 1, 'F', 'R', 1, 1, 3, 2, 2),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := countries.Parse(data); !errors.Is(err, countries.ErrFormat) {
				t.Errorf("Parse(%s) = %v, want ErrFormat", name, err)
			}
		})
	}
	t.Run("OK", func(t *testing.T) {
		// One square country, 10 units on a side from (0,0), one unit a degree.
		data := append(append([]byte("TVC1"), header()...), 1, 'X', 'X', 1, 1, 4, 0, 0, 20, 0, 0, 20, 19, 0)
		s, err := countries.Parse(data)
		if err != nil {
			t.Fatalf("Parse = %v", err)
		}
		if got := s.Country(5, 5); got != "XX" {
			t.Errorf("Country(5, 5) = %q, want XX", got)
		}
		if got := s.Country(11, 5); got != "" {
			t.Errorf("Country(11, 5) = %q, want none", got)
		}
	})
}

// header is lon0 = lat0 = 0 and one unit a degree.
func header() []byte {
	return []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}
}

func TestCache_CountryAt(t *testing.T) {
	s := mustShapes(t)
	c := countries.NewCache(s, 2)
	for i := 0; i < 3; i++ {
		for _, p := range cities[:4] {
			if got := c.CountryAt(p.lat, p.lon, 0.1); got != p.want {
				t.Fatalf("CountryAt(%v, %v) = %q, want %q", p.lat, p.lon, got, p.want)
			}
		}
	}
	hits, misses, slots := c.Stats()
	if slots != 2 || hits+misses != 12 || misses < 4 {
		t.Errorf("Stats() = %d hits, %d misses, %d slots; want 12 lookups, at least 4 misses, 2 slots", hits, misses, slots)
	}
	big := countries.NewCache(s, 1000)
	for i := 0; i < 3; i++ {
		for _, p := range cities {
			big.CountryAt(p.lat, p.lon, 0.1)
		}
	}
	if hits, misses, slots := big.Stats(); slots != 1024 || hits == 0 || misses > int64(len(cities)) {
		t.Errorf("Stats() = %d hits, %d misses, %d slots; want hits after the first pass, 1024 slots", hits, misses, slots)
	}
}

// BenchmarkShapes_Country is the uncached lookup of land cells around the
// world (the cost of a cache miss).
func BenchmarkShapes_Country(b *testing.B) {
	s := mustShapes(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := cities[i%len(cities)]
		s.Country(p.lat, p.lon)
	}
}

// BenchmarkShapes_CountryAtSea is the slowest path: a cell at sea near a
// coast, which scans for the nearest border.
func BenchmarkShapes_CountryAtSea(b *testing.B) {
	s := mustShapes(b)
	for b.Loop() {
		s.CountryAt(-33.9, 151.3, 0.1)
	}
}

// BenchmarkCache_CountryAt is the hot path: a cell seen before.
func BenchmarkCache_CountryAt(b *testing.B) {
	c := countries.NewCache(mustShapes(b), countries.DefaultCacheCells)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			p := cities[i%len(cities)]
			c.CountryAt(p.lat, p.lon, 0.1)
			i++
		}
	})
}

// BenchmarkParse loads the embedded shapes and reports the heap they hold.
func BenchmarkParse(b *testing.B) {
	var held uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s, err := countries.Parse(countries.Embedded())
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = after.HeapAlloc - before.HeapAlloc
		b.ReportMetric(float64(s.Bytes()), "shape-bytes")
		runtime.KeepAlive(s)
	}
	b.ReportMetric(float64(held), "heap-bytes")
}
