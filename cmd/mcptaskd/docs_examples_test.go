package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/internal/testkit/clitest"
)

// TestAdaptersDocExamples: the worked examples of docs/adapters.md are
// valid configurations (-check-config), so that the documentation cannot
// drift from what mcptaskd accepts.
func TestAdaptersDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/adapters.md")
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "deploy-token")
	if err := os.WriteFile(secret, []byte("tok-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	examples := regexp.MustCompile("(?s)### Worked example: ([^\n]*)\n.*?```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(examples) < 2 {
		t.Fatalf("docs/adapters.md has %d worked examples, want the CI server's and the REST API's", len(examples))
	}
	for _, ex := range examples {
		name, body := string(ex[1]), strings.ReplaceAll(string(ex[2]), "/run/secrets/deploy-token", secret)
		cfg := writeConfig(t, "demo: false\n"+body)
		cmd := exec.Command(daemonBin, "-check-config", cfg)
		cmd.Env = append(clitest.CleanEnv(), "CI_TOKEN=ci-token-0123456789")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok:") {
			t.Errorf("%s: -check-config: %v\n%s", name, err, out)
		}
	}
}
