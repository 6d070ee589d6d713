package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"threatview/admininterface"
	"threatview/admininterface/broker"
	"threatview/platform/wire"
)

// dlqQueue is one dead-letter queue the UI manages; only these, never a
// destination named by the request.
type dlqQueue struct {
	Key    string // in URLs
	Name   string // the DLQ's name
	Dest   string // the DLQ's destination
	Target string // where replays go
	target string
}

// dlqQueuesFor lists the dead-letter queue of each events queue (one per
// shard: a replay goes back to its own shard's queue, so an app stays on
// one processor) and the audit queue's.
func dlqQueuesFor(events []string) []dlqQueue {
	var out []dlqQueue
	for i, q := range events {
		key := "events"
		if len(events) > 1 {
			key += "-" + strconv.Itoa(i)
		}
		out = append(out, deadLetters(key, q))
	}
	return append(out, deadLetters("audit", wire.AuditQueue))
}

func deadLetters(key, queue string) dlqQueue {
	dest := wire.DeadLetter(queue)
	return dlqQueue{Key: key, Name: strings.TrimPrefix(dest, "/queue/"), Dest: dest,
		Target: strings.TrimPrefix(queue, "/queue/"), target: queue}
}

func (s *Server) queueByKey(key string) (dlqQueue, bool) {
	for _, q := range s.dlqQueues {
		if q.Key == key {
			return q, true
		}
	}
	return dlqQueue{}, false
}

type dlqList struct {
	dlqQueue
	Messages []broker.Message
	Err      string
	// Pager says which messages are shown of how many (Total is a lower
	// bound, More, when the browse stopped at its limit).
	Pager pager
}

// Action names of the audit records the UI writes.
const (
	ActionDLQReplay = "dlq.replay"
	ActionDLQDelete = "dlq.delete"
)

// dlqPage lists both dead-letter queues a page at a time: each queue has
// its own page parameter ({key}_page), and each queue's links keep the
// other's page.
func (s *Server) dlqPage(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	pages := map[string]int{}
	for _, q := range s.dlqQueues {
		p, err := parsePage(query.Get(q.Key + "_page"))
		if err != nil {
			s.fail(w, r, http.StatusBadRequest, "invalid", q.Key+"_page: "+err.Error()+".")
			return
		}
		pages[q.Key] = p
	}
	link := func(key string, page int) string {
		v := url.Values{}
		for _, q := range s.dlqQueues {
			p := pages[q.Key]
			if q.Key == key {
				p = page
			}
			if p > 1 {
				v.Set(q.Key+"_page", strconv.Itoa(p))
			}
		}
		if len(v) == 0 {
			return "/dlq"
		}
		return "/dlq?" + v.Encode()
	}
	// Browsing walks from the head of the queue, so any page reads the
	// pages before it too; reading up to the depth cap (without bodies)
	// gives the total as well. The broker ends a browse at BrowseLimit.
	limit := min(s.opts.DepthCap, broker.BrowseLimit)
	var lists []dlqList
	for _, q := range s.dlqQueues {
		l := dlqList{dlqQueue: q}
		msgs, complete, err := s.deps.Broker.Browse(r.Context(), q.Dest, limit, false)
		if err != nil {
			s.log.Warn("browse dead-letter queue", "queue", q.Name, "err", err)
			l.Err = "The broker did not answer; try again shortly."
		}
		key := q.Key
		l.Pager = pageOf(len(msgs), s.opts.DLQListMax, pages[key], func(p int) string { return link(key, p) })
		l.Pager.More = !complete
		l.Messages = msgs[l.Pager.lo:l.Pager.hi]
		lists = append(lists, l)
	}
	flash := ""
	if n := query.Get("replayed"); n != "" {
		flash = n + " message(s) replayed."
	}
	if query.Get("deleted") != "" {
		flash = "Message deleted."
	}
	s.render(w, r, http.StatusOK, "dlq", "Dead-letter queues", struct{ Queues []dlqList }{lists}, flash, "")
}

// bodyShown bounds how much of a message body the inspect page shows.
const bodyShown = 64 << 10

type dlqMessageData struct {
	Queue     dlqQueue
	Message   broker.Message
	Body      string
	Truncated bool
	Shown     int
}

