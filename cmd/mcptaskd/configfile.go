package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/source/gateway"
	"go.yaml.in/yaml/v3"
)

// FileConfig is the configuration file of -config: the tools mcptaskd
// serves. YAML (which also reads JSON):
//
//	demo: true            # the demo tools (the default)
//	correlationKeys:      # host correlation keys of a call's _meta, stored
//	  - claudecode/toolUseId  # with its task (the default; [] for none)
//	drain:                # this instance's drain (SIGHUP re-reads this)
//	  all: false
//	  tools: [deploy_with_confirmation]
//	  fallback: refuse    # sync, handoff or jobs (docs/rollout.md)
//	rollout:              # per tool: its fallback and its approval
//	  deploy_with_confirmation:
//	    fallback: handoff
//	    approval: {approvers: [alice], expires: 1h, reason: prod}
//	jobTools:             # job_start, job_status... for hosts without tasks
//	  enabled: false
//	  prefix: job_
//	mcpServers:           # as in a host's configuration
//	  everything:
//	    command: npx
//	    args: ["-y", "@modelcontextprotocol/server-everything"]
//	    env: {API_KEY: "${EVERYTHING_API_KEY}"}
//	    # mcptask's own fields:
//	    tools: [longRunningOperation]   # re-export these only (default: all)
//	    prefix: ""                      # prepended to each exported name
//	    maxSessions: 4                  # calls in flight (stdio: processes)
//	    logLevel: info                  # its log messages into task logs (off: none)
//	    task: optional                  # task support of its tools
//	    rerunnable: false               # may a call be made again after a crash
//	    timeout: 30m                    # each call's limit
//	    maxTtl: 2h                      # cap on the retention of its tasks
//	    maxConcurrent: 8                # its tasks running at once, all tools
//	                                    # together; the others wait, queued
//	    toolOptions:
//	      longRunningOperation: {task: required, timeout: 10m, maxConcurrent: 2}
//	    toolMeta:                       # added to a tool's _meta in tools/list
//	      longRunningOperation: {"anthropic/maxResultSizeChars": 200000}
//	      "*": {}                       # (every tool of the server)
//	  remote:
//	    url: https://mcp.example.com/mcp
//	    headers: {Authorization: "Bearer ${REMOTE_TOKEN}"}
//
// Values of env and headers may name environment variables as ${NAME}
// (an unset one is an error) or files as ${file:PATH} (the file's content,
// without a final newline), so that secrets stay out of the file; they
// are never logged.
type FileConfig struct {
	Demo *bool `yaml:"demo"`
	// CorrelationKeys are the host correlation keys read from a call's
	// _meta and stored with its task (mcptask.Options.CorrelationKeys):
	// absent means mcptask.DefaultCorrelationKeys, an empty list none.
	CorrelationKeys *[]string `yaml:"correlationKeys"`
	// Drain stops new tasks, of every tool or of some, while existing
	// tasks go on; SIGHUP re-reads it without a restart.
	Drain DrainConfig `yaml:"drain"`
	// JobTools adds the job API: ordinary tools that start and follow
	// tasks, for hosts that declare no task support.
	JobTools   JobToolsConfig          `yaml:"jobTools"`
	MCPServers map[string]ServerConfig `yaml:"mcpServers"`
	// Commands are programs run as tools (config_commands.go).
	Commands map[string]CommandConfig `yaml:"commands"`
	// HTTPJobs are jobs of HTTP job APIs run as tools
	// (config_httpjobs.go).
	HTTPJobs map[string]HTTPJobConfig `yaml:"httpJobs"`
	// Events configures the MCP Events of the daemon (docs/events.md).
	Events EventsConfig `yaml:"events"`
	// Rollout sets tools' fallbacks and approvals (docs/rollout.md).
	Rollout map[string]RolloutToolConfig `yaml:"rollout"`
	// Workflows are tools made of steps that call other tools
	// (config_workflows.go, docs/workflows.md).
	Workflows map[string]WorkflowConfig `yaml:"workflows"`
	dir       string                    // the file's directory: relative paths in it are resolved against it
	root      *yaml.Node                // the parsed document, for line numbers (see line)
	nodes     map[string]*yaml.Node     // where each server's block is, for errors
	lines     map[string]int            // line of some top-level fields' values ("drain.fallback", "jobTools.prefix")
	toolNodes map[string]map[string]int // line of each toolOptions entry
}

