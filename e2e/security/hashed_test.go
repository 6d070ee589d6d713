package security

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"strings"
	"testing"

	"threatview/e2e/internal/e2etest"
)

// TestTokens_StoredOnlyHashed creates a token through the admin API and
// reads its row in the tokens database: no column may hold the plain token
// (or its random part, in any case or encoding seen as text), and the hash
// column must be the SHA-256 of the plain token.
func TestTokens_StoredOnlyHashed(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "e2e-hash")
	db := e2etest.MariaDB(t, env.TokensDSN)

	rows, err := db.Query(`SELECT * FROM tokens WHERE id = ?`, app.TokenID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatalf("token %s has no row in the tokens table", app.TokenID)
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	secret := app.Token[strings.IndexByte(app.Token, '_')+1:]
	want := sha256.Sum256([]byte(app.Token))
	hashCols := 0
	for i, c := range cols {
		v := vals[i]
		for _, s := range []string{app.Token, secret, strings.ToLower(secret)} {
			if bytes.Contains(bytes.ToLower(v), []byte(strings.ToLower(s))) {
				t.Errorf("column %s holds the plain token", c)
			}
		}
		if bytes.Equal(v, want[:]) {
			hashCols++
		}
	}
	if hashCols != 1 {
		t.Errorf("%d columns hold SHA-256(token), want exactly 1 (columns %v)", hashCols, cols)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM tokens WHERE token_hash = ?`, want[:]).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows with token_hash = SHA-256(token): %d, %v; want 1", n, err)
	}
}
