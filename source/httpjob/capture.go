package httpjob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcptask/mcptask/task"
)

// captureRegexp is the prefix of a capture by regular expression.
const captureRegexp = "re:"

// checkCapture checks a capture's spec: a JSON pointer, or "re:" and a
// regular expression.
func checkCapture(spec string) error {
	if re, ok := strings.CutPrefix(spec, captureRegexp); ok {
		if _, err := regexp.Compile(re); err != nil {
			return fmt.Errorf("%q: not a regular expression: %v", re, err)
		}
		return nil
	}
	if spec == "" {
		return errors.New(`want a JSON pointer such as /builds/0/buildid, or "re:" and a regular expression`)
	}
	return checkPointer(spec)
}

// compileCaptures compiles the regular expressions of the tool's
// captures, by spec.
func (jt *jobTool) compileCaptures() {
	jt.res = map[string]*regexp.Regexp{}
	add := func(spec map[string]string) {
		for _, s := range spec {
			if re, ok := strings.CutPrefix(s, captureRegexp); ok {
				jt.res[s] = regexp.MustCompile(re) // checked by Check
			}
		}
	}
	for _, req := range jt.requests() {
		add(req.Capture)
	}
}

// requests returns every request of the tool.
func (jt *jobTool) requests() []Request {
	reqs := []Request{jt.Start.Request, jt.Status.Request, jt.Result.Request, jt.Cancel.Request, jt.Log.Request, jt.Failure.Request}
	for _, name := range slices.Sorted(maps.Keys(jt.Lookups)) {
		reqs = append(reqs, jt.Lookups[name])
	}
	return reqs
}

// capture keeps the values spec names that answer holds and the run has
// not captured yet, writing each to the task's log, and records them with
// the task (when it has a job to record).
func (r *run) capture(ctx context.Context, spec map[string]string, answer []byte) {
	if len(spec) == 0 {
		return
	}
	var (
		doc     any
		decoded bool
		changed bool
	)
	for _, name := range slices.Sorted(maps.Keys(spec)) {
		if _, ok := r.ref.Captured[name]; ok {
			continue
		}
		how := spec[name]
		val, ok := "", false
		if re := r.res[how]; re != nil {
			if m := re.FindSubmatch(answer); m != nil {
				val, ok = string(m[0]), true
				if len(m) > 1 {
					val = string(m[1])
				}
			}
		} else {
			if !decoded {
				doc, _ = decode(answer)
				decoded = true
			}
			if v, err := lookup(doc, how); err == nil {
				val, ok = scalarText(v)
			}
		}
		if !ok || val == "" {
			continue
		}
		if len(val) > MaxCapture || !utf8.ValidString(val) {
			r.note("the value of %s (%s) is longer than %d bytes or not text: not captured", name, how, MaxCapture)
			continue
		}
		if r.ref.Captured == nil {
			r.ref.Captured = map[string]string{}
			r.v.captured = r.ref.Captured
		}
		r.ref.Captured[name] = val
		r.note("captured %s = %s", name, val)
		changed = true
	}
	if changed && r.tk != nil && r.ref.JobID != "" {
		if err := r.record(ctx, true); err != nil {
			r.log.Warn("recording the captured values", "task", r.taskID(), "job", r.ref.JobID, "err", err)
		}
	}
}

// captured reports whether every value spec names is captured.
func (r *run) captured(spec map[string]string) bool {
	for name := range spec {
		if _, ok := r.ref.Captured[name]; !ok {
			return false
		}
	}
	return true
}

// lookups sends the lookups whose values are not all captured and whose
// templates can be filled, and captures from their answers.
func (r *run) lookups(ctx context.Context) error {
	for _, name := range slices.Sorted(maps.Keys(r.Lookups)) {
		req := r.Lookups[name]
		if r.captured(req.Capture) || !r.v.has(req) {
			continue
		}
		code, answer, err := r.send(ctx, "looking up "+name, req, http.MethodGet, "")
		if err != nil {
			return err
		}
		if code >= 300 {
			// Asked again at the next poll (the build may not exist yet).
			r.log.Debug("a lookup was not answered yet", "task", r.taskID(), "job", r.ref.JobID, "lookup", name, "status", code)
			continue
		}
		r.capture(ctx, req.Capture, answer)
	}
	return nil
}

// logState is what a run keeps of the job's log between polls.
type logState struct {
	stopped  bool      // the log is no longer followed (said in the task's log)
	recorded time.Time // when the offset was last recorded
	unsaved  bool      // the offset moved since
}