// EventsConfig is the events section of the configuration file.
type EventsConfig struct {
	// Webhooks enables webhook delivery (as -webhooks does).
	Webhooks bool `yaml:"webhooks"`
	// PublishLog names the task-log streams whose lines every tool's
	// tasks publish as output events ("stdout", "stderr" of commands,
	// "job" of HTTP jobs, "log" of upstreams; "*" for all).
	PublishLog []string `yaml:"publishLog"`
	// VerifiedCallbacks lists callback URL prefixes that need no
	// verification handshake.
	VerifiedCallbacks []string `yaml:"verifiedCallbacks"`
	// MaxSubscriptions caps one requester's webhook subscriptions.
	MaxSubscriptions int `yaml:"maxSubscriptions"`
}

// DrainConfig is the drain switch of the configuration file.
type DrainConfig struct {
	All   bool     `yaml:"all"`
	Tools []string `yaml:"tools"`
	// Fallback is what a drained tool's task-augmented calls get: refuse
	// (the default) or sync (optional tools answer as plain calls).
	Fallback string `yaml:"fallback"`
}

// state returns the drain switch dc sets.
func (dc DrainConfig) state() mcptask.DrainState {
	fb := mcptask.DrainFallback(dc.Fallback)
	if fb == "" {
		fb = mcptask.DrainRefuse
	}
	return mcptask.DrainState{All: dc.All, Tools: slices.Clone(dc.Tools), Fallback: fb}
}

// JobToolsConfig is the job API of the configuration file.
type JobToolsConfig struct {
	Enabled bool `yaml:"enabled"`
	// Prefix is prepended to start, status, result, cancel and answer
	// (default "job_").
	Prefix *string `yaml:"prefix"`
}

// prefix returns the job tools' prefix.
func (jc JobToolsConfig) prefix() string {
	if jc.Prefix == nil {
		return mcptask.DefaultJobPrefix
	}
	return *jc.Prefix
}

var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`)

// ServerConfig is one entry of mcpServers.
type ServerConfig struct {
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	Cwd     string            `yaml:"cwd"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Type is accepted as hosts write it ("stdio", "http",
	// "streamable-http"), and checked against command/url.
	Type string `yaml:"type"`

	Tools           []string `yaml:"tools"`
	Prefix          string   `yaml:"prefix"`
	MaxSessions     int      `yaml:"maxSessions"`
	ProtocolVersion string   `yaml:"protocolVersion"`
	LogLevel        string   `yaml:"logLevel"`
	ToolConfig      `yaml:",inline"`
	ToolOptions     map[string]ToolConfig `yaml:"toolOptions"`
	// ToolMeta adds entries to the _meta of the server's tools in
	// tools/list, by upstream tool name ("*": every tool of the server);
	// see gateway.Upstream.ToolMeta.
	ToolMeta map[string]map[string]any `yaml:"toolMeta"`
}

// ToolConfig is how the tools of an upstream run.
type ToolConfig struct {
	Task       string   `yaml:"task"`
	Rerunnable *bool    `yaml:"rerunnable"`
	Timeout    Duration `yaml:"timeout"`
	MaxTTL     Duration `yaml:"maxTtl"`
	// MaxConcurrent caps the tasks running at once: on a server's entry,
	// of all its tools together (one queue); in toolOptions, of that tool
	// alone (a queue of its own).
	MaxConcurrent int `yaml:"maxConcurrent"`
	// Observe exports the tool in shadow mode (gateway.ToolPolicy.Observe):
	// in toolOptions only.
	Observe bool `yaml:"observe"`
}

// Duration is a time.Duration written as "30s", "10m".
type Duration time.Duration

// UnmarshalYAML reads a duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration (e.g. 30s, 10m)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// loadFileConfig reads and validates the configuration file at path. Its
// errors name the file, the line and the field.
func loadFileConfig(path string, getenv func(string) string) (*FileConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	fc, err := parseFileConfigIn(data, filepath.Dir(path), getenv)
	if err != nil {
		// One problem per line, each as FILE:LINE: field: problem.
		var lines []string
		for _, l := range strings.Split(err.Error(), "\n") {
			lines = append(lines, path+":"+l)
		}
		return nil, fmt.Errorf("invalid configuration:\n%s", strings.Join(lines, "\n"))
	}
	return fc, nil
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

// typeError matches the decoder's error for a value of the wrong type.
var typeError = regexp.MustCompile("^cannot unmarshal !!(\\w+) (`.*`|\\S+) into (\\S+)$")

// goTypeName says a Go type of the configuration as what a user writes.
func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a whole number"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return "a mapping (key: value)"
}

