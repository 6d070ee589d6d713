package visualrenderer_test

import (
	"errors"
	"net/url"
	"reflect"
	"testing"
	"time"

	"threatview/visualrenderer"
)

func TestParseQuery(t *testing.T) {
	now := time.Date(2026, 11, 20, 13, 45, 0, 0, time.UTC)
	day := func(m time.Month, d int) time.Time { return time.Date(2026, m, d, 0, 0, 0, 0, time.UTC) }
	tests := []struct {
		name, dim, query string
		want             visualrenderer.Query
	}{
		{"Defaults", "country", "", visualrenderer.Query{Dimension: "country", Granularity: "day", From: day(10, 22), To: day(11, 21)}},
		{"HourDefaults", "os", "granularity=hour&app_id=a", visualrenderer.Query{Dimension: "os", AppID: "a", Granularity: "hour",
			From: time.Date(2026, 11, 19, 14, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 20, 14, 0, 0, 0, time.UTC)}},
		{"WidenedToBuckets", "threat", "granularity=day&from=2026-11-01T10:00:00Z&to=2026-11-03T00:00:01Z&top=3",
			visualrenderer.Query{Dimension: "threat", Granularity: "day", From: day(11, 1), To: day(11, 4), Top: 3}},
		{"OffsetTimes", "device_model", "granularity=hour&from=2026-11-01T02:00:00%2B02:00&to=2026-11-01T03:00:00%2B02:00",
			visualrenderer.Query{Dimension: "device_model", Granularity: "hour", From: day(11, 1), To: day(11, 1).Add(time.Hour)}},
		{"MonthCap", "country", "granularity=month&from=2006-11-01T00:00:00Z&to=2026-11-01T00:00:00Z",
			visualrenderer.Query{Dimension: "country", Granularity: "month", From: time.Date(2006, 11, 1, 0, 0, 0, 0, time.UTC), To: day(11, 1)}},
		{"HourCap", "country", "granularity=hour&from=2026-10-01T00:00:00Z&to=2026-11-01T00:00:00Z",
			visualrenderer.Query{Dimension: "country", Granularity: "hour", From: day(10, 1), To: day(11, 1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := url.ParseQuery(tc.query)
			got, err := visualrenderer.ParseQuery(tc.dim, v, now)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseQuery(%q, %q) = %+v, %v; want %+v", tc.dim, tc.query, got, err, tc.want)
			}
			// The encoded query parses back to itself.
			again, err := visualrenderer.ParseQuery(tc.dim, got.Encode(), now)
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("ParseQuery(Encode()) = %+v, %v; want %+v", again, err, got)
			}
		})
	}

	bad := []struct{ name, dim, query string }{
		{"UnknownDimension", "city", ""},
		{"UnknownGranularity", "country", "granularity=week"},
		{"FromNotRFC3339", "country", "from=yesterday"},
		{"ToNotRFC3339", "country", "to=2026-11-01"},
		{"FromAfterTo", "country", "from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z"},
		{"Empty", "country", "from=2026-11-01T00:00:00Z&to=2026-11-01T00:00:00Z"},
		{"HourRangeTooLarge", "country", "granularity=hour&from=2026-10-01T00:00:00Z&to=2026-11-01T01:00:00Z"},
		{"DayRangeTooLarge", "country", "granularity=day&from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z"},
		{"MonthRangeTooLarge", "country", "granularity=month&from=1990-01-01T00:00:00Z&to=2026-01-01T00:00:00Z"},
		{"TopZero", "country", "top=0"},
		{"TopTooLarge", "country", "top=1001"},
		{"TopNotNumber", "country", "top=ten"},
		{"BeforeEpoch", "country", "granularity=month&from=1969-12-01T00:00:00Z&to=1970-02-01T00:00:00Z"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := url.ParseQuery(tc.query)
			if q, err := visualrenderer.ParseQuery(tc.dim, v, now); !errors.Is(err, visualrenderer.ErrInvalid) {
				t.Fatalf("ParseQuery(%q, %q) = %+v, %v; want ErrInvalid", tc.dim, tc.query, q, err)
			}
		})
	}
}

func TestSeries_Filled(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := visualrenderer.Series{Points: []visualrenderer.Point{{T: from.AddDate(0, 1, 0), Count: 4}, {T: from.AddDate(0, 3, 0), Count: 1}}}
	got := s.Filled(visualrenderer.Month, from, from.AddDate(0, 4, 0))
	want := []int64{0, 4, 0, 1}
	if len(got) != len(want) {
		t.Fatalf("Filled = %v, want counts %v", got, want)
	}
	for i, p := range got {
		if p.Count != want[i] || !p.T.Equal(from.AddDate(0, i, 0)) {
			t.Fatalf("Filled[%d] = %+v, want %d at %s", i, p, want[i], from.AddDate(0, i, 0))
		}
	}
}
