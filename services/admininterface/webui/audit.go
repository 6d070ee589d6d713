package webui

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"threatview/admininterface"
	"threatview/admininterface/upstream"
	"threatview/platform/wire"
)

// Audit search limits. The audit logger has no outcome filter, so the UI
// filters outcomes itself, reading at most scanMax records for one page.
const (
	auditDefaultLimit = 50
	auditPageMax      = 1000
	scanMax           = 20000
)

// auditForm is the search as the form holds it.
type auditForm struct {
	From, To, Actor, Action, App, Outcome string
	Limit                                 int
	Cursor                                string
}

// localTime is the datetime-local input format (seconds optional), read as UTC.
func parseLocal(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date and time", s)
}

// parseAuditForm reads and checks a search; the error says which field is
// wrong.
func parseAuditForm(q url.Values, now time.Time) (auditForm, upstream.AuditQuery, error) {
	f := auditForm{
		From: q.Get("from"), To: q.Get("to"), Actor: strings.TrimSpace(q.Get("actor")),
		Action: strings.TrimSpace(q.Get("action")), App: strings.TrimSpace(q.Get("app")),
		Outcome: strings.ToLower(strings.TrimSpace(q.Get("outcome"))), Limit: auditDefaultLimit, Cursor: q.Get("cursor"),
	}
	if f.From == "" && f.To == "" && q.Get("searched") == "" {
		f.From = now.Add(-24 * time.Hour).UTC().Format("2006-01-02T15:04:05")
	}
	aq := upstream.AuditQuery{Actor: f.Actor, Action: f.Action, AppID: f.App, Cursor: f.Cursor}
	var err error
	if f.From != "" {
		if aq.From, err = parseLocal(f.From); err != nil {
			return f, aq, fmt.Errorf("From: %w", err)
		}
	}
	if f.To != "" {
		if aq.To, err = parseLocal(f.To); err != nil {
			return f, aq, fmt.Errorf("To: %w", err)
		}
	}
	if !aq.From.IsZero() && !aq.To.IsZero() && !aq.From.Before(aq.To) {
		return f, aq, errors.New("To must be after From")
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > auditPageMax {
			return f, aq, fmt.Errorf("Per page must be a number from 1 to %d", auditPageMax)
		}
		f.Limit = n
	}
	aq.Limit = f.Limit
	if _, err := outcomeMatcher(f.Outcome); err != nil {
		return f, aq, err
	}
	return f, aq, nil
}

// outcomeMatcher reads "202", "2xx" or blank.
func outcomeMatcher(s string) (func(int) bool, error) {
	switch {
	case s == "":
		return func(int) bool { return true }, nil
	case len(s) == 3 && s[1:] == "xx" && s[0] >= '1' && s[0] <= '5':
		c := int(s[0] - '0')
		return func(o int) bool { return o/100 == c }, nil
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			return nil, errors.New("Outcome must be an HTTP status (202) or a class (4xx)")
		}
		return func(o int) bool { return o == n }, nil
	}
}

// values renders the search (without cursor) for links.
func (f auditForm) values() url.Values {
	v := url.Values{"searched": {"1"}}
	for k, s := range map[string]string{"from": f.From, "to": f.To, "actor": f.Actor, "action": f.Action, "app": f.App, "outcome": f.Outcome} {
		if s != "" {
			v.Set(k, s)
		}
	}
	v.Set("limit", strconv.Itoa(f.Limit))
	return v
}

type auditData struct {
	Form     auditForm
	Query    template.URL // the search as a query string (built by url.Values.Encode)
	Searched bool
	Records  []wire.AuditRecord
	Scanned  int
	First    template.URL
	Next     template.URL
}

func (s *Server) auditPage(w http.ResponseWriter, r *http.Request) {
	f, aq, err := parseAuditForm(r.URL.Query(), s.now())
	d := auditData{Form: f, Query: template.URL(f.values().Encode())}
	if err != nil {
		s.render(w, r, http.StatusBadRequest, "audit", "Audit trail", d, "", err.Error())
		return
	}
	match, _ := outcomeMatcher(f.Outcome)
	token := sessionOf(r).Token
	d.Searched = true
	for {
		p, err := s.deps.Audit.Query(r.Context(), token, aq)
		if err != nil {
			if errors.Is(err, admininterface.ErrInvalid) {
				s.render(w, r, http.StatusBadRequest, "audit", "Audit trail", d, "", err.Error())
				return
			}
			s.upstreamFail(w, r, "Searching the audit trail", err)
			return
		}
		for _, rec := range p.Records {
			if match(rec.Outcome) {
				d.Records = append(d.Records, rec)
			}
		}
		if f.Outcome != "" {
			d.Scanned += len(p.Records)
		}
		aq.Cursor = p.Next
		if p.Next == "" || len(d.Records) >= f.Limit || d.Scanned >= scanMax {
			break
		}
	}
	if aq.Cursor != "" {
		v := f.values()
		v.Set("cursor", aq.Cursor)
		d.Next = template.URL(v.Encode())
	}
	if f.Cursor != "" {
		d.First = d.Query
	}
	s.render(w, r, http.StatusOK, "audit", "Audit trail", d, "", "")
}