func (s *Server) dlqQueueParam(w http.ResponseWriter, r *http.Request) (dlqQueue, string, bool) {
	q, ok := s.queueByKey(chi.URLParam(r, "queue"))
	if !ok {
		s.fail(w, r, http.StatusNotFound, "not_found", "There is no such dead-letter queue.")
		return q, "", false
	}
	id := r.URL.Query().Get("id")
	if r.Method == http.MethodPost {
		id = r.PostFormValue("id")
	}
	if len(id) > 256 {
		s.fail(w, r, http.StatusBadRequest, "invalid", "That message id is too long.")
		return q, "", false
	}
	return q, id, true
}

func (s *Server) dlqMessage(w http.ResponseWriter, r *http.Request) {
	q, id, ok := s.dlqQueueParam(w, r)
	if !ok {
		return
	}
	if id == "" {
		s.fail(w, r, http.StatusBadRequest, "invalid", "Which message? The id is missing.")
		return
	}
	m, err := s.deps.Broker.Get(r.Context(), q.Dest, id, s.opts.DepthCap*10)
	if err != nil {
		if errors.Is(err, admininterface.ErrNotFound) {
			s.fail(w, r, http.StatusNotFound, "not_found", "That message is no longer in the queue (replayed or deleted?).")
			return
		}
		s.upstreamFail(w, r, "Reading the dead-letter queue", err)
		return
	}
	d := dlqMessageData{Queue: q, Message: m}
	body := m.Body
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "", "  ") == nil {
		body = pretty.Bytes()
	}
	if len(body) > bodyShown {
		body, d.Truncated = body[:bodyShown], true
	}
	d.Body, d.Shown = string(body), len(body)
	s.render(w, r, http.StatusOK, "dlq_message", "Dead-lettered message", d, "", "")
}

func (s *Server) confirmReplay(w http.ResponseWriter, r *http.Request) {
	q, id, ok := s.dlqQueueParam(w, r)
	if !ok {
		return
	}
	d := confirmData{Action: "/dlq/" + q.Key + "/replay", Button: "Replay", Cancel: "/dlq", Fields: map[string]string{"id": id}}
	if id == "" {
		d.Question = "Replay every message of " + q.Name + " to " + q.Target + "?"
		d.Detail = "Messages that still cannot be stored come back to the dead-letter queue with their reason."
		d.Button = "Replay all"
	} else {
		d.Question = "Replay message " + id + " of " + q.Name + " to " + q.Target + "?"
	}
	s.render(w, r, http.StatusOK, "confirm", "Replay dead-lettered messages", d, "", "")
}

func (s *Server) confirmDelete(w http.ResponseWriter, r *http.Request) {
	q, id, ok := s.dlqQueueParam(w, r)
	if !ok {
		return
	}
	if id == "" {
		s.fail(w, r, http.StatusBadRequest, "invalid", "Which message? The id is missing.")
		return
	}
	s.render(w, r, http.StatusOK, "confirm", "Delete a dead-lettered message", confirmData{
		Action: "/dlq/" + q.Key + "/delete", Fields: map[string]string{"id": id},
		Question: "Delete message " + id + " from " + q.Name + "?",
		Detail:   "Its content is lost for good; export it first if it may be needed.",
		Button:   "Delete message", Cancel: "/dlq/" + q.Key + "/message?id=" + id,
	}, "", "")
}

func (s *Server) replay(w http.ResponseWriter, r *http.Request) {
	q, id, ok := s.dlqQueueParam(w, r)
	if !ok {
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		http.Redirect(w, r, "/dlq", http.StatusSeeOther)
		return
	}
	intent, ok := s.auditIntent(w, r, ActionDLQReplay, q, id)
	if !ok {
		return
	}
	if id == "" {
		s.replayAll(w, r, q, intent)
		return
	}
	n, err := s.deps.Broker.Replay(r.Context(), q.Dest, q.target, id, 1)
	s.auditDLQ(r, ActionDLQReplay, q, id, intent, n, err)
	if err != nil {
		if errors.Is(err, admininterface.ErrNotFound) {
			s.fail(w, r, http.StatusNotFound, "not_found", "That message is no longer in the queue (replayed or deleted?).")
			return
		}
		s.upstreamFail(w, r, fmt.Sprintf("Replaying (%d replayed before the error)", n), err)
		return
	}
	http.Redirect(w, r, "/dlq?replayed="+strconv.Itoa(n), http.StatusSeeOther)
}