// followLog reads the job's log on from the offset reached: its lines go
// to the task's log, the last that matches Log.Progress becomes the
// status message. final reads what is left, a last line without its line
// ending included. A request that fails is tried again at the next poll;
// one the log cannot be read from stops the following, said in the
// task's log; the task goes on.
func (r *run) followLog(ctx context.Context, final bool) {
	if r.Log.URL == "" || r.logs.stopped || !r.logReady() {
		return
	}
	off := r.ref.LogOffset
	r.v.logOffset = strconv.FormatInt(off, 10)
	defer func() { r.v.logOffset = "" }()
	req := r.Log.Request
	u, headers, body, err := r.fill("reading the job's log", req)
	if err != nil {
		r.stopLog("%v", err)
		return
	}
	if r.Log.Lines == "" && off > 0 {
		headers = withDefault(headers, "Range", fmt.Sprintf("bytes=%d-", off))
	}
	// Asked once a poll, not retried: the status poll rides out outages.
	code, answer, err := r.once(ctx, "reading the job's log", cmp(req.Method, http.MethodGet), u, headers, body, "")
	switch {
	case errors.Is(err, errTooLarge):
		r.stopLog("an answer above %d bytes (a server that ignores Range sends the whole log)", MaxAnswer)
		return
	case err != nil || code == http.StatusRequestedRangeNotSatisfiable || code >= 300:
		return // asked again at the next poll (416: nothing new yet)
	}
	r.capture(ctx, req.Capture, answer)
	var lines []string
	if r.Log.Lines != "" {
		lines = r.jsonLogLines(answer, off, slices.Contains(append(names(req.URL), names(req.BodyText)...), logOffsetName) ||
			slices.Contains(bodyNames(req.Body), logOffsetName))
		r.ref.LogOffset += int64(len(lines))
	} else {
		chunk := answer
		if code != http.StatusPartialContent {
			if int64(len(answer)) < off {
				r.note("the job's log is shorter than what was read of it (%d bytes): read again from its start", off)
				off, r.ref.LogOffset = 0, 0
			}
			chunk = answer[off:]
		}
		if !final {
			// Whole lines only: the rest is read again at the next poll.
			chunk = chunk[:bytes.LastIndexByte(chunk, '\n')+1]
		}
		r.ref.LogOffset += int64(len(chunk))
		text := strings.TrimSuffix(string(chunk), "\n")
		if text != "" || len(chunk) > 0 {
			lines = strings.Split(text, "\n")
		}
	}
	progress := ""
	for _, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		if r.logTo != nil {
			r.logTo.LogStream("job", r.scrub(l))
		}
		if r.Log.Progress != nil {
			if m := r.Log.Progress.FindStringSubmatch(l); m != nil {
				progress = m[0]
				if len(m) > 1 {
					progress = m[1]
				}
			}
		}
	}
	if progress != "" {
		r.setMessage(ctx, progress)
	}
	if len(lines) > 0 {
		r.logs.unsaved = true
	}
	if r.logs.unsaved && (final || time.Since(r.logs.recorded) >= LogRecordEvery) && r.tk != nil {
		if err := r.record(ctx, true); err == nil {
			r.logs.recorded, r.logs.unsaved = time.Now(), false
		}
	}
}

// logReady reports whether the log request's templates can be filled
// ({logOffset} aside).
func (r *run) logReady() bool {
	v := r.v
	v.logOffset = "0"
	return v.has(r.Log.Request)
}

// jsonLogLines returns the new lines of a JSON log answer: the array at
// Log.Lines, from the offset reached (or whole, when the request asked
// from there).
func (r *run) jsonLogLines(answer []byte, off int64, asked bool) []string {
	doc, err := decode(answer)
	if err != nil {
		return nil
	}
	v, err := lookup(doc, r.Log.Lines)
	arr, ok := v.([]any)
	if err != nil || !ok {
		return nil
	}
	if !asked {
		if int64(len(arr)) < off {
			return nil
		}
		arr = arr[off:]
	}
	lines := make([]string, len(arr))
	for i, e := range arr {
		lines[i] = textOf(e)
	}
	return lines
}

// stopLog stops following the job's log, saying why in the task's log.
func (r *run) stopLog(format string, args ...any) {
	r.logs.stopped = true
	r.note("the job's log is no longer followed: "+format, args...)
}

// failureDetail is why a failed or cancelled job ended so: from the
// Failure request's answer (or the status answer doc), at
// Failure.Pointer, else Failure.Message filled, else at Status.Error in
// the status answer; "" when nothing says. Without ask the Failure
// request is not sent (its pointer then names nothing in doc).
func (r *run) failureDetail(ctx context.Context, doc any, ask bool) string {
	f := r.Failure
	if f.URL != "" && ask && r.v.has(f.Request) {
		code, answer, err := r.send(ctx, "reading why the job failed", f.Request, http.MethodGet, "")
		switch {
		case err != nil:
			r.note("reading why job %s failed: %v", r.ref.JobID, r.describe(err))
		case code >= 300:
			r.note("reading why job %s failed: HTTP %d: %s", r.ref.JobID, code, r.apiError(answer))
		default:
			r.capture(ctx, f.Capture, answer)
			fdoc, _ := decode(answer)
			if f.Pointer != "" {
				if v, err := lookup(fdoc, f.Pointer); err == nil && textOf(v) != "" {
					return r.bounded(textOf(v))
				}
			}
		}
	} else if f.Pointer != "" && (ask || f.URL == "") {
		if v, err := lookup(doc, f.Pointer); err == nil && textOf(v) != "" {
			return r.bounded(textOf(v))
		}
	}
	if f.Message != "" {
		missing := false
		msg := replaceAll(f.Message, func(name string) string {
			s, ok := r.v.text(name)
			if !ok {
				missing = true
			}
			return s
		})
		if !missing {
			return r.bounded(msg)
		}
	}
	if r.Status.Error != "" {
		if v, err := lookup(doc, r.Status.Error); err == nil && textOf(v) != "" {
			return r.bounded(textOf(v))
		}
	}
	return ""
}

// links is the tool's ToolOptions.Links: its Links filled from the
// stored task's job ID and captured values; a link whose values are not
// known yet is left out.
func (jt *jobTool) links(t *task.Task) map[string]string {
	var rf ref
	if t.ExternalRef == "" || json.Unmarshal([]byte(t.ExternalRef), &rf) != nil || rf.JobID == "" {
		return nil
	}
	v := vars{jobID: rf.JobID, captured: rf.Captured}
	var out map[string]string
	for name, tmpl := range jt.Links {
		u, err := v.fillURL(tmpl)
		if err != nil || jt.scrub(u) != u { // never a secret a job API echoed
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = u
	}
	return out
}
