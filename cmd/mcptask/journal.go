package main

import (
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
// journal's tasks of --stdio servers left out, by command.
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
	if a.g.targetSet {
		if slices.ContainsFunc(entries, func(e client.JournalEntry) bool { return e.Target == a.g.target() }) {
			return []string{a.g.target()}, nil
		}
		return nil, nil
	}
	skipped = map[string]int{}
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Target, "http://") || strings.HasPrefix(e.Target, "https://"):
			if !slices.Contains(targets, e.Target) {
				targets = append(targets, e.Target)
			}
		case e.Target != "":
			skipped[e.Target]++
		}
	}
	return targets, skipped // none when the journal is empty
}

// noteSkipped says which tasks of the journal targets left out, and how
// to resume them.
func (a *app) noteSkipped(skipped map[string]int) {
	for target, n := range skipped {
		cmd, ok := strings.CutPrefix(target, "stdio:")
		if ok {
			a.notef("mcptask: the journal holds %d task(s) of a stdio server; resume them with: mcptask --stdio %s resume", n, shellQuote(cmd))
		} else {
			a.notef("mcptask: the journal holds %d task(s) of %s, which mcptask cannot reach by itself", n, target)
		}
	}
}