// fieldAt is the dotted path of the deepest field whose key, or scalar
// value, is on line; "" if there is none.
func fieldAt(n *yaml.Node, line int) string {
	best, depth := "", 0
	var walk func(n *yaml.Node, path []string)
	walk = func(n *yaml.Node, path []string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := append(slices.Clip(path), k.Value)
				if (k.Line == line || (v.Kind == yaml.ScalarNode && v.Line == line)) && len(p) >= depth {
					best, depth = strings.Join(p, "."), len(p)
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		}
	}
	walk(n, nil)
	return best
}

// unknownField is yaml's error for a key that no field decodes.
var unknownField = regexp.MustCompile(`^field (\S+) not found in type .*$`)

// keyPath returns the dotted path of the mapping key name on line (""
// if none is there).
func keyPath(n *yaml.Node, line int, name string) string {
	var walk func(n *yaml.Node, path []string) string
	walk = func(n *yaml.Node, path []string) string {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := append(slices.Clip(path), k.Value)
				if k.Line == line && k.Value == name {
					return strings.Join(p, ".")
				}
				if found := walk(v, p); found != "" {
					return found
				}
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				if found := walk(c, path); found != "" {
					return found
				}
			}
		}
		return ""
	}
	return walk(n, nil)
}

// maxNodes bounds the nodes of a configuration once its aliases are
// expanded: a few aliases of aliases (a "billion laughs" document) would
// otherwise expand to gigabytes.
const maxNodes = 1 << 20

// checkAliases refuses a document whose aliases expand it past maxNodes,
// counting (without expanding anything) each node's size once.
func checkAliases(root *yaml.Node) error {
	size := map[*yaml.Node]int{}
	worst, worstSize := (*yaml.Node)(nil), 0
	var count func(n *yaml.Node) int
	count = func(n *yaml.Node) int {
		if s, ok := size[n]; ok {
			if s < 0 { // an alias inside its own anchor
				return maxNodes + 1
			}
			return s
		}
		size[n] = -1
		total := 1
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			total = count(n.Alias)
			if total > worstSize {
				worst, worstSize = n, total
			}
		}
		for _, c := range n.Content {
			total = min(total+count(c), maxNodes+1)
		}
		size[n] = total
		return total
	}
	if count(root) <= maxNodes {
		return nil
	}
	if worst == nil {
		return fmt.Errorf("1: the document has more than %d nodes: refused", maxNodes)
	}
	where := ""
	if f := fieldAt(docOf(root), worst.Line); f != "" {
		where = f + ": "
	}
	return fmt.Errorf("%d: %sthe aliases (*%s) expand the document past %d nodes: refused (a YAML alias bomb?)", worst.Line, where, worst.Value, maxNodes)
}

// wholeNumbers checks that the integer fields of t are written as whole
// numbers in n (the decoder would cut 1.5 to 1); its errors name the line
// and the field.
func wholeNumbers(t reflect.Type, n *yaml.Node, path []string) []error {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
		if n == nil {
			return nil
		}
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil
	}
	var errs []error
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" {
			errs = append(errs, fmt.Errorf("%d: %s: %s: want a whole number", n.Line, strings.Join(path, "."), n.Value))
		}
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		fields := map[string]reflect.Type{}
		var collect func(t reflect.Type)
		collect = func(t reflect.Type) {
			for f := range t.Fields() {
				name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				switch {
				case opts == "inline":
					collect(f.Type)
				case name != "" && name != "-" && f.IsExported():
					fields[name] = f.Type
				}
			}
		}
		collect(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if ft, ok := fields[n.Content[i].Value]; ok {
				errs = append(errs, wholeNumbers(ft, n.Content[i+1], append(slices.Clip(path), n.Content[i].Value))...)
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			errs = append(errs, wholeNumbers(t.Elem(), n.Content[i+1], append(slices.Clip(path), n.Content[i].Value))...)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for _, c := range n.Content {
			errs = append(errs, wholeNumbers(t.Elem(), c, path)...)
		}
	}
	return errs
}

