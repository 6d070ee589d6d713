package wire

// RevocationsTopic is the broker topic on which the tokens service announces
// every revocation to every collector.
const RevocationsTopic = "/topic/threatview.revocations"

// Revocation is the body of one message on RevocationsTopic. TokenSHA256 is
// the hex SHA-256 of the plain token (the form the tokens service stores
// and the collector's cache is keyed by), so a collector can drop the
// cached token without ever having seen its id.
type Revocation struct {
	V           int    `json:"v"`
	TokenID     string `json:"token_id"`
	AppID       string `json:"app_id"`
	TokenSHA256 string `json:"token_sha256"`
	RevokedAt   string `json:"revoked_at"` // RFC 3339
}