// replayRun is one "replay all" as its page shows it: Progress yields a
// line now and then while the replay runs, and is closed when it ended;
// Result is then the summary.
type replayRun struct {
	Queue    dlqQueue
	Progress <-chan string
	n        int
	err      error
}

// Result says how the replay ended (read after Progress is closed).
func (run *replayRun) Result() string {
	if run.err != nil {
		return fmt.Sprintf("Stopped after %d message(s): %s Try again shortly to replay the rest.", run.n, replayError(run.err))
	}
	return fmt.Sprintf("Done: %d message(s) replayed.", run.n)
}

// Failed reports whether the replay stopped on an error.
func (run *replayRun) Failed() bool { return run.err != nil }

func replayError(err error) string {
	if errors.Is(err, context.Canceled) {
		return "the page was closed."
	}
	return "the broker did not answer."
}

// progressEvery is how often the replay-all page reports progress.
const progressEvery = time.Second

// replayAll replays every message that was in the DLQ when the person
// asked, however many (a browse sees 400 at most, so the queue is consumed
// until none of them is left), and streams a page that shows the progress
// while it runs. Messages that fail again and come back meanwhile are left
// for a later replay.
func (s *Server) replayAll(w http.ResponseWriter, r *http.Request, q dlqQueue, intent string) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	rc := http.NewResponseController(w)
	lines := make(chan string)
	run := &replayRun{Queue: q, Progress: lines}
	var mu sync.Mutex
	count := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		res := make(chan struct{})
		go func() {
			defer close(res)
			run.n, run.err = s.deps.Broker.ReplayAll(ctx, q.Dest, q.target, s.now(), func(n int) {
				mu.Lock()
				count = n
				mu.Unlock()
			})
		}()
		last := 0
		for {
			select {
			case <-res:
				return
			case <-tick.C:
				mu.Lock()
				n := count
				mu.Unlock()
				if n == last {
					continue // nothing new (the replay waits for the queue's end)
				}
				last = n
				select {
				case lines <- fmt.Sprintf("%d message(s) replayed so far…", n):
				case <-ctx.Done():
				}
			}
		}
	}()
	// Each write pushes the page out at once and gives the stream more
	// time than the server's page write timeout.
	fw := flushWriter{ResponseWriter: w, rc: rc}
	_ = rc.SetWriteDeadline(time.Now().Add(time.Minute))
	s.render(fw, r, http.StatusOK, "dlq_replay", "Replaying dead-lettered messages", run, "", "")
	cancel()
	for range lines {
	}
	<-done
	s.auditDLQ(r, ActionDLQReplay, q, "", intent, run.n, run.err)
	if run.err != nil {
		s.log.Warn("replay all stopped", "queue", q.Name, "replayed", run.n, "err", run.err)
	}
}

// flushWriter sends every write to the client at once (a page that shows
// progress) and moves the write deadline on.
type flushWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.ResponseWriter.Write(p)
	if err == nil {
		_ = f.rc.SetWriteDeadline(time.Now().Add(time.Minute))
		err = f.rc.Flush()
	}
	return n, err
}

func (s *Server) deleteMessage(w http.ResponseWriter, r *http.Request) {
	q, id, ok := s.dlqQueueParam(w, r)
	if !ok {
		return
	}
	if id == "" {
		s.fail(w, r, http.StatusBadRequest, "invalid", "Which message? The id is missing.")
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		http.Redirect(w, r, "/dlq", http.StatusSeeOther)
		return
	}
	intent, ok := s.auditIntent(w, r, ActionDLQDelete, q, id)
	if !ok {
		return
	}
	err := s.deps.Broker.Delete(r.Context(), q.Dest, id)
	n := 1
	if err != nil {
		n = 0
	}
	s.auditDLQ(r, ActionDLQDelete, q, id, intent, n, err)
	if err != nil {
		if errors.Is(err, admininterface.ErrNotFound) {
			s.fail(w, r, http.StatusNotFound, "not_found", "That message is no longer in the queue (replayed or deleted?).")
			return
		}
		s.upstreamFail(w, r, "Deleting the message", err)
		return
	}
	http.Redirect(w, r, "/dlq?deleted=1", http.StatusSeeOther)
}

