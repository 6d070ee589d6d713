package countries

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// DefaultCacheCells is the number of cells a Cache remembers by default:
// 16,384 slots, about 0.9 MB when all are taken
// (8-byte slots and a 48-byte cell each).
const DefaultCacheCells = 1 << 14

// Cache remembers the country of recently seen grid cells in front of
// Shapes.CountryAt. It is direct-mapped: a fixed array of slots, each cell
// hashed to one slot, a new cell replacing the old one in its slot. So it
// never grows past its slots, never locks, and a lookup that hits costs a
// hash and an atomic load. Safe for concurrent use.
type Cache struct {
	shapes       *Shapes
	slots        []atomic.Pointer[cell]
	shift        uint
	hits, misses atomic.Int64
}

type cell struct {
	lat, lon, grid float64
	country        string
}

// NewCache returns a cache of slots cells (rounded up to a power of two,
// at least 1) in front of s.
func NewCache(s *Shapes, slots int) *Cache {
	n, b := 1, uint(0)
	for n < slots {
		n <<= 1
		b++
	}
	return &Cache{shapes: s, slots: make([]atomic.Pointer[cell], n), shift: 64 - b}
}

// CountryAt is Shapes.CountryAt, answered from the cache when the cell was
// looked up recently.
func (c *Cache) CountryAt(lat, lon, grid float64) string {
	// Round numbers (10.0, -80.0) have no low bits: fold the high bits
	// down, then take the top bits of a Fibonacci hash.
	h := math.Float64bits(lat) ^ bits.RotateLeft64(math.Float64bits(lon), 32)
	h = (h ^ h>>29) * 0x9e3779b97f4a7c15
	slot := &c.slots[h>>c.shift&(uint64(len(c.slots))-1)]
	if e := slot.Load(); e != nil && e.lat == lat && e.lon == lon && e.grid == grid {
		c.hits.Add(1)
		return e.country
	}
	c.misses.Add(1)
	country := c.shapes.CountryAt(lat, lon, grid)
	slot.Store(&cell{lat: lat, lon: lon, grid: grid, country: country})
	return country
}

// Stats returns the lookups answered from the cache and those that were
// not, and the number of slots (the bound).
func (c *Cache) Stats() (hits, misses int64, slots int) {
	return c.hits.Load(), c.misses.Load(), len(c.slots)
}