// goType matches the Go type the YAML decoder names in an unknown-field
// error.
var goType = regexp.MustCompile(`(field \S+ not found) in type .*$`)

// parseFileConfig parses a configuration; its errors start with the line.
func parseFileConfig(data []byte, getenv func(string) string) (*FileConfig, error) {
	return parseFileConfigIn(data, "", getenv)
}

// parseFileConfigIn parses a configuration whose relative paths are
// relative to dir ("" means the working directory).
func parseFileConfigIn(data []byte, dir string, getenv func(string) string) (*FileConfig, error) {
	fc := FileConfig{dir: dir}
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			i += size
		}
		line := 1 + bytes.Count(data[:i], []byte("\n"))
		col := i - bytes.LastIndexByte(data[:i], '\n')
		return nil, fmt.Errorf("%d: the file is not valid UTF-8 (byte 0x%02x in column %d)", line, data[i], col)
	}
	// The document as nodes first (aliases not expanded): the lines of
	// the fields, and the checks the decoder does not make.
	var root yaml.Node
	if yaml.Unmarshal(data, &root) == nil && root.Kind != 0 {
		if err := checkAliases(&root); err != nil {
			return nil, err
		}
		if errs := wholeNumbers(reflect.TypeFor[FileConfig](), docOf(&root), nil); len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		// yaml's "yaml: line 3: ..." or "yaml: unmarshal errors:\n  line
		// 3: field x not found in type main.ServerConfig": say it as
		// FILE:LINE: ..., one error per line.
		var lines []string
		for _, l := range strings.Split(strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n"), "\n") {
			l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "yaml: "))
			if m := yamlLine.FindStringSubmatch(l); m != nil {
				l = yamlLine.ReplaceAllString(l, "")
				if t := typeError.FindStringSubmatch(l); t != nil {
					l = fmt.Sprintf("want %s, not %s", goTypeName(t[3]), t[2])
				}
				n, _ := strconv.Atoi(m[1])
				if u := unknownField.FindStringSubmatch(l); u != nil {
					// The unknown key named by its whole path, e.g.
					// httpJobs.build.cancel.bodyy: unknown field.
					if path := keyPath(docOf(&root), n, u[1]); path != "" {
						l = path + ": unknown field"
					}
				} else if field := fieldAt(docOf(&root), n); field != "" {
					l = field + ": " + l
				}
				l = m[1] + ": " + l
			}
			l = strings.ReplaceAll(l, "in type main.ServerConfig", "in an mcpServers entry")
			l = strings.ReplaceAll(l, "in type main.FileConfig", "at the top level")
			l = strings.ReplaceAll(l, "in type main.ToolConfig", "in toolOptions")
			l = strings.ReplaceAll(l, "in type main.HTTPJobConfig", "in an httpJobs entry")
			l = strings.ReplaceAll(l, "in type main.CommandConfig", "in a commands entry")
			// Any other Go type (a nested block) is no name for a user.
			l = goType.ReplaceAllString(l, "$1")
			if l != "" {
				lines = append(lines, l)
			}
		}
		return nil, errors.New(strings.Join(lines, "\n"))
	}
	fc.root = &root
	fc.nodes, fc.toolNodes = map[string]*yaml.Node{}, map[string]map[string]int{}
	fc.lines = map[string]int{}
	if n := child(docOf(&root), "correlationKeys"); n != nil {
		fc.lines["correlationKeys"] = fc.line("correlationKeys")
		if fc.CorrelationKeys == nil { // correlationKeys: with no value
			fc.CorrelationKeys = &[]string{}
		}
	}
	for _, f := range [][2]string{{"drain", "fallback"}, {"jobTools", "prefix"}} {
		if n := child(child(docOf(&root), f[0]), f[1]); n != nil {
			fc.lines[f[0]+"."+f[1]] = n.Line
		}
	}
	if servers := child(docOf(&root), "mcpServers"); servers != nil && servers.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(servers.Content); i += 2 {
			name := servers.Content[i].Value
			fc.nodes[name] = servers.Content[i]
			if to := child(servers.Content[i+1], "toolOptions"); to != nil && to.Kind == yaml.MappingNode {
				fc.toolNodes[name] = map[string]int{}
				for j := 0; j+1 < len(to.Content); j += 2 {
					fc.toolNodes[name][to.Content[j].Value] = to.Content[j].Line
				}
			}
		}
	}
	if err := fc.validate(getenv); err != nil {
		return nil, err
	}
	return &fc, nil
}

