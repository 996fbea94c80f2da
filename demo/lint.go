package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type lintArgs struct {
	Source        string `json:"source,omitempty" jsonschema:"the source text to lint (default: a built-in sample with problems)"`
	MaxLineLength int    `json:"max_line_length,omitempty" jsonschema:"the longest allowed line, in characters (default 100)"`
	LineDelayMs   *int   `json:"line_delay_ms,omitempty" jsonschema:"pause per line in milliseconds, to make the job visibly long (0 to 60000; default 20)"`
}

// Finding is one problem lint_report found.
type Finding struct {
	Line    int    `json:"line"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

type lintOut struct {
	Lines    int       `json:"lines" jsonschema:"how many lines were linted"`
	Findings []Finding `json:"findings" jsonschema:"the problems found"`
}

// sampleSource is linted when the call gives no source.
const sampleSource = "package main\n\nfunc main() {\n\t// TODO: handle errors   \n\tprintln(\"" +
	"this line is deliberately far too long to pass the linter, which allows one hundred characters at most\")\n}\n"

func lintReport(ctx context.Context, _ *mcp.CallToolRequest, in lintArgs) (*mcp.CallToolResult, lintOut, error) {
	src := orDefault(in.Source, sampleSource)
	maxLen := orDefault(in.MaxLineLength, 100)
	delay := 20
	if in.LineDelayMs != nil {
		delay = *in.LineDelayMs
	}
	if delay < 0 || delay > maxStepDelay {
		return nil, lintOut{}, fmt.Errorf("line_delay_ms must be between 0 and %d, got %d", maxStepDelay, delay)
	}
	lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	out := lintOut{Lines: len(lines), Findings: []Finding{}}
	every := max(1, len(lines)/10)
	for i, line := range lines {
		if i%every == 0 {
			progress(ctx, fmt.Sprintf("linting line %d of %d", i+1, len(lines)))
		}
		out.Findings = append(out.Findings, lintLine(i+1, line, maxLen)...)
		if err := sleep(ctx, time.Duration(delay)*time.Millisecond); err != nil {
			return nil, lintOut{}, err
		}
	}
	progress(ctx, fmt.Sprintf("done: %d problems in %d lines", len(out.Findings), out.Lines))
	if len(out.Findings) == 0 {
		return text(fmt.Sprintf("No problems found in %d lines.", out.Lines)), out, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Found %d problems in %d lines:\n", len(out.Findings), out.Lines)
	for _, f := range out.Findings {
		fmt.Fprintf(&b, "line %d: %s: %s\n", f.Line, f.Rule, f.Message)
	}
	res := text(strings.TrimSuffix(b.String(), "\n"))
	res.IsError = true
	return res, out, nil
}

// lintLine returns the findings of one line.
func lintLine(n int, line string, maxLen int) []Finding {
	var fs []Finding
	if l := len([]rune(line)); l > maxLen {
		fs = append(fs, Finding{n, "line-length", fmt.Sprintf("line is %d characters long, more than %d", l, maxLen)})
	}
	if strings.TrimRight(line, " \t") != line {
		fs = append(fs, Finding{n, "trailing-whitespace", "line ends with whitespace"})
	}
	for _, marker := range []string{"TODO", "FIXME"} {
		if strings.Contains(line, marker) {
			fs = append(fs, Finding{n, "todo", marker + " marker left in the code"})
		}
	}
	if strings.HasPrefix(line, " ") && strings.Contains(line[:len(line)-len(strings.TrimLeft(line, " \t"))], "\t") {
		fs = append(fs, Finding{n, "mixed-indent", "indentation mixes spaces and tabs"})
	}
	return fs
}
