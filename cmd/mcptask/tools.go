package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/mcptask/mcptask/client"
)

// cmdTools is 'mcptask tools'.
var cmdTools = &command{
	name:      "tools",
	exitsText: "  0    the tools are listed (or the tool described)\n  4    the server is unreachable, or has no such tool\n  5    usage error",
	synopsis:  "[TOOL]",
	summary:   "list the server's tools, or describe one and its arguments",
	help: `
Lists the server's tools with whether they run as tasks (on the 2025-11-25
wire, where the server says it: forbidden, optional or required; the
2026-07-28 wire decides per call). With a TOOL name, describes that tool and
its arguments. With --json, prints the tools as the server describes them.`,
	run: runTools,
}

func runTools(a *app, ctx context.Context, pos []string) int {
	if len(pos) > 1 {
		return a.usage(usagef("give at most one tool name"))
	}
	c, err := a.connect(ctx, a.g.target(), a.g.wire)
	if err != nil {
		return a.report(ctx, &outcome{err: err})
	}
	defer c.Close()
	rctx, cancel := requestContext(ctx)
	defer cancel()
	tools, err := c.Tools(rctx)
	if err != nil {
		return a.report(ctx, &outcome{err: fmt.Errorf("listing tools: %w", err)})
	}
	if len(pos) == 1 {
		i := slices.IndexFunc(tools, func(t client.Tool) bool { return t.Tool != nil && t.Name == pos[0] })
		if i < 0 {
			var names []string
			for _, t := range tools {
				if t.Tool != nil {
					names = append(names, t.Name)
				}
			}
			a.errorf("the server has no tool %q; it has: %s", pos[0], strings.Join(names, ", "))
			return exitUsage
		}
		tools = tools[i : i+1]
		if !a.g.json {
			describeTool(a, tools[0])
			return exitOK
		}
	}
	if a.g.json {
		out := []map[string]any{}
		for _, t := range tools {
			m := map[string]any{}
			if t.Tool != nil {
				b, err := json.Marshal(t.Tool)
				if err == nil {
					m, _ = decodeObject(b)
				}
			}
			if t.TaskSupport != "" {
				m["taskSupport"] = t.TaskSupport
			}
			out = append(out, m)
		}
		printJSONEach(a, pos, out)
		return exitOK
	}
	withTasks := slices.ContainsFunc(tools, func(t client.Tool) bool { return t.TaskSupport != "" })
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	if withTasks {
		fmt.Fprintln(tw, "TOOL\tTASKS\tDESCRIPTION")
	} else {
		fmt.Fprintln(tw, "TOOL\tDESCRIPTION")
	}
	for _, t := range tools {
		if t.Tool == nil {
			continue
		}
		desc := firstSentence(t.Description)
		if withTasks {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, orDash(t.TaskSupport), desc)
		} else {
			fmt.Fprintf(tw, "%s\t%s\n", t.Name, desc)
		}
	}
	tw.Flush()
	fmt.Fprintln(a.stderr, "\nmcptask: 'mcptask tools TOOL' describes a tool's arguments; 'mcptask call TOOL key=value ...' calls it")
	return exitOK
}

// describeTool prints a tool's description and arguments.
func describeTool(a *app, t client.Tool) {
	w := a.stdout
	fmt.Fprint(w, t.Name)
	if t.Title != "" {
		fmt.Fprintf(w, " — %s", t.Title)
	}
	fmt.Fprintln(w)
	if t.TaskSupport != "" {
		fmt.Fprintf(w, "Runs as a task: %s\n", t.TaskSupport)
	}
	if t.Description != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, wrap(t.Description, 78, "  "))
	}
	fields, err := parseSchema(t.InputSchema)
	fmt.Fprintln(w, "\nArguments:")
	if err != nil {
		fmt.Fprintf(w, "  (the input schema cannot be read: %v)\n", err)
	} else if len(fields) == 0 {
		fmt.Fprintln(w, "  none")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	example := "mcptask call " + t.Name
	for _, f := range fields {
		var notes []string
		if f.required {
			notes = append(notes, "required")
		}
		if f.hasDef {
			notes = append(notes, fmt.Sprintf("default %v", f.def))
		}
		if len(f.choices) > 0 {
			var cs []string
			for _, c := range f.choices {
				cs = append(cs, fmt.Sprint(c.value))
			}
			notes = append(notes, "one of "+strings.Join(cs, ", "))
		}
		desc := oneLine(f.description)
		if len(notes) > 0 {
			desc = strings.TrimSpace(desc + " [" + strings.Join(notes, "; ") + "]")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.name, f.typeName(), desc)
		if f.required {
			example += " " + f.name + "=" + strings.ToUpper(f.typeName())
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nCall it with:\n  %s [key=value ...]\n", example)
}

// firstSentence returns the first sentence of s, cut to 90 characters.
func firstSentence(s string) string {
	s = oneLine(s)
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if r := []rune(s); len(r) > 90 {
		s = string(r[:89]) + "…"
	}
	return s
}

// wrap wraps text at width columns, each line indented.
func wrap(text string, width int, indent string) string {
	var b strings.Builder
	for pi, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if pi > 0 {
			b.WriteString("\n\n")
		}
		line := indent
		for i, word := range strings.Fields(para) {
			if i > 0 && len(line)+1+len(word) > width {
				b.WriteString(strings.TrimRight(line, " ") + "\n")
				line = indent
			} else if i > 0 {
				line += " "
			}
			line += word
		}
		b.WriteString(line)
	}
	return b.String()
}
