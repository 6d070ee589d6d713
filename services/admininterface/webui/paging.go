package webui

import (
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Page sizes of the long lists.
const (
	// appsPerPage is how many apps the apps list shows at a time.
	appsPerPage = 25
	// appTokensPerPage is how many tokens an app's page shows at a time.
	appTokensPerPage = 50
	// filterMax bounds the apps filter (an app id is at most 64 characters).
	filterMax = 64
)

// errBadPage is a page parameter that is not a whole number from 1.
var errBadPage = errors.New("the page must be a whole number from 1")

// parsePage reads a 1-based page number; blank is page 1. A page past the
// last is clamped by pageOf, not refused: lists shrink between two clicks.
func parsePage(s string) (int, error) {
	if s == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1_000_000 {
		return 0, errBadPage
	}
	return n, nil
}

// pager is one page of a list: which items it shows and the links to the
// pages either side (blank when there is none).
type pager struct {
	Page, Pages int
	Total       int
	// More is set when Total is a lower bound (the list was cut off).
	More     bool
	From, To int // 1-based positions of the first and last item shown; 0 when empty
	Prev     string
	Next     string
	lo, hi   int // slice bounds
}

// pageOf cuts a list of total items into pages of size, clamps page to
// the last one, and builds the Previous/Next links with link(page).
func pageOf(total, size, page int, link func(page int) string) pager {
	pages := max(1, (total+size-1)/size)
	page = min(max(page, 1), pages)
	p := pager{Page: page, Pages: pages, Total: total}
	p.lo = min((page-1)*size, total)
	p.hi = min(p.lo+size, total)
	if p.hi > p.lo {
		p.From, p.To = p.lo+1, p.hi
	}
	if page > 1 {
		p.Prev = link(page - 1)
	}
	if page < pages {
		p.Next = link(page + 1)
	}
	return p
}

// appIDRe is what the tokens service accepts as an app id (and so what
// the apps filter and an app's page accept).
var appIDRe = regexp.MustCompile(`^[A-Za-z0-9._\-]+$`)

// errBadFilter is a filter that cannot be part of an app id.
var errBadFilter = errors.New("the filter is part of an app id: up to 64 letters, digits, '.', '_' or '-'")

// parseFilter reads the apps filter: blank, or part of an app id.
func parseFilter(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	if len(s) > filterMax || !appIDRe.MatchString(s) {
		return "", errBadFilter
	}
	return s, nil
}

// tokensURL is the apps list's address with filter q at page.
func tokensURL(q string, page int) string {
	v := url.Values{}
	if q != "" {
		v.Set("q", q)
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if len(v) == 0 {
		return "/tokens"
	}
	return "/tokens?" + v.Encode()
}

// appURL is the address of an app's page.
func appURL(appID string) string { return "/tokens/apps/" + url.PathEscape(appID) }
