// Package chart draws stats as SVG or PNG with gonum.org/v1/plot: a time
// series of the top keys (one line each, zero where a bucket is absent) or
// a horizontal bar chart of the top keys' totals. Text is Liberation Sans,
// embedded in the plotting library, so a PNG looks the same on every
// machine; colours are the Okabe-Ito palette, safe for colour-blind readers.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"regexp"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"threatview/visualrenderer"
)

// ErrInvalid means the chart options are out of bounds.
var ErrInvalid = errors.New("invalid chart options")

// Kind is the form of a chart.
type Kind string

// The kinds of chart.
const (
	Lines Kind = "line" // a time series of the top keys
	Bars  Kind = "bar"  // the top keys' totals
)

// Format is an output format.
type Format string

// The output formats.
const (
	SVG Format = "svg"
	PNG Format = "png"
)

// Size bounds, in pixels.
const (
	MinWidth, MaxWidth   = 200, 2400
	MinHeight, MaxHeight = 150, 1600
	DefaultWidth         = 800
	DefaultHeight        = 400
)

// Options say how to draw.
type Options struct {
	Kind          Kind
	Format        Format
	Width, Height int    // pixels; an SVG's user units are pixels too
	Title         string // blank: made from the stats
}

// Validate checks the options and fills defaults. Errors wrap ErrInvalid.
func (o *Options) Validate() error {
	if o.Kind == "" {
		o.Kind = Lines
	}
	if o.Kind != Lines && o.Kind != Bars {
		return fmt.Errorf("%w: kind %q (want line or bar)", ErrInvalid, o.Kind)
	}
	if o.Format != SVG && o.Format != PNG {
		return fmt.Errorf("%w: format %q (want svg or png)", ErrInvalid, o.Format)
	}
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.Height == 0 {
		o.Height = DefaultHeight
	}
	if o.Width < MinWidth || o.Width > MaxWidth {
		return fmt.Errorf("%w: width %d (want %d to %d pixels)", ErrInvalid, o.Width, MinWidth, MaxWidth)
	}
	if o.Height < MinHeight || o.Height > MaxHeight {
		return fmt.Errorf("%w: height %d (want %d to %d pixels)", ErrInvalid, o.Height, MinHeight, MaxHeight)
	}
	return nil
}

// Palette is Okabe and Ito's colour-blind-safe palette, black last.
var Palette = []color.Color{
	color.RGBA{0xE6, 0x9F, 0x00, 0xff}, // orange
	color.RGBA{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	color.RGBA{0x00, 0x9E, 0x73, 0xff}, // bluish green
	color.RGBA{0xF0, 0xE4, 0x42, 0xff}, // yellow
	color.RGBA{0x00, 0x72, 0xB2, 0xff}, // blue
	color.RGBA{0xD5, 0x5E, 0x00, 0xff}, // vermillion
	color.RGBA{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	color.RGBA{0x00, 0x00, 0x00, 0xff}, // black
}

// dashes tell lines apart where colours alone would not (more lines than
// colours, or a grey-scale print).
var dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}

var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// Label is how a key reads on a chart: the empty key reads "(none)".
func Label(key string) string {
	if key == "" {
		return "(none)"
	}
	if r := []rune(key); len(r) > 40 {
		return string(r[:39]) + "…"
	}
	return key
}

// Title returns the default title of a chart of s.
func Title(s visualrenderer.Stats, app string, kind Kind) string {
	who := "all apps"
	if app != "" {
		who = "app " + app
	}
	what := s.Dimension.Unit()
	if what == "events" {
		what = "Events"
	} else {
		what = "Threat sightings"
	}
	if kind == Bars {
		return fmt.Sprintf("%s by %s, %s, %s to %s UTC", what, lower(s.Dimension.Title()), who,
			s.From.Format("2006-01-02 15:04"), s.To.Format("2006-01-02 15:04"))
	}
	return fmt.Sprintf("%s per %s by %s, %s", what, s.Granularity, lower(s.Dimension.Title()), who)
}

func lower(s string) string {
	if s == "OS" {
		return s
	}
	b := []byte(s)
	if len(b) > 0 && 'A' <= b[0] && b[0] <= 'Z' {
		b[0] += 'a' - 'A'
	}
	return string(b)
}

// Render draws s as o says and writes the image to w.
func Render(w io.Writer, s visualrenderer.Stats, app string, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	p := plot.New()
	style(p)
	p.Title.Text = o.Title
	if p.Title.Text == "" {
		p.Title.Text = Title(s, app, o.Kind)
	}
	var err error
	if o.Kind == Bars {
		err = bars(p, s)
	} else {
		err = lines(p, s)
	}
	if err != nil {
		return err
	}
	width, height := vg.Length(o.Width), vg.Length(o.Height)
	switch o.Format {
	case PNG:
		// At 72 dpi one point is one pixel: the image is Width x Height.
		c := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(72), vgimg.UseBackgroundColor(color.White))
		p.Draw(draw.New(c))
		// Charts are mostly flat colour: the fastest compression is nearly
		// as small and takes a third of the time.
		err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(w, c.Image())
	default:
		c := vgsvg.New(width, height)
		p.Draw(draw.New(c))
		var buf bytes.Buffer
		if _, err = c.WriteTo(&buf); err == nil {
			_, err = w.Write(pixelSize(buf.Bytes()))
		}
	}
	if err != nil {
		return fmt.Errorf("render %s chart: %w", o.Format, err)
	}
	return nil
}

