package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBearerToken: against a mcptaskd that requires bearer tokens, a call
// without one says which flag or variable to set; --token-file,
// MCPTASK_TOKEN and MCPTASK_TOKEN_FILE give it; a wrong one is refused
// with where it came from; the token itself is never printed nor written
// to the journal.
func TestBearerToken(t *testing.T) {
	t.Parallel()
	const secret = "cli-test-token-7f3a9c2e51d4b8a6"
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token": "`+secret+`", "principal": "alice", "tenant": "acme"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongFile := filepath.Join(dir, "wrong")
	if err := os.WriteFile(wrongFile, []byte("not-the-token-at-all-0000"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "-tokens", tokens)
	c := newCLI(t, d.URL)
	call := []string{"call", "long_computation", "n=1000", "steps=2", "step_delay_ms=0"}
	primes := "There are 168 primes up to 1000 (computed in 2 steps)."
	var outputs []string

	r := c.run(call...)
	expect(t, r, exitConnection, nil, []string{"requires a bearer token", "--token-file", "MCPTASK_TOKEN"})
	outputs = append(outputs, r.Stdout, r.Stderr)

	r = c.run(append([]string{"--token-file", tokenFile}, call...)...)
	expect(t, r, exitOK, []string{primes}, nil)
	outputs = append(outputs, r.Stdout, r.Stderr)

	r = c.run(append([]string{"--token-file", wrongFile}, call...)...)
	expect(t, r, exitConnection, nil, []string{"refused the bearer token", "--token-file " + wrongFile})
	outputs = append(outputs, r.Stdout, r.Stderr)

	for _, env := range []string{"MCPTASK_TOKEN=" + secret, "MCPTASK_TOKEN_FILE=" + tokenFile} {
		ce := *c
		ce.env = append(append([]string(nil), c.env...), env)
		r = ce.run(call...)
		expect(t, r, exitOK, []string{primes}, nil)
		outputs = append(outputs, r.Stdout, r.Stderr)
	}
	// The flag wins over the environment.
	ce := *c
	ce.env = append(append([]string(nil), c.env...), "MCPTASK_TOKEN="+secret)
	expect(t, ce.run(append([]string{"--token-file", wrongFile}, call...)...), exitConnection, nil, []string{"refused the bearer token"})

	r = c.run("help")
	outputs = append(outputs, r.Stdout, r.Stderr)
	journal, _ := os.ReadFile(c.journal)
	outputs = append(outputs, string(journal))
	for _, out := range outputs {
		if strings.Contains(out, secret) {
			t.Fatalf("the token was printed or journaled:\n%s", out)
		}
	}
}
