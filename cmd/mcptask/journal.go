package main

import (
	"maps"
	"slices"
	"strings"

	"github.com/mcptask/mcptask/client"
)

// journalTool returns the tool of a task from the journal, if it is there.
func journalTool(c *client.Client, id string) string {
	entries, err := c.Pending()
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if e.TaskID == id {
			return e.Tool
		}
	}
	return ""
}

// targets returns the servers 'list' and 'resume' visit: the one the
// command line or environment names, else every server of the journal
// that mcptask can reach by itself (HTTP); none when the journal holds no
// task for them, so that nothing needs a connection. skipped counts the
// journal's tasks left out, by server: those of --stdio servers (and of
// servers mcptask cannot reach by itself) when none is named, those of
// every other server when one is.
func (a *app) targets() (targets []string, skipped map[string]int) {
	path := a.g.journalPath()
	if path == "" {
		return []string{a.g.target()}, nil
	}
	entries, err := client.ReadJournal(path)
	if err != nil {
		// Connecting to the named server reports what is wrong with it.
		return []string{a.g.target()}, nil
	}
	skipped = map[string]int{}
	if a.g.targetSet {
		for _, e := range entries {
			switch {
			case e.Target == a.g.target():
				if len(targets) == 0 {
					targets = []string{e.Target}
				}
			case e.Target != "":
				skipped[e.Target]++
			}
		}
		return targets, skipped
	}
	for _, e := range entries {
		switch {
		case isHTTP(e.Target):
			if !slices.Contains(targets, e.Target) {
				targets = append(targets, e.Target)
			}
		case e.Target != "":
			skipped[e.Target]++
		}
	}
	return targets, skipped // none when the journal is empty
}

// isHTTP reports whether target is a server's URL (not a stdio command).
func isHTTP(target string) bool {
	return strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://")
}

// countSkipped returns how many tasks skipped counts, and on how many
// servers.
func countSkipped(skipped map[string]int) (tasks, servers int) {
	for _, n := range skipped {
		tasks += n
	}
	return tasks, len(skipped)
}

// noteSkipped says which tasks of the journal targets left out, and how
// to reach them with verb ('list' or 'resume').
func (a *app) noteSkipped(skipped map[string]int, verb string) {
	for _, target := range slices.Sorted(maps.Keys(skipped)) {
		n := skipped[target]
		cmd, stdio := strings.CutPrefix(target, "stdio:")
		switch {
		case stdio:
			a.notef("mcptask: the journal holds %d task(s) of a stdio server; %s them with: mcptask --stdio %s %s", n, verb, shellQuote(cmd), verb)
		case isHTTP(target) && a.g.targetSet:
			a.notef("mcptask: the journal holds %d task(s) in flight of %s; %s them with: mcptask --url %s %s (or without --url, for every server's)", n, target, verb, shellQuote(target), verb)
		default:
			a.notef("mcptask: the journal holds %d task(s) of %s, which mcptask cannot reach by itself", n, target)
		}
	}
}
