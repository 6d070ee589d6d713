package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"threatview/platform/wire"
	"threatview/processor"
)

// errNeedPartitions stops a WriteRequests attempt that met a missing
// partition; the partitions are created and the attempt made again.
var errNeedPartitions = errors.New("missing partition")

// WriteRequests stores requests (each the events of one collector request)
// in one transaction, each under its own savepoint: a request whose rows
// Postgres refuses with a permanent error (see isPermanent) is rolled back
// to its savepoint and reported in refused, by index, with its error
// (wrapping ErrUnstorable); every other request commits, together. A
// missing partition is created and the transaction tried again once. The
// error, wrapping ErrUnavailable, means nothing was committed.
//
// It is the slow path, for a batch WriteBatch refused: five round trips a
// request instead of two a batch.
func (s *Store) WriteRequests(ctx context.Context, requests [][]wire.Event) (processor.WriteResult, map[int]error, error) {
	var all []wire.Event
	for _, r := range requests {
		all = append(all, r...)
	}
	if len(all) == 0 {
		return processor.WriteResult{}, nil, nil
	}
	lo, hi := receivedRange(all)
	res, refused, err := s.writeRequests(ctx, requests, prevMonth(lo))
	if errors.Is(err, errNeedPartitions) {
		if perr := s.ensurePartitions(ctx, lo, hi); perr != nil {
			return processor.WriteResult{}, nil, fmt.Errorf("write %d requests: %w: %w", len(requests), processor.ErrUnavailable, perr)
		}
		res, refused, err = s.writeRequests(ctx, requests, prevMonth(lo))
		if errors.Is(err, errNeedPartitions) {
			// A month archived and dropped is never re-created: its events
			// are held (late.go), the rest written as in WriteBatch.
			return s.writeRequestsHoldingLate(ctx, requests, all, prevMonth(lo))
		}
	}
	if err != nil {
		return processor.WriteResult{}, nil, fmt.Errorf("write %d requests: %w: %w", len(requests), processor.ErrUnavailable, err)
	}
	return res, refused, nil
}

func (s *Store) writeRequests(ctx context.Context, requests [][]wire.Event, since time.Time) (processor.WriteResult, map[int]error, error) {
	var res processor.WriteResult
	refused := map[int]error{}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return res, nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	for i, events := range requests {
		if len(events) == 0 {
			continue
		}
		if _, err := tx.Exec(ctx, "SAVEPOINT request"); err != nil {
			return res, nil, fmt.Errorf("savepoint: %w", err)
		}
		n, err := s.insert(ctx, tx, events, since)
		if err != nil {
			if _, rerr := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT request"); rerr != nil {
				return res, nil, fmt.Errorf("rollback to savepoint: %w (after %w)", rerr, err)
			}
			switch {
			case isNoPartition(err):
				return res, nil, fmt.Errorf("%w: %w", errNeedPartitions, err)
			case isPermanent(err):
				refused[i] = fmt.Errorf("request of %d events: %w: %w", len(events), processor.ErrUnstorable, err)
				continue
			default:
				return res, nil, err
			}
		}
		// The temporary table empties itself only at commit.
		if _, err := tx.Exec(ctx, "DELETE FROM batch_events; RELEASE SAVEPOINT request"); err != nil {
			return res, nil, fmt.Errorf("release savepoint: %w", err)
		}
		res.Stored += n
		res.Duplicates += len(events) - n
	}
	if err := tx.Commit(ctx); err != nil {
		return res, nil, fmt.Errorf("commit: %w", err)
	}
	return res, refused, nil
}

// writeRequestsHoldingLate holds the events of months that were archived
// and dropped (late.go) and writes the other events of each request.
func (s *Store) writeRequestsHoldingLate(ctx context.Context, requests [][]wire.Event, all []wire.Event, since time.Time) (processor.WriteResult, map[int]error, error) {
	rest, held, dups, err := s.holdLate(ctx, all)
	if err != nil {
		return processor.WriteResult{}, nil, fmt.Errorf("write %d requests: %w: %w", len(requests), processor.ErrUnavailable, err)
	}
	type key struct {
		id, app string
		at      time.Time
	}
	keep := make(map[key]bool, len(rest))
	for _, e := range rest {
		keep[key{e.ID, e.App.ID, e.ReceivedAt}] = true
	}
	left := make([][]wire.Event, len(requests)) // same indexes, late events removed
	for i, r := range requests {
		for _, e := range r {
			if keep[key{e.ID, e.App.ID, e.ReceivedAt}] {
				left[i] = append(left[i], e)
			}
		}
	}
	res, refused, err := s.writeRequests(ctx, left, since)
	if err != nil {
		return processor.WriteResult{}, nil, fmt.Errorf("write %d requests: %w: %w", len(requests), processor.ErrUnavailable, err)
	}
	res.Stored += held
	res.Duplicates += dups
	return res, refused, nil
}