// line returns the line of the deepest key of path found in the file
// (e.g. line("commands", "deploy", "argv")), 0 if not even the first is.
func (fc *FileConfig) line(path ...string) int {
	if fc.root == nil {
		return 0
	}
	n, line := docOf(fc.root), 0
	for _, key := range path {
		if n != nil && n.Kind == yaml.SequenceNode {
			// A list of named entries (a workflow's steps): the entry
			// whose name is key.
			var next *yaml.Node
			for _, e := range n.Content {
				if v := child(e, "name"); v != nil && v.Value == key {
					line, next = e.Line, e
					break
				}
			}
			if next == nil {
				break
			}
			n = next
			continue
		}
		if n == nil || n.Kind != yaml.MappingNode {
			break
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				line, next = n.Content[i].Line, n.Content[i+1]
				break
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}

func docOf(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return n.Content[0]
	}
	return n
}

func child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// expand returns v with its ${NAME} and ${file:PATH} references replaced
// (see FileConfig), and the problems with them, each naming the variable
// or the file, never a value.
func expand(v string, getenv func(string) string) (string, []string) {
	var problems []string
	out := envRef.ReplaceAllStringFunc(v, func(ref string) string {
		sm := envRef.FindStringSubmatch(ref)
		if file := sm[1]; file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				problems = append(problems, fmt.Sprintf("names the file %s: %v", file, errors.Unwrap(err)))
				return ""
			}
			return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		}
		val := getenv(sm[2])
		if val == "" {
			problems = append(problems, fmt.Sprintf("names the environment variable %s, which is not set", sm[2]))
		}
		return val
	})
	return out, problems
}

var envRef = regexp.MustCompile(`\$\{(?:file:([^}]+)|([A-Za-z_][A-Za-z0-9_]*))\}`)

