package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"

	"threatview/auditlogger"
	"threatview/auditlogger/trail"
)

// nodeHash returns the hash of the complete subtree (level, index): from
// audit_tree_nodes at levels 8, 16, ..., else folded from the nearest
// stored level below (leaves are the rows' leaf_hash column). One query a
// node: at most 255 hashes.
func (t *Trail) nodeHash(ctx context.Context, level uint, index uint64) ([]byte, error) {
	base := level - level%8
	first, count := index<<(level-base), uint64(1)<<(level-base)
	var q string
	if base == 0 {
		q = "SELECT seq, leaf_hash FROM audit_events FORCE INDEX (by_seq) WHERE seq >= ? AND seq < ? ORDER BY seq"
	} else {
		q = fmt.Sprintf("SELECT idx, hash FROM audit_tree_nodes WHERE level = %d AND idx >= ? AND idx < ? ORDER BY idx", base)
	}
	// sql: one of two constant statements; the level is base, a multiple of 8
	// computed from the tree's shape and formatted as a number, and the range
	// travels as ? arguments.
	rows, err := t.q.QueryContext(ctx, q, first, first+count)
	if err != nil {
		return nil, fmt.Errorf("read tree nodes: %w: %w", auditlogger.ErrUnavailable, err)
	}
	defer rows.Close()
	hs := make([][]byte, 0, count)
	for rows.Next() {
		var i uint64
		var h []byte
		if err := rows.Scan(&i, &h); err != nil {
			return nil, fmt.Errorf("read tree nodes: %w", err)
		}
		if i != first+uint64(len(hs)) || len(h) != trail.HashSize {
			return nil, fmt.Errorf("tree node (%d, %d): %w", base, i, errNoNode)
		}
		hs = append(hs, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read tree nodes: %w: %w", auditlogger.ErrUnavailable, err)
	}
	if uint64(len(hs)) != count {
		return nil, fmt.Errorf("tree node (%d, %d): %w", level, index, errNoNode)
	}
	for len(hs) > 1 {
		for i := 0; i < len(hs)/2; i++ {
			hs[i] = trail.Hasher.HashChildren(hs[2*i], hs[2*i+1])
		}
		hs = hs[:len(hs)/2]
	}
	return hs[0], nil
}

// errNoNode means a hash a proof needs is gone (its rows archived and
// dropped below the stored levels, or removed).
var errNoNode = errors.New("tree node not available")

func (t *Trail) proofHashes(ctx context.Context, nodes proof.Nodes) ([][]byte, error) {
	hs := make([][]byte, len(nodes.IDs))
	for i, id := range nodes.IDs {
		h, err := t.nodeHash(ctx, id.Level, id.Index)
		if err != nil {
			return nil, err
		}
		hs[i] = h
	}
	return nodes.Rehash(hs, trail.Hasher.HashChildren)
}

// RangeHashes returns the compact range [0, size) of the tree: the hashes
// of its complete subtrees, largest first, as trail.NewTree takes them.
func (t *Trail) RangeHashes(ctx context.Context, size uint64) ([][]byte, error) {
	ids := compact.RangeNodes(0, size, nil)
	hs := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := t.nodeHash(ctx, id.Level, id.Index)
		if err != nil {
			return nil, err
		}
		hs[i] = h
	}
	return hs, nil
}

// InclusionProof returns the proof that leaf index is in the tree of size.
func (t *Trail) InclusionProof(ctx context.Context, index, size uint64) ([][]byte, error) {
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", auditlogger.ErrInvalid, err)
	}
	return t.proofHashes(ctx, nodes)
}

// ConsistencyProof returns the proof that the tree of size1 is a prefix of
// the tree of size2.
func (t *Trail) ConsistencyProof(ctx context.Context, size1, size2 uint64) ([][]byte, error) {
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", auditlogger.ErrInvalid, err)
	}
	return t.proofHashes(ctx, nodes)
}

// ErrNotFound means no row or checkpoint has the given id.
var ErrNotFound = errors.New("not found")

// RowByID finds a row by its id (a full scan: the primary key starts with
// the time).
func (t *Trail) RowByID(ctx context.Context, id string) (*trail.Row, error) {
	b, ok := auditlogger.ParseID(strings.ToLower(id))
	if !ok {
		return nil, &auditlogger.FieldError{Index: -1, Field: "id", Reason: "not a UUID"}
	}
	var r trail.Row
	var seq sql.NullInt64
	_, err := scanRecord(t.q.QueryRowContext(ctx, "SELECT "+recordCols+", seq, leaf_hash FROM audit_events WHERE id = ? LIMIT 1", b[:]),
		&r.Record, &seq, &r.Leaf)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("audit row %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("audit row %s: %w: %w", id, auditlogger.ErrUnavailable, err)
	}
	r.Seq, r.HasSeq = uint64(seq.Int64), seq.Valid
	return &r, nil
}