// svgSize matches the size the SVG canvas writes in points.
var svgSize = regexp.MustCompile(`<svg width="([0-9.]+)pt" height="([0-9.]+)pt"`)

// pixelSize states the SVG's size in pixels (its viewBox is in points, one
// a pixel here), so an <img> shows it at the size asked for.
func pixelSize(b []byte) []byte {
	loc := svgSize.FindSubmatchIndex(b)
	if loc == nil {
		return b
	}
	out := make([]byte, 0, len(b))
	out = append(out, b[:loc[0]]...)
	out = fmt.Appendf(out, `<svg width="%s" height="%s"`, b[loc[2]:loc[3]], b[loc[4]:loc[5]])
	return append(out, b[loc[1]:]...)
}

func style(p *plot.Plot) {
	p.Title.TextStyle.Font = font.From(sans, 14)
	p.Title.Padding = vg.Points(6)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 12)
		a.Tick.Label.Font = font.From(sans, 10)
	}
	p.Legend.TextStyle.Font = font.From(sans, 10)
	p.Legend.Top = true
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
}

// lineChunk is how many segments one drawn path holds at most.
const lineChunk = 16

func lines(p *plot.Plot, s visualrenderer.Stats) error {
	p.X.Label.Text = "Time (UTC)"
	p.Y.Label.Text = fmt.Sprintf("%s per %s", capital(s.Dimension.Unit()), s.Granularity)
	format := "2006-01-02\n15:04"
	switch s.Granularity {
	case visualrenderer.Day:
		format = "2006-01-02"
	case visualrenderer.Month:
		format = "2006-01"
	}
	p.X.Tick.Marker = plot.TimeTicks{Format: format, Time: func(t float64) time.Time { return time.Unix(int64(t), 0).UTC() }}
	p.X.Min = float64(s.From.Unix())
	p.X.Max = float64(s.To.Unix())
	p.Y.Min = 0
	p.Y.Tick.Marker = countTicks{}
	for i, ser := range s.Series {
		pts := ser.Filled(s.Granularity, s.From, s.To)
		xys := make(plotter.XYs, len(pts))
		for j, pt := range pts {
			xys[j] = plotter.XY{X: float64(pt.T.Unix()), Y: float64(pt.Count)}
		}
		// The raster canvas strokes a path in time that grows faster than
		// its length (a month of hours took seconds): draw pieces of at
		// most lineChunk points, each starting where the last one ended.
		var first *plotter.Line
		for lo := 0; lo < len(xys) || lo == 0; lo += lineChunk {
			hi := min(lo+lineChunk+1, len(xys))
			l, err := plotter.NewLine(xys[lo:hi])
			if err != nil {
				return fmt.Errorf("line for %q: %w", ser.Key, err)
			}
			l.Color = Palette[i%len(Palette)]
			l.Width = vg.Points(2)
			l.Dashes = dashes[(i/len(Palette))%len(dashes)]
			p.Add(l)
			if first == nil {
				first = l
			}
			if hi == len(xys) {
				break
			}
		}
		p.Legend.Add(fmt.Sprintf("%s (%d)", Label(ser.Key), ser.Total), first)
	}
	if len(s.Series) == 0 {
		p.Y.Max = 1
		p.Legend.Add("no events in this range")
	}
	return nil
}

func bars(p *plot.Plot, s visualrenderer.Stats) error {
	p.X.Label.Text = capital(s.Dimension.Unit())
	p.Y.Label.Text = s.Dimension.Title()
	p.X.Min = 0
	p.X.Tick.Marker = countTicks{}
	n := len(s.Series)
	if n == 0 {
		p.NominalY("no events in this range")
		p.X.Max = 1
		return nil
	}
	// Largest on top: the plot's Y axis grows upwards.
	values := make(plotter.Values, n)
	names := make([]string, n)
	for i, ser := range s.Series {
		values[n-1-i] = float64(ser.Total)
		names[n-1-i] = Label(ser.Key)
	}
	b, err := plotter.NewBarChart(values, vg.Points(14))
	if err != nil {
		return fmt.Errorf("bars: %w", err)
	}
	b.Horizontal = true
	b.Color = Palette[4]
	b.LineStyle.Width = 0
	p.Add(b)
	p.NominalY(names...)
	return nil
}

func capital(s string) string {
	b := []byte(s)
	if len(b) > 0 && 'a' <= b[0] && b[0] <= 'z' {
		b[0] -= 'a' - 'A'
	}
	return string(b)
}

// countTicks marks whole counts only (no "2.5 events"), with the default
// spacing.
type countTicks struct{}

func (countTicks) Ticks(min, max float64) []plot.Tick {
	if max-min < 4 {
		var out []plot.Tick
		for v := float64(int64(min)); v <= max; v++ {
			out = append(out, plot.Tick{Value: v, Label: strconv.FormatInt(int64(v), 10)})
		}
		return out
	}
	var out []plot.Tick
	for _, t := range (plot.DefaultTicks{}).Ticks(min, max) {
		if t.Label != "" {
			t.Label = strconv.FormatFloat(t.Value, 'f', -1, 64)
		}
		out = append(out, t)
	}
	return out
}