// validate checks the configuration and expands ${NAME} references.
func (fc *FileConfig) validate(getenv func(string) string) error {
	var errs []error
	errs = append(errs, fc.validateCommands(getenv)...)
	errs = append(errs, fc.validateHTTPJobs(getenv)...)
	errs = append(errs, fc.validateNames()...)
	errs = append(errs, fc.validateRollout()...)
	errs = append(errs, fc.validateWorkflows()...)
	switch fc.Drain.Fallback {
	case "", "refuse", "sync", "handoff", "jobs":
	default:
		errs = append(errs, fmt.Errorf("%d: drain.fallback: %q: want refuse, sync, handoff or jobs", fc.lines["drain.fallback"], fc.Drain.Fallback))
	}
	if fc.CorrelationKeys != nil {
		if err := adapter.CheckCorrelationKeys(*fc.CorrelationKeys); err != nil {
			errs = append(errs, fmt.Errorf("%d: correlationKeys: %v", fc.lines["correlationKeys"], err))
		}
	}
	if p := fc.JobTools.prefix(); !toolNamePattern.MatchString(p) || len(p) > 64 {
		errs = append(errs, fmt.Errorf("%d: jobTools.prefix: %q: want at most 64 letters, digits, '_', '-' or '.'", fc.lines["jobTools.prefix"], p))
	}
	names := make([]string, 0, len(fc.MCPServers))
	for name := range fc.MCPServers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := fc.MCPServers[name]
		line := 0
		if n := fc.nodes[name]; n != nil {
			line = n.Line
		}
		bad := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%d: mcpServers.%s%s: %s", line, name, field, fmt.Sprintf(format, args...)))
		}
		switch {
		case s.Command == "" && s.URL == "":
			bad("", "set command (a stdio server) or url (a Streamable HTTP server)")
		case s.Command != "" && s.URL != "":
			bad("", "set command or url, not both")
		}
		switch s.Type {
		case "", "stdio", "http", "streamable-http", "streamableHttp":
		default:
			bad(".type", "%q: want stdio or http (or leave it out)", s.Type)
		}
		if s.Type == "stdio" && s.Command == "" || (s.Type == "http" || s.Type == "streamable-http" || s.Type == "streamableHttp") && s.URL == "" {
			bad(".type", "%q does not match the server's command or url", s.Type)
		}
		if s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			bad(".url", "%q: want an http:// or https:// URL", s.URL)
		}
		if s.MaxSessions < 0 {
			bad(".maxSessions", "must not be negative")
		}
		if err := checkTask(s.Task); err != nil {
			bad(".task", "%v", err)
		}
		if s.MaxConcurrent < 0 {
			bad(".maxConcurrent", "must not be negative")
		}
		if s.Observe {
			bad(".observe", "observe is set per tool, in toolOptions (shadow mode of one tool)")
		}
		for tool, tc := range s.ToolOptions {
			l := fc.toolNodes[name][tool]
			if err := checkTask(tc.Task); err != nil {
				errs = append(errs, fmt.Errorf("%d: mcpServers.%s.toolOptions.%s.task: %v", l, name, tool, err))
			}
			if tc.MaxConcurrent < 0 {
				errs = append(errs, fmt.Errorf("%d: mcpServers.%s.toolOptions.%s.maxConcurrent: must not be negative", l, name, tool))
			}
		}
		for _, tool := range slices.Sorted(maps.Keys(s.ToolMeta)) {
			field := ".toolMeta." + tool
			switch {
			case tool == "":
				bad(".toolMeta", "an empty tool name")
			case tool != "*" && len(s.Tools) > 0 && !slices.Contains(s.Tools, tool):
				bad(field, "names a tool that tools does not re-export")
			}
			if _, err := json.Marshal(s.ToolMeta[tool]); err != nil {
				bad(field, "not a JSON object (%v)", err)
			}
		}
		for _, m := range []map[string]string{s.Env, s.Headers} {
			for k, v := range m {
				val, problems := expand(v, getenv)
				for _, p := range problems {
					bad("", "%s %s", k, p)
				}
				m[k] = val
			}
		}
	}
	return errors.Join(errs...)
}

// demoTools are the names of the demo tools (package demo; a test keeps
// the list in step with it).
var demoTools = []string{"long_computation", "deploy_with_confirmation", "flaky_migration", "lint_report", "echo"}

// validateNames checks that each tool name of the file names one tool (a
// command, an HTTP job, a demo tool, a job tool, a tool an upstream's
// tools list names), and that drain.tools names tools of the file.
func (fc *FileConfig) validateNames() []error {
	var errs []error
	owner := map[string]string{}
	if fc.demoEnabled() {
		for _, n := range demoTools {
			owner[n] = "a demo tool's (set demo: false, or choose another name)"
		}
	}
	if fc.JobTools.Enabled {
		for _, n := range mcptask.JobToolNames(fc.JobTools.prefix()) {
			owner[n] = "a job tool's (jobTools)"
		}
	}
	open := []string{} // prefixes of upstreams whose tools are not listed
	for _, name := range slices.Sorted(maps.Keys(fc.MCPServers)) {
		s := fc.MCPServers[name]
		if len(s.Tools) == 0 {
			open = append(open, s.Prefix)
		}
		for _, t := range s.Tools {
			if _, ok := owner[s.Prefix+t]; !ok {
				owner[s.Prefix+t] = "a tool's of mcpServers." + name
			}
		}
	}
	for _, section := range []struct {
		name  string
		names []string
	}{{"commands", slices.Sorted(maps.Keys(fc.Commands))}, {"httpJobs", slices.Sorted(maps.Keys(fc.HTTPJobs))}, {"workflows", slices.Sorted(maps.Keys(fc.Workflows))}} {
		for _, n := range section.names {
			if o, ok := owner[n]; ok {
				errs = append(errs, fmt.Errorf("%d: %s.%s: the name is also %s: a tool name names one tool", fc.line(section.name, n), section.name, n, o))
			}
		}
	}
	// A workflow's steps call tools of this file.
	for _, name := range slices.Sorted(maps.Keys(fc.Workflows)) {
		for _, s := range fc.Workflows[name].Steps {
			_, known := owner[s.Tool]
			_, command := fc.Commands[s.Tool]
			_, job := fc.HTTPJobs[s.Tool]
			_, wf := fc.Workflows[s.Tool]
			if s.Tool == "" || known || command || job || wf || slices.ContainsFunc(open, func(p string) bool { return strings.HasPrefix(s.Tool, p) }) {
				continue
			}
			errs = append(errs, fmt.Errorf("%d: workflows.%s.steps.%s.tool: %q names no tool of this file (no command, HTTP job, workflow, demo tool or upstream tool of that name)",
				fc.line("workflows", name, "steps", s.Name, "tool"), name, s.Name, s.Tool))
		}
	}
	var items []*yaml.Node
	if n := child(child(docOf(fc.root), "drain"), "tools"); n != nil {
		items = n.Content
	}
	for i, t := range fc.Drain.Tools {
		_, known := owner[t]
		_, command := fc.Commands[t]
		_, job := fc.HTTPJobs[t]
		if known || command || job || slices.ContainsFunc(open, func(p string) bool { return strings.HasPrefix(t, p) }) {
			continue
		}
		line := fc.line("drain", "tools")
		if i < len(items) {
			line = items[i].Line
		}
		errs = append(errs, fmt.Errorf("%d: drain.tools: %q names no tool of this file (no command, HTTP job, demo tool, job tool or upstream tool of that name)", line, t))
	}
	return errs
}

