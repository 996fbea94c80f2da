package command

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readOutput reads one of the command's outputs to its end into the log
// and, line by line, into the task's log (stream stdout or stderr):
// progress lines set the status message, and on standard output (stdout)
// input requests are asked and answered on the command's standard input
// instead of being logged.
func (c *Commands) readOutput(ctx context.Context, t *tool, stdin io.Writer, r io.Reader, lg *taskLog, sw *statusWriter, tk *mcptask.Task, stdout bool) {
	c.readOutputFrom(ctx, t, stdin, r, lg, sw, tk, stdout, 0, nil)
}

// readOutputFrom is readOutput of an output whose first logged bytes
// were read before (a re-attachment reads a command's output again from
// its start, for the result's tail): what lies before logged goes to lg
// only, neither to the task's log nor asked again. processed, if set, is
// called after each whole line with the offset just after it, asked true
// for an input request answered.
func (c *Commands) readOutputFrom(ctx context.Context, t *tool, stdin io.Writer, r io.Reader, lg *taskLog, sw *statusWriter, tk *mcptask.Task, stdout bool,
	logged int64, processed func(off int64, asked bool)) {
	br := bufio.NewReaderSize(r, maxLine)
	var pos int64   // of the line being read
	inLong := false // within a line longer than the buffer: logged only
	stream := mcptask.LogStreamStderr
	if stdout {
		stream = mcptask.LogStreamStdout
	}
	// taskLine writes a line to the task's log (its start only, for a
	// line longer than the buffer: the log cuts long lines anyway).
	taskLine := func(line []byte) {
		if tk != nil && !inLong && pos >= logged {
			tk.LogBytes(stream, bytes.TrimRight(line, "\r\n"))
		}
	}
	for {
		line, err := br.ReadSlice('\n')
		n := int64(len(line))
		asked := false
		line = t.secrets.Bytes(line)
		if len(line) > 0 {
			complete := err == nil || (errors.Is(err, io.EOF) && !inLong)
			switch {
			case !complete || inLong:
				lg.Write(line)
				taskLine(line)
			case stdout && bytes.HasPrefix(line, []byte(InputPrefix)):
				if pos >= logged {
					c.ask(ctx, t, stdin, tk, bytes.TrimSpace(line[len(InputPrefix):]))
					asked = true
				}
			default:
				lg.Write(line)
				taskLine(line)
				if t.Progress != nil {
					if m := t.Progress.FindSubmatch(bytes.TrimRight(line, "\r\n")); m != nil {
						msg := m[0]
						if len(m) > 1 {
							msg = m[1]
						}
						sw.set(string(bytes.ToValidUTF8(msg, nil)))
					}
				}
			}
			inLong = errors.Is(err, bufio.ErrBufferFull)
		}
		pos += n
		if processed != nil && err == nil {
			processed(pos, asked)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// ask turns an input request line into the task's elicitation and writes
// the answer to the command's standard input.
func (c *Commands) ask(ctx context.Context, t *tool, stdin io.Writer, tk *mcptask.Task, raw []byte) {
	answer := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = stdin.Write(append(b, '\n'))
	}
	type refusal struct {
		Action string `json:"action"`
		Error  string `json:"error"`
	}
	var params mcp.ElicitParams
	if err := json.Unmarshal(raw, &params); err != nil || params.Message == "" {
		if err == nil {
			err = errors.New(`"message" is missing`)
		}
		answer(refusal{"cancel", fmt.Sprintf("the input request is not valid: %v (want %s {\"message\": ..., \"requestedSchema\": {...}})", err, InputPrefix)})
		return
	}
	if tk == nil {
		answer(refusal{"decline", "this call of " + t.Name + " does not run as a task, so nobody can be asked: call it as a task to answer"})
		return
	}
	if params.Mode == "" && params.URL == "" && params.RequestedSchema == nil {
		params.RequestedSchema = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	res, err := tk.Elicit(ctx, &params)
	if err != nil {
		if ctx.Err() != nil {
			return // the command is gone, or the task ends
		}
		answer(refusal{"cancel", fmt.Sprintf("the request could not be asked: %v", err)})
		return
	}
	answer(struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content,omitempty"`
	}{res.Action, res.Content})
}

// statusWriter writes progress as the task's status message: at most one
// durable write per StatusInterval, the latest message kept.
type statusWriter struct {
	ctx context.Context
	tk  *mcptask.Task
	log *slog.Logger

	mu      sync.Mutex
	pending string
	has     bool
	last    time.Time
	timer   *time.Timer
	closed  bool
	writeMu sync.Mutex // one write at a time, in order
}

func newStatusWriter(ctx context.Context, tk *mcptask.Task, log *slog.Logger) *statusWriter {
	return &statusWriter{ctx: ctx, tk: tk, log: log}
}

// maxStatus bounds a status message.
const maxStatus = 512

func (s *statusWriter) set(msg string) {
	if s.tk == nil {
		return
	}
	if len(msg) > maxStatus {
		msg = string(bytes.ToValidUTF8([]byte(msg[:maxStatus]), nil)) + "..."
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.pending, s.has = msg, true
	if s.timer == nil {
		s.timer = time.AfterFunc(max(0, time.Until(s.last.Add(StatusInterval))), s.flush)
	}
}

func (s *statusWriter) flush() {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	msg, has := s.pending, s.has
	s.has, s.timer, s.last = false, nil, time.Now()
	s.mu.Unlock()
	if has {
		if err := s.tk.SetStatusMessage(s.ctx, msg); err != nil && s.ctx.Err() == nil {
			s.log.Warn("cannot set the task's status message", "task", s.tk.ID(), "err", err)
		}
	}
}

// close stops the writer, writing the latest message still pending if
// write.
func (s *statusWriter) close(write bool) {
	s.mu.Lock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.mu.Unlock()
	if write && s.tk != nil {
		s.flush()
	}
	s.writeMu.Lock() // a flush of the timer's in progress ends first
	s.writeMu.Unlock()
}

// readResult reads the result file a command wrote, nil if it wrote
// none. It must be a regular file: a FIFO, a device or a symbolic link
// put in its place is refused, never opened in a way that could block
// (O_NONBLOCK, O_NOFOLLOW, then checked again on the open file).
func readResult(path string) (*mcp.CallToolResult, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("it is not a regular file (%v)", fi.Mode().Type())
	}
	f, err := openNoBlock(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("it is not a regular file (%v)", fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxResultFile+1))
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	if len(b) > MaxResultFile {
		return nil, fmt.Errorf("larger than %d bytes", MaxResultFile)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("want a JSON object: %v", err)
	}
	_, hasContent := obj["content"]
	_, hasStructured := obj["structuredContent"]
	_, hasIsError := obj["isError"]
	if !hasContent && !hasStructured && !hasIsError {
		// Any object: the structured content, and its text.
		var compact bytes.Buffer
		_ = json.Compact(&compact, b)
		return &mcp.CallToolResult{StructuredContent: json.RawMessage(compact.Bytes()),
			Content: []mcp.Content{&mcp.TextContent{Text: compact.String()}}}, nil
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("not a CallToolResult: %v", err)
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
		if hasStructured {
			var compact bytes.Buffer
			_ = json.Compact(&compact, obj["structuredContent"])
			res.Content = []mcp.Content{&mcp.TextContent{Text: compact.String()}}
		}
	}
	return &res, nil
}
