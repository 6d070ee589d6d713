package trail

import (
	"fmt"

	"github.com/transparency-dev/merkle/proof"

	"threatview/platform/wire"
)

// InclusionProof is the answer of GET /v1/audit/{id}/proof: a row, its
// position, a signed checkpoint and the hashes that lead from the row's
// leaf to the checkpoint's root.
type InclusionProof struct {
	Record     wire.AuditRecord `json:"record"`
	Seq        uint64           `json:"seq"`
	Checkpoint Checkpoint       `json:"checkpoint"`
	Proof      [][]byte         `json:"proof"`
}

// Verify checks the proof without trusting whoever served it: the
// checkpoint must be signed by one of keys (obtained out of band), and the
// record's own fields must hash, through the proof, to the signed root.
func (p *InclusionProof) Verify(keys Keyring) error {
	if err := keys.Verify(&p.Checkpoint); err != nil {
		return err
	}
	leaf := LeafHash(&p.Record)
	if err := proof.VerifyInclusion(Hasher, p.Seq, p.Checkpoint.Size, leaf, p.Proof, p.Checkpoint.Root); err != nil {
		return fmt.Errorf("row %s is not in the signed tree: %w", p.Record.ID, err)
	}
	return nil
}

// ConsistencyProof is the answer of GET /v1/audit/checkpoints/consistency:
// the hashes showing the tree of From is a prefix of the tree of To.
type ConsistencyProof struct {
	From  Checkpoint `json:"from"`
	To    Checkpoint `json:"to"`
	Proof [][]byte   `json:"proof"`
}

// Verify checks both signatures and the proof.
func (p *ConsistencyProof) Verify(keys Keyring) error {
	for _, c := range []*Checkpoint{&p.From, &p.To} {
		if err := keys.Verify(c); err != nil {
			return err
		}
	}
	if err := proof.VerifyConsistency(Hasher, p.From.Size, p.To.Size, p.Proof, p.From.Root, p.To.Root); err != nil {
		return fmt.Errorf("checkpoints %d and %d are not consistent: %w", p.From.N, p.To.N, err)
	}
	return nil
}
