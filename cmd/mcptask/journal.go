package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"

	"github.com/mcptask/mcptask/client"
)

// readJournalEntries reads the journal file for its entries, to find the
// servers 'list' and 'resume' should visit. The client library offers no
// way to read the journal without connecting to one server (Client.Pending
// is per target), so this reads the file itself, taking any JSON object
// with "taskId" and "target" for an entry, wherever the format puts it.
// ok is false when the file cannot be read that way (the caller then asks
// the one server named on the command line); a missing file has no entries.
func readJournalEntries(path string) (entries []client.JournalEntry, ok bool) {
	if path == "" {
		return nil, false
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, true
	}
	if err != nil {
		return nil, false
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, true
	}
	d := json.NewDecoder(bytes.NewReader(data)) // one JSON value, or JSON Lines
	for {
		var v any
		err := d.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false
		}
		collectEntries(v, &entries)
	}
	return entries, true
}

func collectEntries(v any, out *[]client.JournalEntry) {
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			collectEntries(x, out)
		}
	case map[string]any:
		id, _ := v["taskId"].(string)
		target, _ := v["target"].(string)
		if id != "" {
			tool, _ := v["tool"].(string)
			wire, _ := v["wire"].(string)
			*out = append(*out, client.JournalEntry{TaskID: id, Target: target, Tool: tool, Wire: wire})
			return
		}
		for _, x := range v {
			collectEntries(x, out)
		}
	}
}
