// Package smtptest runs a real SMTP server (go-smtp) on loopback for the
// alerts service's email tests, keeping every message it receives.
package smtptest

import (
	"io"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// Message is one received mail: its envelope and its data as sent.
type Message struct {
	From string
	To   []string
	Data string
}

// Header returns the value of the message's header name ("" when absent
// or when the data does not parse as a mail).
func (m Message) Header(name string) string {
	msg, err := mail.ReadMessage(strings.NewReader(m.Data))
	if err != nil {
		return ""
	}
	return msg.Header.Get(name)
}

// Mailbox is the server's backend.
type Mailbox struct {
	mu   sync.Mutex
	msgs []Message
}

// Messages returns what was received so far.
func (b *Mailbox) Messages() []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Message(nil), b.msgs...)
}

type session struct {
	box *Mailbox
	m   Message
}

// NewSession implements smtp.Backend.
func (b *Mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{box: b}, nil }

func (s *session) Reset()        { s.m = Message{} }
func (s *session) Logout() error { return nil }
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.m.From = from
	return nil
}
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.m.To = append(s.m.To, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.m.Data = string(b)
	s.box.mu.Lock()
	s.box.msgs = append(s.box.msgs, s.m)
	s.box.mu.Unlock()
	return nil
}

// Start serves SMTP on a loopback port until the test ends and returns the
// mailbox and the server's host:port.
func Start(tb testing.TB) (*Mailbox, string) {
	tb.Helper()
	box := &Mailbox{}
	srv := smtp.NewServer(box)
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return box, l.Addr().String()
}
