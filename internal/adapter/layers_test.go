package adapter_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

const module = "github.com/mcptask/mcptask"

// imports returns the packages the non-test files of dir import.
func imports(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range files {
		if filepath.Ext(f) != ".go" || len(f) > 8 && f[len(f)-8:] == "_test.go" {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			got[p] = true
		}
	}
	return got
}

// TestLayers keeps the wires symmetric: each wire depends on the shared
// core, never on the other wire, and the core on neither (nor on the root
// package above it).
func TestLayers(t *testing.T) {
	core, w26, w25 := module+"/internal/adapter", module+"/internal/adapter/wire2026", module+"/internal/adapter/wire2025"
	for dir, forbidden := range map[string][]string{
		".":        {module, w26, w25},
		"wire2026": {module, w25},
		"wire2025": {module, w26},
	} {
		got := imports(t, dir)
		for _, f := range forbidden {
			if got[f] {
				t.Errorf("%s imports %s", dir, f)
			}
		}
		if dir != "." && !got[core] {
			t.Errorf("%s does not import the shared core %s", dir, core)
		}
	}
}
