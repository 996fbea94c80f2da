package main

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestUsageNamesEveryFlag keeps the Usage block of the command's doc
// comment (main.go, what `go doc` shows) true: it names every flag that
// parseConfig registers, as `mcptaskd -h` lists them.
func TestUsageNamesEveryFlag(t *testing.T) {
	var help bytes.Buffer
	if _, err := parseConfig([]string{"-h"}, func(string) string { return "" }, &help); err == nil {
		t.Fatal("parseConfig -h: want flag.ErrHelp")
	}
	flags := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(help.String(), -1)
	if len(flags) < 40 {
		t.Fatalf("found only %d flags in -h output:\n%s", len(flags), help.String())
	}
	f, err := os.Open("main.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	start := strings.Index(doc, "// Usage")
	end := strings.Index(doc, "// Once listening")
	if start < 0 || end < start {
		t.Fatal("main.go: no Usage block in the doc comment")
	}
	usage := doc[start:end]
	for _, m := range flags {
		name := m[1]
		if !regexp.MustCompile(`-` + regexp.QuoteMeta(name) + `([^a-z0-9-]|$)`).MatchString(usage) {
			t.Errorf("the Usage block of main.go's doc comment does not name -%s", name)
		}
	}
}
