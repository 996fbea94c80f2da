package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// answers are the non-interactive answers to a task's questions, from
// --answer and --answers. They answer every elicitation the same way.
type answers struct {
	action  string         // accept (the default), decline or cancel
	content map[string]any // from --answers FILE
	pairs   []pair         // from --answer key=value, typed by the requested schema
}

// answerFlags collects --answer and --answers.
type answerFlags struct {
	pairs []string
	file  string
}

func (f *answerFlags) String() string { return strings.Join(f.pairs, " ") }
func (f *answerFlags) Set(s string) error {
	f.pairs = append(f.pairs, s)
	return nil
}

func (f *answerFlags) define(fs *flag.FlagSet) {
	fs.Var(f, "answer", "answer the task's questions without asking: `key=value` for a field (repeat for several), or accept, decline or cancel")
	fs.StringVar(&f.file, "answers", "", "answer the task's questions from a JSON `file` (- for stdin): the fields' values, e.g. {\"confirm\": true}, or {\"action\": \"decline\"}")
}

// build returns the answers, or nil when none were given.
func (f *answerFlags) build(stdin io.Reader) (*answers, error) {
	if len(f.pairs) == 0 && f.file == "" {
		return nil, nil
	}
	ans := &answers{action: "accept"}
	if f.file != "" {
		var data []byte
		var err error
		if f.file == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(f.file)
		}
		if err != nil {
			return nil, usagef("--answers: %v", err)
		}
		m, err := decodeObject(data)
		if err != nil {
			return nil, usagef("--answers %s: %v", f.file, err)
		}
		if act, ok := m["action"].(string); ok {
			ans.action = act
			if c, ok := m["content"].(map[string]any); ok {
				ans.content = c
			} else if m["content"] != nil {
				return nil, usagef("--answers %s: content must be an object", f.file)
			}
		} else {
			ans.content = m
		}
	}
	for _, s := range f.pairs {
		switch s {
		case "accept", "decline", "cancel":
			ans.action = s
			continue
		}
		p, err := parsePair(s)
		if err != nil {
			return nil, usagef("--answer %q: give key=value, or accept, decline or cancel", s)
		}
		ans.pairs = append(ans.pairs, p)
	}
	switch ans.action {
	case "accept", "decline", "cancel":
	default:
		return nil, usagef("--answers: action must be accept, decline or cancel, not %q", ans.action)
	}
	return ans, nil
}

// result answers one elicitation, or says, in words, why the answers
// do not fit its requested schema (nothing is sent then: a server would
// refuse them, or a 2025-11-25 tool ask again and again).
func (ans *answers) result(p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if ans.action != "accept" {
		return &mcp.ElicitResult{Action: ans.action}, nil
	}
	fields, _ := parseSchema(p.RequestedSchema)
	content := map[string]any{}
	for k, v := range ans.content {
		content[k] = v
	}
	for _, pr := range ans.pairs {
		if pr.raw {
			content[pr.key], _ = decodeJSON(pr.value)
			continue
		}
		i := slices.IndexFunc(fields, func(f fieldSpec) bool { return f.name == pr.key })
		if i < 0 {
			content[pr.key] = coerceArg(pr.value, nil)
			continue
		}
		v, err := parseFieldInput(&fields[i], pr.value)
		if err != nil {
			v = coerceArg(pr.value, &fields[i]) // checked below, in words
		}
		content[pr.key] = v
	}
	if err := checkObject(fields, schemaClosed(p.RequestedSchema), content); err != nil {
		return nil, err
	}
	return &mcp.ElicitResult{Action: "accept", Content: content}, nil
}

