package main

import (
	"strings"
	"testing"
)

// TestWithKeptSections: a rewrite of the page keeps its hand-written
// sections (heading, then keptMarker) in order before "## Reproduce", drops
// the generated ones of the old page, and keeps each once however often the
// page is rewritten.
func TestWithKeptSections(t *testing.T) {
	old := "# Perf\n\n## Results\n\nold generated figures\n\n" +
		"## Analyst pages at scale\n" + keptMarker + "\n\n| page | p95 |\n|---|---|\n| Home | 143 ms |\n\n### Detail\n\nsub-section text\n\n" +
		"## Where a target is missed\n\nold misses\n\n" +
		"## Stall, measured\n" + keptMarker + "\n\n105 req/s p95 6.6 ms\n\n" +
		"## Reproduce\n\nmake bench\n"
	fresh := "# Perf\n\n## Results\n\nnew figures\n\n## Reproduce\n\nmake bench\n"

	page := withKeptSections(fresh, old)
	for _, want := range []string{"new figures", "| Home | 143 ms |", "### Detail\n\nsub-section text", "105 req/s p95 6.6 ms"} {
		if !strings.Contains(page, want) {
			t.Errorf("rewritten page lacks %q:\n%s", want, page)
		}
	}
	for _, gone := range []string{"old generated figures", "old misses"} {
		if strings.Contains(page, gone) {
			t.Errorf("rewritten page keeps the old generated %q:\n%s", gone, page)
		}
	}
	a, s, r := strings.Index(page, "## Analyst pages at scale"), strings.Index(page, "## Stall, measured"), strings.Index(page, "## Reproduce")
	if !(a >= 0 && a < s && s < r) {
		t.Errorf("kept sections not in their order before Reproduce (at %d, %d, %d):\n%s", a, s, r, page)
	}
	again := withKeptSections(fresh, page)
	if again != page {
		t.Errorf("a second rewrite changed the page:\n%s\nwant:\n%s", again, page)
	}
	if got := withKeptSections(fresh, "# Perf\n\n## Results\n\nx\n"); got != fresh {
		t.Errorf("a page without kept sections: got\n%s\nwant the fresh page unchanged", got)
	}
}
