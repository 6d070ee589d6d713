package auditlogger

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/pipeline"
	"threatview/platform/wire"
)

// Inserter stores a batch of audit records (Store's write half).
type Inserter interface {
	Insert(ctx context.Context, records []wire.AuditRecord) (int, error)
}

// WorkerHandler is the audit worker's part of the shared consumer
// (platform/pipeline): the good records of a message are one part, stored
// with the batch by store; a record that can never be stored is
// dead-lettered alone (its own message, the reason in a header) and the
// message's other records are kept, because the collector's messages carry
// the records of several requests and one must not cost the others their
// audit rows. A message that is not an audit batch at all, or whose every
// record is bad, is dead-lettered whole. Database errors are all retried.
func WorkerHandler(store Inserter) pipeline.Handler[wire.AuditRecord] {
	return pipeline.Handler[wire.AuditRecord]{
		Decode: decodeAudit,
		Write: func(ctx context.Context, records []wire.AuditRecord) (pipeline.Result, error) {
			n, err := store.Insert(ctx, records)
			return pipeline.Result{Stored: n, Duplicates: len(records) - n}, err
		},
	}
}

func decodeAudit(body []byte) ([]pipeline.Part[wire.AuditRecord], []pipeline.Reject, error) {
	items, err := wire.DecodeAuditItems(body)
	if err != nil {
		return nil, nil, err
	}
	good := make([]wire.AuditRecord, 0, len(items))
	var rejects []pipeline.Reject
	var first error
	for i := range items {
		err := items[i].Err
		if err == nil {
			Normalize(&items[i].Record, true)
			if verr := Validate(&items[i].Record, i); verr != nil {
				err = fmt.Errorf("%w: %v", wire.ErrInvalidEnvelope, verr)
			}
		}
		if err != nil {
			first = cmp.Or(first, err)
			rejects = append(rejects, pipeline.Reject{Body: wire.AuditBody(items[i].Raw), Kind: "record", Err: err,
				Attrs: []any{"index", i}})
			continue
		}
		good = append(good, items[i].Record)
	}
	if len(good) == 0 {
		if first == nil {
			first = errors.New("no records")
		}
		return nil, nil, first
	}
	return []pipeline.Part[wire.AuditRecord]{{Items: good, Body: func() []byte { return body }}}, rejects, nil
}

// WorkerMetrics registers the audit worker's consumer metrics (their
// auditworker_ names) on reg when not nil.
func WorkerMetrics(reg prometheus.Registerer) pipeline.Metrics {
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "auditworker_messages_total",
		Help: "Messages finished, by outcome (stored, dead_lettered).",
	}, []string{"outcome"})
	inserted := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "auditworker_records_inserted_total",
		Help: "Audit records newly stored.",
	})
	duplicates := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "auditworker_records_duplicate_total",
		Help: "Audit records received again and skipped (already stored).",
	})
	dbErrors := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "auditworker_db_errors_total",
		Help: "Failed insert transactions (retried).",
	})
	batchRows := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "auditworker_batch_records",
		Help:    "Records per insert transaction.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 8),
	})
	insertDur := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "auditworker_insert_seconds",
		Help:    "Duration of one insert transaction.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 10),
	})
	if reg != nil {
		reg.MustRegister(messages, inserted, duplicates, dbErrors, batchRows, insertDur)
	}
	return pipeline.Metrics{
		DeadLettered:   messages.WithLabelValues("dead_lettered"),
		Stored:         messages.WithLabelValues("stored"),
		Items:          inserted,
		Duplicates:     duplicates,
		WriteErrors:    dbErrors,
		BatchItems:     batchRows,
		AttemptSeconds: insertDur,
	}
}
