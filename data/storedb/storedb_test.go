package storedb

import "testing"

func TestRebind(t *testing.T) {
	tests := []struct {
		name, in, sqlite, pg string
	}{
		{"none", `SELECT 1`, `SELECT 1`, `SELECT 1`},
		{"args", `UPDATE t SET a = ? WHERE b = ? AND c = ?`, `UPDATE t SET a = ? WHERE b = ? AND c = ?`, `UPDATE t SET a = $1 WHERE b = $2 AND c = $3`},
		{"quoted kept", `SELECT '?', "a?b", x FROM t WHERE y = ?`, `SELECT '?', "a?b", x FROM t WHERE y = ?`, `SELECT '?', "a?b", x FROM t WHERE y = $1`},
		{"doubled quote", `SELECT 'it''s ?' WHERE a LIKE ? ESCAPE '\'`, `SELECT 'it''s ?' WHERE a LIKE ? ESCAPE '\'`, `SELECT 'it''s ?' WHERE a LIKE $1 ESCAPE '\'`},
	}
	for _, tt := range tests {
		if got := rebind(SQLite, tt.in); got != tt.sqlite {
			t.Errorf("%s: sqlite = %q, want %q", tt.name, got, tt.sqlite)
		}
		if got := rebind(Postgres, tt.in); got != tt.pg {
			t.Errorf("%s: postgres = %q, want %q", tt.name, got, tt.pg)
		}
	}
}

func TestIsURLRedact(t *testing.T) {
	for in, want := range map[string]bool{"postgres://h/db": true, "postgresql://u@h/db": true, "runs.db": false, "/tmp/postgres://x": false} {
		if IsURL(in) != want {
			t.Errorf("IsURL(%q) = %v", in, !want)
		}
	}
	if got := Redact("postgres://u:secret@h:5432/db?sslmode=disable"); got != "postgres://u:xxxxx@h:5432/db?sslmode=disable" {
		t.Errorf("Redact = %q", got)
	}
}
