// Package flame renders a pprof CPU profile as a classic flame graph in
// plain SVG (no JavaScript), so it can be committed beside the docs and
// read in any browser or Markdown viewer: the root at the bottom, each
// frame as wide as its share of CPU time, callees stacked above callers.
package flame

import (
	"encoding/xml"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// Layout of the picture, in SVG user units.
const (
	width      = 1200.0
	frameH     = 17.0
	pad        = 10.0
	headH      = 52.0
	fontSize   = 12.0
	charW      = fontSize * 0.59 // average advance of the monospace font
	minShare   = 0.001           // frames narrower than 0.1% of the total are dropped
	rootName   = "all"
	fontFamily = "DejaVu Sans Mono, Menlo, Consolas, monospace"
)

// ErrNoProfile means SVG was given a nil profile.
var ErrNoProfile = errors.New("no profile")

// node is one frame: a function reached through one particular stack.
type node struct {
	name     string
	value    int64 // summed sample value (CPU nanoseconds for a CPU profile)
	samples  int64 // summed sample count
	children map[string]*node
}

func (n *node) child(name string) *node {
	c, ok := n.children[name]
	if !ok {
		c = &node{name: name, children: map[string]*node{}}
		n.children[name] = c
	}
	return c
}

// valueIndex picks the sample value to size frames by: CPU time when the
// profile has it, else the last value (pprof's default), and the index of
// the sample count when there is one (-1 otherwise).
func valueIndex(p *profile.Profile) (val, count int) {
	val, count = len(p.SampleType)-1, -1
	for i, st := range p.SampleType {
		switch st.Type {
		case "cpu":
			val = i
		case "samples":
			count = i
		}
	}
	return val, count
}

// tree folds the profile's stacks into a tree rooted at "all".
func tree(p *profile.Profile) (*node, string) {
	vi, ci := valueIndex(p)
	unit := ""
	if vi >= 0 && vi < len(p.SampleType) {
		unit = p.SampleType[vi].Unit
	}
	root := &node{name: rootName, children: map[string]*node{}}
	for _, s := range p.Sample {
		if vi < 0 || vi >= len(s.Value) || s.Value[vi] <= 0 {
			continue
		}
		v := s.Value[vi]
		var c int64 = 1
		if ci >= 0 && ci < len(s.Value) {
			c = s.Value[ci]
		}
		n := root
		n.value += v
		n.samples += c
		// Location[0] is the leaf; within a location Line[0] is the
		// innermost inlined function. Walk from the root outwards.
		for i := len(s.Location) - 1; i >= 0; i-- {
			loc := s.Location[i]
			if len(loc.Line) == 0 {
				n = n.child(fmt.Sprintf("0x%x", loc.Address))
				n.value += v
				n.samples += c
				continue
			}
			for j := len(loc.Line) - 1; j >= 0; j-- {
				name := "?"
				if f := loc.Line[j].Function; f != nil && f.Name != "" {
					name = f.Name
				}
				n = n.child(name)
				n.value += v
				n.samples += c
			}
		}
	}
	return root, unit
}

// frame is one rectangle to draw.
type frame struct {
	n     *node
	x, w  float64
	depth int
}

// layout places every frame at least minShare of the total wide; children
// are ordered by name, as in the classic flame graph, so that equal stacks
// line up between profiles.
func layout(root *node) ([]frame, int) {
	var out []frame
	maxDepth := 0
	scale := (width - 2*pad) / float64(root.value)
	minValue := int64(float64(root.value) * minShare)
	var walk func(n *node, x float64, depth int)
	walk = func(n *node, x float64, depth int) {
		out = append(out, frame{n: n, x: x, w: float64(n.value) * scale, depth: depth})
		maxDepth = max(maxDepth, depth)
		names := make([]string, 0, len(n.children))
		for name := range n.children {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			c := n.children[name]
			if c.value < minValue || c.value == 0 {
				x += float64(c.value) * scale // keep the gap: the parent's width stays honest
				continue
			}
			walk(c, x, depth+1)
			x += float64(c.value) * scale
		}
	}
	walk(root, pad, 0)
	return out, maxDepth
}

// SVG writes the flame graph of p with title as its heading. A profile
// without CPU time (an idle process) gives a graph that says so.
func SVG(p *profile.Profile, title string, w io.Writer) error {
	if p == nil {
		return ErrNoProfile
	}
	root, unit := tree(p)
	var frames []frame
	maxDepth := 0
	if root.value > 0 {
		frames, maxDepth = layout(root)
	}
	height := headH + float64(maxDepth+1)*frameH + 2*pad

	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="%s" font-size="%.0f">
`, width, height, width, height, fontFamily, fontSize)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%.0f" height="%.0f" fill="#fdf8ef"/>
`, width, height)
	fmt.Fprintf(&b, `<text x="%.1f" y="24" font-size="17" font-weight="bold" fill="#222">%s</text>
`, pad, esc(title))
	fmt.Fprintf(&b, `<text x="%.1f" y="42" fill="#555">%s; width = share of samples, callers below callees; hover a frame for its figures</text>
`, pad, esc(totalText(root, unit, p)))
	base := height - pad - frameH // y of the root frame
	if len(frames) == 0 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#555">no CPU samples: the process was idle while profiled</text>
`, pad, base+frameH-5)
	}
	for _, f := range frames {
		y := base - float64(f.depth)*frameH
		pct := 100 * float64(f.n.value) / float64(root.value)
		fmt.Fprintf(&b, `<g><title>%s (%d samples, %.2f%%)</title><rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s" rx="2"/>`,
			esc(f.n.name), f.n.samples, pct, f.x, y, f.w, frameH-1, colour(f.n.name))
		if label := fit(f.n.name, f.w); label != "" {
			fmt.Fprintf(&b, `<text x="%.2f" y="%.1f" fill="#000">%s</text>`, f.x+3, y+frameH-5, esc(label))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func totalText(root *node, unit string, p *profile.Profile) string {
	if unit == "" {
		unit = "units"
	}
	dur := ""
	if p.DurationNanos > 0 {
		dur = fmt.Sprintf(" over %.1f s of wall time", float64(p.DurationNanos)/1e9)
	}
	if unit == "nanoseconds" {
		return fmt.Sprintf("%.2f s CPU in %d samples%s", float64(root.value)/1e9, root.samples, dur)
	}
	return fmt.Sprintf("%d %s in %d samples%s", root.value, unit, root.samples, dur)
}

// fit truncates name to the characters that fit in a frame w wide, with
// ".." marking the cut; too narrow a frame gets no label.
func fit(name string, w float64) string {
	n := int((w - 6) / charW)
	r := []rune(name)
	switch {
	case n < 3:
		return ""
	case len(r) <= n:
		return name
	}
	return string(r[:n-2]) + ".."
}

// colour is a warm (red, orange, yellow) fill chosen by a hash of the name,
// so a function keeps its colour from one graph to the next.
func colour(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	r := 205 + v%50
	g := (v >> 8) % 230
	bl := (v >> 16) % 55
	return fmt.Sprintf("rgb(%d,%d,%d)", r, g, bl)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
