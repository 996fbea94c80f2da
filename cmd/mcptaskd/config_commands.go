package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/source/command"
)

// CommandConfig is one entry of the configuration file's commands: a
// program run as a tool (see docs/adapters.md).
//
//	commands:
//	  deploy:
//	    description: Deploys a service (asks for confirmation)
//	    inputSchema:
//	      type: object
//	      properties: {service: {type: string}, version: {type: string}}
//	      required: [service, version]
//	    argv: [scripts/deploy.sh, --service, "{service}", --version, "{version}"]
//	    cwd: /srv/deploy                # default: mcptaskd's working directory
//	    env:
//	      allow: [HOME, LANG]           # inherited from mcptaskd (nothing else is)
//	      set: {DEPLOY_TOKEN: "${file:/run/secrets/deploy}"}
//	    timeout: 30m
//	    killGrace: 10s                  # SIGTERM, then SIGKILL after this
//	    task: required                  # optional | required | forbidden
//	    rerunnable: false
//	    maxConcurrent: 1
//	    maxTtl: 24h
//	    log: {tailKiB: 64, dir: /var/log/mcptask}
//	    progress: '^==> (.*)$'          # first group (or the line) -> status message
//
// A program (argv[0]) with a '/' that is relative, a relative cwd and a
// relative log.dir are relative to the configuration file's directory; a
// program without '/' is looked up in mcptaskd's PATH.
type CommandConfig struct {
	Description string           `yaml:"description"`
	InputSchema map[string]any   `yaml:"inputSchema"`
	Argv        []string         `yaml:"argv"`
	Cwd         string           `yaml:"cwd"`
	Env         CommandEnvConfig `yaml:"env"`
	Timeout     Duration         `yaml:"timeout"`
	KillGrace   Duration         `yaml:"killGrace"`
	Task        string           `yaml:"task"`
	Rerunnable  bool             `yaml:"rerunnable"`
	// SurvivesRestart (Linux) lets a task's command outlive mcptaskd (a
	// graceful restart, a kill -9): the restarted mcptaskd re-attaches
	// to it; RestartGrace bounds how long it runs without one (default 5m).
	SurvivesRestart bool             `yaml:"survivesRestart"`
	RestartGrace    Duration         `yaml:"restartGrace"`
	MaxConcurrent   int              `yaml:"maxConcurrent"`
	MaxTTL          Duration         `yaml:"maxTtl"`
	Log             CommandLogConfig `yaml:"log"`
	Progress        string           `yaml:"progress"`
	tool            *command.Tool    // resolved by validateCommands
}

// CommandEnvConfig is a command's environment: the variables of
// mcptaskd's environment it may inherit, and values it sets (which may
// name ${NAME} or ${file:PATH}, and are never logged).
type CommandEnvConfig struct {
	Allow []string          `yaml:"allow"`
	Set   map[string]string `yaml:"set"`
}

// CommandLogConfig is where a command's output is kept: its last tailKiB
// KiB in memory (default 64), the whole of it in DIR/TASKID.log if dir is
// set.
type CommandLogConfig struct {
	TailKiB *int   `yaml:"tailKiB"`
	Dir     string `yaml:"dir"`
}