// auditWait bounds how long a dead-letter action waits for its audit
// record before it is refused.
const auditWait = 5 * time.Second

// auditIntent records that the person is about to replay or delete
// (outcome 202, body "phase": "requested"), before anything is done:
// a dead-letter action that cannot be audited is not taken. The record
// must be durable within auditWait, else the person gets a 503 and the
// queue is left as it was. It returns the record's id, which the record of
// the result names.
func (s *Server) auditIntent(w http.ResponseWriter, r *http.Request, action string, q dlqQueue, id string) (string, bool) {
	rec := s.dlqRecord(r, action, q, id, http.StatusAccepted, 0, map[string]any{"phase": "requested"})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.auditWait)
	defer cancel()
	err := s.recordAudit(ctx, rec)
	if err == nil {
		return rec.ID, true
	}
	s.auditFails.Inc()
	s.dlqActions.WithLabelValues(action, strconv.Itoa(http.StatusServiceUnavailable)).Inc()
	s.log.Error("dead-letter action refused: it could not be audited", "action", action, "queue", q.Name,
		"message_id", id, "by", sessionOf(r).User.Username, "err", err)
	w.Header().Set("Retry-After", "30")
	s.fail(w, r, http.StatusServiceUnavailable, "audit_unavailable",
		"Nothing was done: the audit trail cannot record this action right now. Try again shortly.")
	return "", false
}

// recordAudit sends rec until it is durable or ctx ends. The record's id
// makes a retry after a lost answer harmless.
func (s *Server) recordAudit(ctx context.Context, rec wire.AuditRecord) error {
	for attempt := 1; ; attempt++ {
		err := s.deps.Audit.Record(ctx, s.opts.InternalKey, rec)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}

// auditDLQ records the result of a dead-letter action with the person as
// the actor, naming the record of its request (intent). The outcome is the
// HTTP status the action amounts to; event_count is how many messages it
// moved or removed. The request was audited before the action; a failure
// to record the result is counted and logged.
func (s *Server) auditDLQ(r *http.Request, action string, q dlqQueue, id, intent string, n int, actErr error) {
	outcome := http.StatusOK
	switch {
	case errors.Is(actErr, admininterface.ErrNotFound):
		outcome = http.StatusNotFound
	case actErr != nil:
		outcome = http.StatusServiceUnavailable
	}
	s.dlqActions.WithLabelValues(action, strconv.Itoa(outcome)).Inc()
	rec := s.dlqRecord(r, action, q, id, outcome, n, map[string]any{"phase": "done", "request_record": intent})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 3*s.auditWait)
	defer cancel()
	if err := s.recordAudit(ctx, rec); err != nil {
		s.auditFails.Inc()
		s.log.Error("audit of a dead-letter action's result failed", "action", action, "queue", q.Name, "message_id", id,
			"by", sessionOf(r).User.Username, "messages", n, "err", err)
	}
}

// dlqRecord is the audit record of a dead-letter action.
func (s *Server) dlqRecord(r *http.Request, action string, q dlqQueue, id string, outcome, n int, extra map[string]any) wire.AuditRecord {
	fields := map[string]any{"queue": q.Name, "target": q.Target, "message_id": id, "messages": n}
	for k, v := range extra {
		fields[k] = v
	}
	body, _ := json.Marshal(fields)
	resource := "queue:" + q.Name
	if id != "" {
		resource += "/" + id
	}
	if len(resource) > 255 {
		resource = resource[:255]
	}
	ua := r.UserAgent()
	if len(ua) > 255 {
		ua = ua[:255]
	}
	return wire.AuditRecord{
		ID: uuid.Must(uuid.NewV7()).String(), Time: s.now().UTC(), ActorToken: admininterface.Actor(sessionOf(r).User.Username),
		Action: action, Resource: resource, Outcome: outcome, ClientIP: clientIP(r), UserAgent: ua,
		EventCount: n, Body: body,
	}
}

func clientIP(r *http.Request) string {
	host := r.RemoteAddr
	for i := len(host) - 1; i >= 0; i-- {
		if host[i] == ':' {
			host = host[:i]
			break
		}
	}
	if len(host) > 2 && host[0] == '[' {
		host = host[1 : len(host)-1]
	}
	return host
}
