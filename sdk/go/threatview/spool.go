package threatview

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// spool keeps batches on disk, one file per batch:
//
//	<seq>.open   the open batch, one event a line, appended by Send
//	<seq>.batch  a sealed batch, waiting to be sent or in flight
//
// A line is a flag ('1': add sent_at when sending, '0': relay as is) and
// the event's JSON object. Send returns once its line is written, so an
// event survives the process ending; a line cut short by a crash was
// never acknowledged and is discarded. A file is removed once all its
// events are delivered or dropped. The directory is locked (flock) while a
// client uses it.
type spool struct {
	dir  string
	lock *os.File

	mu    sync.Mutex
	bytes int64
	open  *os.File // the open batch's file
}

const (
	extOpen  = ".open"
	extBatch = ".batch"
)

func (s *spool) path(seq uint64, ext string) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", seq, ext))
}

// openSpool locks dir and returns the batches found there, oldest first
// (an open batch left by a crash is sealed first).
func openSpool(dir string) (*spool, []*batch, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("threatview: spool: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("threatview: spool %s: %w", dir, err)
	}
	s := &spool{dir: dir, lock: lock}
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.close()
		return nil, nil, fmt.Errorf("threatview: spool: %w", err)
	}
	var out []*batch
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if ext != extOpen && ext != extBatch {
			if strings.HasSuffix(name, ".tmp") {
				_ = os.Remove(filepath.Join(dir, name))
			}
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(name, ext), 10, 64)
		if err != nil {
			continue
		}
		b, err := s.recover(seq, ext)
		if err != nil {
			s.close()
			return nil, nil, err
		}
		if b != nil {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return s, out, nil
}

// recover reads one file left by an earlier client, without keeping its
// events in memory; an open file is cut after its last whole line and
// sealed. An empty file is removed (nil batch).
func (s *spool) recover(seq uint64, ext string) (*batch, error) {
	name := s.path(seq, ext)
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("threatview: spool: %w", err)
	}
	whole := bytes.LastIndexByte(data, '\n') + 1
	if whole == 0 {
		return nil, os.Remove(name)
	}
	if ext == extOpen {
		if whole < len(data) {
			if err := os.Truncate(name, int64(whole)); err != nil {
				return nil, fmt.Errorf("threatview: spool: %w", err)
			}
		}
		if err := os.Rename(name, s.path(seq, extBatch)); err != nil {
			return nil, fmt.Errorf("threatview: spool: %w", err)
		}
		name = s.path(seq, extBatch)
	}
	b := &batch{seq: seq, file: name, bytes: int64(whole), n: bytes.Count(data[:whole], []byte{'\n'}), created: time.Now()}
	s.bytes += b.bytes
	return b, nil
}

// create opens the file of a new open batch.
func (s *spool) create(b *batch) error {
	f, err := os.OpenFile(s.path(b.seq, extOpen), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("threatview: spool: %w", err)
	}
	s.mu.Lock()
	s.open = f
	s.mu.Unlock()
	b.file = s.path(b.seq, extOpen)
	return nil
}

// line is the spool line of it.
func line(it item) []byte {
	l := make([]byte, 0, len(it.raw)+2)
	if it.stamp {
		l = append(l, '1')
	} else {
		l = append(l, '0')
	}
	l = append(l, it.raw...)
	return append(l, '\n')
}

// append writes one event to the open batch's file with one write.
func (s *spool) append(b *batch, it item) error {
	l := line(it)
	if _, err := s.open.Write(l); err != nil {
		return fmt.Errorf("threatview: spool write: %w", err)
	}
	s.mu.Lock()
	s.bytes += int64(len(l))
	s.mu.Unlock()
	b.bytes += int64(len(l))
	return nil
}

// seal syncs and closes the open batch's file and renames it .batch.
func (s *spool) seal(b *batch) error {
	f := s.open
	s.open = nil
	err := errors.Join(f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(b.file, s.path(b.seq, extBatch))
	}
	if err != nil {
		return fmt.Errorf("threatview: spool seal: %w", err)
	}
	b.file = s.path(b.seq, extBatch)
	return nil
}

// load reads a batch's events back from its file. A line that is not a
// JSON object (a disk error, an edit) is skipped and returned in bad, one
// error each naming the file and the line, so the rest of the file is
// still sent. err is set only when the file cannot be read at all.
func (s *spool) load(b *batch) (items []item, bad []error, err error) {
	data, err := os.ReadFile(b.file)
	if err != nil {
		return nil, nil, fmt.Errorf("threatview: spool read: %w", err)
	}
	for i, l := range bytes.Split(data, []byte{'\n'}) {
		if len(l) == 0 {
			continue
		}
		var idOnly struct {
			EventID string `json:"event_id"`
		}
		if len(l) < 2 || (l[0] != '0' && l[0] != '1') || l[1] != '{' {
			bad = append(bad, fmt.Errorf("threatview: spool %s line %d: not an event line (%d bytes)", b.file, i+1, len(l)))
			continue
		}
		it := item{raw: l[1:], stamp: l[0] == '1'}
		if err := json.Unmarshal(it.raw, &idOnly); err != nil {
			bad = append(bad, fmt.Errorf("threatview: spool %s line %d: not JSON (%d bytes): %w", b.file, i+1, len(l), err))
			continue
		}
		it.id = idOnly.EventID
		items = append(items, it)
	}
	return items, bad, nil
}

// rewrite replaces a batch's file with its current events.
func (s *spool) rewrite(b *batch) error {
	var buf bytes.Buffer
	for _, it := range b.items {
		buf.Write(line(it))
	}
	tmp := b.file + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, b.file); err != nil {
		return err
	}
	s.mu.Lock()
	s.bytes += int64(buf.Len()) - b.bytes
	s.mu.Unlock()
	b.bytes = int64(buf.Len())
	return nil
}

// remove deletes a resolved batch's file.
func (s *spool) remove(b *batch) {
	if b.file == "" {
		return
	}
	_ = os.Remove(b.file)
	s.mu.Lock()
	s.bytes -= b.bytes
	s.mu.Unlock()
	b.file = ""
	b.bytes = 0
}

// size is the bytes the spool's files hold.
func (s *spool) size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// close unlocks the directory; the files stay.
func (s *spool) close() error {
	s.mu.Lock()
	f := s.open
	s.open = nil
	s.mu.Unlock()
	var err error
	if f != nil {
		err = f.Close()
	}
	if s.lock != nil {
		err = errors.Join(err, s.lock.Close())
		s.lock = nil
	}
	return err
}