func checkTask(s string) error {
	switch s {
	case "", "optional", "required", "forbidden":
		return nil
	}
	return fmt.Errorf("%q: want optional, required or forbidden", s)
}

// drainState returns the file's drain switch (none without a file).
func (fc *FileConfig) drainState() mcptask.DrainState {
	if fc == nil {
		return DrainConfig{}.state()
	}
	return fc.Drain.state()
}

// correlationKeys returns the host correlation keys of
// mcptask.Options.CorrelationKeys: nil (the default keys) without a file
// or without correlationKeys in it.
func (fc *FileConfig) correlationKeys() []string {
	if fc == nil || fc.CorrelationKeys == nil {
		return nil
	}
	return append([]string{}, *fc.CorrelationKeys...)
}

// demoEnabled reports whether the demo tools are served.
func (fc *FileConfig) demoEnabled() bool { return fc == nil || fc.Demo == nil || *fc.Demo }

// upstreams returns the gateway's upstreams, in name order.
func (fc *FileConfig) upstreams() []gateway.Upstream {
	if fc == nil {
		return nil
	}
	var out []gateway.Upstream
	names := make([]string, 0, len(fc.MCPServers))
	for name := range fc.MCPServers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := fc.MCPServers[name]
		u := gateway.Upstream{
			Name: name, Command: s.Command, Args: s.Args, Env: s.Env, Dir: s.Cwd,
			URL: s.URL, Headers: s.Headers, Tools: s.Tools, Prefix: s.Prefix,
			MaxSessions: s.MaxSessions, ProtocolVersion: s.ProtocolVersion,
			MaxConcurrent: s.MaxConcurrent, LogLevel: s.LogLevel,
			Default:  s.ToolConfig.policy(gateway.ToolPolicy{}),
			ToolMeta: s.ToolMeta,
		}
		// The server's maxConcurrent caps its tools together, not each.
		u.Default.MaxConcurrent = 0
		for tool, tc := range s.ToolOptions {
			if u.Policies == nil {
				u.Policies = map[string]gateway.ToolPolicy{}
			}
			u.Policies[tool] = tc.policy(u.Default)
		}
		out = append(out, u)
	}
	return out
}

// policy is tc over the defaults def.
func (tc ToolConfig) policy(def gateway.ToolPolicy) gateway.ToolPolicy {
	p := def
	if tc.Task != "" {
		p.Support = mcptask.TaskSupport(tc.Task)
	}
	if tc.Rerunnable != nil {
		p.Rerunnable = *tc.Rerunnable
	}
	if tc.Timeout > 0 {
		p.Timeout = time.Duration(tc.Timeout)
	}
	if tc.MaxTTL > 0 {
		p.MaxTTL = time.Duration(tc.MaxTTL)
	}
	p.MaxConcurrent = tc.MaxConcurrent // never inherited: a tool's own cap
	p.Observe = tc.Observe             // never inherited: one tool's mode
	return p
}