// auditExport streams every record of the search, page by page from the
// audit logger, so memory holds one page at most whatever the size. It is
// authorised once, at its start (see ExportKey).
func (s *Server) auditExport(format string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f, aq, err := parseAuditForm(r.URL.Query(), s.now())
		if err != nil {
			s.fail(w, r, http.StatusBadRequest, "invalid_query", err.Error())
			return
		}
		match, _ := outcomeMatcher(f.Outcome)
		token := sessionOf(r).Token
		aq.Limit = auditPageMax
		aq.Cursor = ""
		// Ask for the first page before answering, so a refused search
		// still gets a proper error status. That page, read with the
		// person's token, authorises the export: the token lives 5 minutes
		// at most and an export may run longer, so the later pages of the
		// same search are read with the export key when there is one.
		p, err := s.deps.Audit.Query(r.Context(), token, aq)
		if err != nil {
			s.upstreamFail(w, r, "Exporting the audit trail", err)
			return
		}
		if s.opts.ExportKey != "" {
			token = s.opts.ExportKey
		}
		name := "audit-" + s.now().UTC().Format("20060102T150405Z") + "." + format
		if format == "csv" {
			w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		} else {
			w.Header().Set("Content-Type", "application/x-ndjson")
		}
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		rc := http.NewResponseController(w)
		var cw *csv.Writer
		enc := json.NewEncoder(w)
		if format == "csv" {
			cw = csv.NewWriter(w)
			_ = cw.Write([]string{"id", "time", "action", "actor_token_id", "actor_app_id", "resource", "outcome", "event_count", "client_ip", "user_agent", "request_id", "body_sha256"})
		}
		rows := 0
		for {
			// The server's write timeout is for pages; an export may run
			// longer, so each page gets its own deadline.
			_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			for _, rec := range p.Records {
				if !match(rec.Outcome) {
					continue
				}
				rows++
				if cw != nil {
					_ = cw.Write(csvCells(rec.ID, rec.Time.UTC().Format(time.RFC3339Nano), rec.Action, rec.ActorToken, rec.ActorApp,
						rec.Resource, strconv.Itoa(rec.Outcome), strconv.Itoa(rec.EventCount), rec.ClientIP, rec.UserAgent, rec.RequestID, rec.BodySHA256))
				} else if err := enc.Encode(rec); err != nil {
					return // the client left
				}
			}
			if cw != nil {
				cw.Flush()
				if cw.Error() != nil {
					return
				}
			}
			_ = rc.Flush()
			if p.Next == "" {
				break
			}
			aq.Cursor = p.Next
			if p, err = s.deps.Audit.Query(r.Context(), token, aq); err != nil {
				// Headers are gone; cut the stream so the file is visibly
				// incomplete rather than silently short.
				s.log.Error("audit export failed mid-stream", "rows", rows, "err", err)
				panic(http.ErrAbortHandler)
			}
		}
		s.log.Info("audit exported", "by", sessionOf(r).User.Username, "format", format, "rows", rows)
	}
}

// csvCells returns the cells of one CSV row, each made safe to open in a
// spreadsheet: the audit trail holds what strangers sent (the collector
// audits refused requests with their User-Agent), and a cell that starts
// with =, +, -, @, tab or carriage return is read as a formula by Excel,
// LibreOffice and Google Sheets. Such a cell gets a leading apostrophe
// (OWASP's advice), which the spreadsheet shows as text.
func csvCells(cells ...string) []string {
	for i, c := range cells {
		if c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
			cells[i] = "'" + c
		}
	}
	return cells
}

func isInvalid(err error) bool { return errors.Is(err, admininterface.ErrInvalid) }

func isForbidden(err error) bool { return errors.Is(err, admininterface.ErrForbidden) }