// validateCommands checks the commands section, expanding its ${NAME} and
// ${file:PATH} references (see expand); each error starts with its line
// (see FileConfig.line).
func (fc *FileConfig) validateCommands(getenv func(string) string) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(fc.Commands)) {
		cc := fc.Commands[name]
		bad := func(field, format string, args ...any) {
			path := []string{"commands", name}
			if field != "" {
				path = append(path, strings.Split(field, ".")...)
			}
			errs = append(errs, fmt.Errorf("%d: %s: %s", fc.line(path...), strings.Join(path, "."), fmt.Sprintf(format, args...)))
		}
		n := len(errs)
		if name == "" || !toolNamePattern.MatchString(name) || len(name) > 128 {
			bad("", "%q is not a tool name: want letters, digits, '_', '-' or '.'", name)
		}
		if _, ok := fc.HTTPJobs[name]; ok {
			bad("", "the name is also an httpJobs entry's: a tool name names one tool")
		}
		if err := checkTask(cc.Task); err != nil {
			bad("task", "%v", err)
		}
		if cc.MaxConcurrent < 0 {
			bad("maxConcurrent", "must not be negative")
		}
		var progress *regexp.Regexp
		if cc.Progress != "" {
			var err error
			if progress, err = regexp.Compile(cc.Progress); err != nil {
				bad("progress", "not a regular expression (Go syntax): %v", err)
			}
		}
		tail := command.DefaultLogTail
		if cc.Log.TailKiB != nil {
			if *cc.Log.TailKiB <= 0 || *cc.Log.TailKiB > 64<<10 {
				bad("log.tailKiB", "%d: want 1 to 65536", *cc.Log.TailKiB)
			}
			tail = *cc.Log.TailKiB << 10
		}
		set := map[string]string{}
		var secrets []string // the values of ${...}: never shown
		for _, k := range slices.Sorted(maps.Keys(cc.Env.Set)) {
			for _, ref := range envRef.FindAllString(cc.Env.Set[k], -1) {
				if sec, _ := expand(ref, getenv); sec != "" {
					secrets = append(secrets, sec)
				}
			}
			if k == "" || strings.ContainsAny(k, "=\x00") {
				bad("env.set."+k, "%q is not an environment variable's name", k)
			}
			val, problems := expand(cc.Env.Set[k], getenv)
			for _, p := range problems {
				bad("env.set."+k, "%s", p)
			}
			set[k] = val
		}
		for _, k := range cc.Env.Allow {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				bad("env.allow", "%q is not an environment variable's name", k)
			}
		}
		argv := slices.Clone(cc.Argv)
		if len(argv) > 0 && strings.Contains(argv[0], "/") && !filepath.IsAbs(argv[0]) && fc.dir != "" {
			argv[0] = filepath.Join(fc.dir, argv[0])
		}
		t := command.Tool{
			Name: name, Description: cc.Description, InputSchema: cc.InputSchema, Argv: argv,
			Dir: fc.path(cc.Cwd), Env: command.Env{Allow: cc.Env.Allow, Set: set},
			Timeout: time.Duration(cc.Timeout), KillGrace: time.Duration(cc.KillGrace),
			Support: mcptask.TaskSupport(cc.Task), Rerunnable: cc.Rerunnable, MaxConcurrent: cc.MaxConcurrent,
			SurvivesRestart: cc.SurvivesRestart, RestartGrace: time.Duration(cc.RestartGrace),
			MaxTTL: time.Duration(cc.MaxTTL), LogTail: tail, LogDir: fc.path(cc.Log.Dir), Progress: progress,
			Secrets: secrets,
		}
		if len(errs) == n {
			if err := command.Check(t); err != nil {
				msg := strings.TrimPrefix(err.Error(), "commands: "+name+": ")
				field := ""
				for _, f := range [][2]string{{"argv", "argv"}, {"program", "argv"}, {"inputSchema", "inputSchema"}, {"working directory", "cwd"}, {"log directory", "log.dir"}} {
					if strings.Contains(msg, f[0]) {
						field = f[1]
						break
					}
				}
				bad(field, "%s", msg)
			}
		}
		cc.tool = &t
		fc.Commands[name] = cc
	}
	return errs
}

// path resolves a relative path of the file against its directory.
func (fc *FileConfig) path(p string) string {
	if p == "" || filepath.IsAbs(p) || fc.dir == "" {
		return p
	}
	return filepath.Join(fc.dir, p)
}

// commandTools returns the file's commands, in name order.
func (fc *FileConfig) commandTools() []command.Tool {
	if fc == nil {
		return nil
	}
	var out []command.Tool
	for _, name := range slices.Sorted(maps.Keys(fc.Commands)) {
		if t := fc.Commands[name].tool; t != nil {
			out = append(out, *t)
		}
	}
	return out
}

// describeCommands is what -check-config says of the commands.
func (fc *FileConfig) describeCommands() []string {
	var out []string
	for _, t := range fc.commandTools() {
		notes := []string{"task " + string(orDefault(t.Support, mcptask.Optional))}
		if t.Timeout > 0 {
			notes = append(notes, "timeout "+t.Timeout.String())
		}
		if t.MaxConcurrent > 0 {
			notes = append(notes, fmt.Sprintf("at most %d at once", t.MaxConcurrent))
		}
		if t.Rerunnable {
			notes = append(notes, "rerunnable")
		}
		if t.SurvivesRestart {
			notes = append(notes, "survives a restart")
		}
		out = append(out, fmt.Sprintf("command %s (%s; %s)", t.Name, t.Argv[0], strings.Join(notes, ", ")))
	}
	return out
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