// elicit answers a server's elicitation: from --answer/--answers, else by
// asking on the terminal, else (no terminal) by declining.
func (a *app) elicit(ctx context.Context, taskID string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	a.promptMu.Lock()
	defer a.promptMu.Unlock()
	who := "the server"
	if taskID != "" {
		who = "task " + taskID
	}
	if a.answers != nil {
		r, err := a.answers.result(p)
		if err != nil {
			ue := usagef("the answer does not fit the question of %s: %v; nothing was sent, and the task still waits "+
				"(answer again with: %s wait --answer key=value %s)", who, err, a.selfCommand(), taskID)
			a.notef("mcptask: %s asks: %s", who, oneLine(p.Message))
			a.errorf("%v", ue)
			a.abort(ue)
			return nil, ue
		}
		a.notef("mcptask: %s asks: %s\nmcptask: answered from --answer/--answers: %s", who, oneLine(p.Message), describeAnswer(r))
		return r, nil
	}
	if !a.stdinTTY {
		a.notef("mcptask: %s asks: %s\nmcptask: declined: standard input is not a terminal "+
			"(answer without a terminal with --answer key=value or --answers FILE)", who, oneLine(p.Message))
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	if a.view != nil {
		a.view.Pause()
		defer a.view.Resume()
	}
	if a.lines == nil {
		a.lines = &lineReader{r: a.stdin}
	}
	r, err := promptElicit(ctx, a.lines, a.stderr, who, p)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(a.stderr, "mcptask: sent: %s\n", describeAnswer(r))
	return r, nil
}

// samplingError ends a wait for a task that asks for sampling, which
// mcptask cannot answer.
type samplingError struct{ taskID string }

func (e *samplingError) Error() string {
	return fmt.Sprintf("task %s waits for an LLM completion (sampling), which mcptask cannot answer", e.taskID)
}

// sample meets a task's sampling request: mcptask has no language model.
// It says so (once per task), then ends the wait with exit 8, or, with
// --wait-sampling, leaves the request unanswered for a host and goes on
// waiting.
func (a *app) sample(_ context.Context, taskID string, _ *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	a.promptMu.Lock()
	first := !a.sampled[taskID]
	if a.sampled == nil {
		a.sampled = map[string]bool{}
	}
	a.sampled[taskID] = true
	a.promptMu.Unlock()
	who := "the server"
	if taskID != "" {
		who = "task " + taskID
	}
	if first {
		a.notef("mcptask: %s asks the client for an LLM completion (sampling); mcptask cannot answer it: use a host "+
			"(an MCP client with a language model, such as Claude Code or VS Code)", who)
	}
	if a.cmd.waitSampling {
		if first {
			a.notef("mcptask: --wait-sampling: waiting on, for a host to answer it")
		}
		return nil, nil
	}
	err := &samplingError{taskID}
	a.abort(err)
	return nil, err
}

func describeAnswer(r *mcp.ElicitResult) string {
	if r.Action != "accept" || len(r.Content) == 0 {
		return r.Action
	}
	b, _ := json.Marshal(r.Content)
	return r.Action + " " + string(b)
}

// lineReader reads lines from a reader on demand, so that a prompt can
// give up when its context ends.
type lineReader struct {
	r     io.Reader
	once  sync.Once
	lines chan string
}

func (l *lineReader) readLine(ctx context.Context) (string, error) {
	l.once.Do(func() {
		l.lines = make(chan string)
		go func() {
			sc := bufio.NewScanner(l.r)
			for sc.Scan() {
				l.lines <- sc.Text()
			}
			close(l.lines)
		}()
	})
	select {
	case <-ctx.Done():
		return "", context.Cause(ctx)
	case s, ok := <-l.lines:
		if !ok {
			return "", io.EOF
		}
		return s, nil
	}
}

// promptElicit asks a person on the terminal to answer an elicitation:
// accept (then each field of the requested schema), decline or cancel.
// End of input cancels.
func promptElicit(ctx context.Context, in *lineReader, out io.Writer, who string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	fmt.Fprintf(out, "\n? %s asks:\n", who)
	for line := range strings.Lines(strings.TrimSpace(p.Message)) {
		fmt.Fprintf(out, "  %s", line)
	}
	fmt.Fprintln(out)
	fields, err := parseSchema(p.RequestedSchema)
	if err != nil {
		fmt.Fprintf(out, "  (the requested schema cannot be read: %v)\n", err)
	}
	if p.Mode == "url" || p.URL != "" {
		fmt.Fprintf(out, "  Open this address to continue: %s\n", p.URL)
	}

	ask := func(prompt string) (string, bool, error) {
		fmt.Fprint(out, prompt)
		s, err := in.readLine(ctx)
		if err == io.EOF {
			fmt.Fprintln(out)
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		return strings.TrimSpace(s), true, nil
	}
	cancelled := &mcp.ElicitResult{Action: "cancel"}

	for {
		s, ok, err := ask("  Reply: [a]ccept, [d]ecline or [c]ancel? [a] ")
		if err != nil {
			return nil, err
		}
		if !ok {
			return cancelled, nil
		}
		switch strings.ToLower(s) {
		case "", "a", "accept", "y", "yes":
		case "d", "decline", "n", "no":
			return &mcp.ElicitResult{Action: "decline"}, nil
		case "c", "cancel":
			return cancelled, nil
		default:
			fmt.Fprintln(out, "  type a, d or c")
			continue
		}
		break
	}

	content := map[string]any{}
	for i := range fields {
		f := &fields[i]
		prompt := "  " + f.label()
		if f.description != "" && f.description != f.label() {
			prompt += " (" + oneLine(f.description) + ")"
		}
		if len(f.choices) > 0 {
			fmt.Fprintf(out, "%s:\n", prompt)
			for j, c := range f.choices {
				fmt.Fprintf(out, "    %d) %s\n", j+1, c.label)
			}
			prompt = "  choose"
			if f.is("array") {
				prompt += " (comma-separated)"
			}
		}
		switch {
		case f.is("boolean") && len(f.choices) == 0:
			prompt += " [y/n]"
		case f.is("integer"):
			prompt += " [whole number]"
		case f.is("number"):
			prompt += " [number]"
		}
		if f.hasDef {
			prompt += fmt.Sprintf(" (default %v)", f.def)
		} else if !f.required {
			prompt += " (optional, Enter to skip)"
		}
		prompt += ": "
		for {
			s, ok, err := ask(prompt)
			if err != nil {
				return nil, err
			}
			if !ok {
				return cancelled, nil
			}
			if s == "" {
				if f.hasDef {
					content[f.name] = f.def
					break
				}
				if !f.required {
					break
				}
				fmt.Fprintln(out, "  this answer is required")
				continue
			}
			v, err := parseFieldInput(f, s)
			if err != nil {
				fmt.Fprintf(out, "  %v; try again\n", err)
				continue
			}
			content[f.name] = v
			break
		}
	}
	return &mcp.ElicitResult{Action: "accept", Content: content}, nil
}
