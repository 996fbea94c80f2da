package client

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The 2026-07-28 wire: tasks/get (with the outcome or the input requests
// inlined), tasks/update, tasks/cancel. The go-sdk adds the per-request
// _meta (protocol version, client info, capabilities with the extension)
// to these custom methods itself.

// wire2026 is the strategy of the 2026-07-28 wire (and later revisions).
type wire2026 struct {
	c *clientImpl
	// extension reports whether the server advertised the tasks extension
	// in server/discover.
	extension bool

	mu      sync.Mutex
	handled map[string]map[string]bool // task ID → input request keys answered or being answered
}

func newWire2026(c *clientImpl, extension bool) *wire2026 {
	return &wire2026{c: c, extension: extension, handled: map[string]map[string]bool{}}
}

func (s *wire2026) tasksSupported() bool { return s.extension }

// taskSupport is what an mcptask server states in the tool's _meta
// (wire.MetaTaskSupport), "" otherwise: this wire has no such field, the
// server decides per call.
func (s *wire2026) taskSupport(tool string) string {
	support, _ := s.c.e.toolSupport(tool)
	return support
}

// prepareCall leaves the call as it is: the extension declared in every
// request lets the server decide whether it runs as a task. The call may
// be re-sent with its key when the server honours keys and states that
// the tool runs as a task (listing the tools first if need be).
func (s *wire2026) prepareCall(ctx context.Context, params *mcp.CallToolParams) (string, bool, error) {
	if !s.extension {
		return fmt.Sprintf("the server does not advertise the %s extension", ext2026.ExtensionID), false, nil
	}
	if !s.c.idempotent {
		return "", false, nil
	}
	support, ok := s.c.e.toolSupport(params.Name)
	if !ok {
		for _, err := range s.c.session().Tools(ctx, nil) {
			if err != nil {
				return "", false, fmt.Errorf("listing the tools to learn whether %s runs as a task: %w", params.Name, err)
			}
		}
		support, _ = s.c.e.toolSupport(params.Name)
	}
	return "", support == "optional" || support == "required", nil
}

// status2026 translates a task of the 2026-07-28 wire.
func status2026(f ext2026.TaskFields) *TaskStatus {
	return &TaskStatus{
		ID:            f.TaskID,
		Status:        f.Status,
		StatusMessage: f.StatusMessage,
		CreatedAt:     parseTime(f.CreatedAt),
		LastUpdatedAt: parseTime(f.LastUpdatedAt),
		TTL:           time.Duration(max(f.TTLMs, 0)) * time.Millisecond,
		PollInterval:  time.Duration(max(f.PollIntervalMs, 0)) * time.Millisecond,
	}
}

// handle2026 decodes a task handle of the 2026-07-28 shape (resultType
// "task").
func handle2026(raw json.RawMessage) (*TaskStatus, error) {
	var h ext2026.CreateTaskResult
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("the server's task handle is not valid: %v", err)
	}
	return status2026(h.TaskFields), nil
}

// getTask fetches a task's detailed state.
func (s *wire2026) getTask(ctx context.Context, id string) (*ext2026.GetTaskResult, *TaskStatus, error) {
	return s.getTaskAs(ctx, id, false)
}

// getTaskAs is getTask, marked as a one-time look (wire.MetaLook) when
// look is set.
func (s *wire2026) getTaskAs(ctx context.Context, id string, look bool) (*ext2026.GetTaskResult, *TaskStatus, error) {
	raw, err := s.c.custom(ctx, wire.MethodTasksGet, lookParams(id, look))
	if err != nil {
		return nil, nil, err
	}
	return decodeTask2026(raw, id, wire.MethodTasksGet)
}

func (s *wire2026) get(ctx context.Context, id string) (*TaskStatus, error) {
	_, st, err := s.getTaskAs(ctx, id, true)
	if err != nil {
		return nil, getError(id, err)
	}
	return st, nil
}

// cancel sends tasks/cancel, which is acknowledged (also for an ended
// task); the status after comes from tasks/get.
func (s *wire2026) cancel(ctx context.Context, id string) (*TaskStatus, error) {
	if _, err := s.c.custom(ctx, wire.MethodTasksCancel, &taskParams{TaskID: id}); err != nil {
		if isNotFound(err) {
			return nil, notFound(id, err)
		}
		return nil, fmt.Errorf("task %s: tasks/cancel: %w", id, err)
	}
	return s.get(ctx, id)
}

// deleteAdvertised: the server lists wire.ExtensionTasksDelete among the
// extensions of server/discover.
func (s *wire2026) deleteAdvertised() (bool, string) {
	if !s.extension || !s.c.deleteExt {
		return false, "the server's server/discover does not list the extension " + wire.ExtensionTasksDelete
	}
	return true, ""
}

// list is not a method of this wire.
func (s *wire2026) list(context.Context, string) ([]TaskStatus, string, error) {
	return nil, "", fmt.Errorf("tasks/list on MCP %s: %w", s.c.wire, ErrUnsupported)
}

// wait follows the task's notifications on a listen stream where the
// client can open one (Dial) and the server agrees, else polls tasks/get;
// either carries the outcome of an ended task and the input requests of
// one in input_required, answered with tasks/update. While the stream is
// up, tasks/get is only a slow safety net (safetyPoll); once it breaks
// the wait polls at the server's interval, and opens another stream after
// a poll, up to maxListens times.
func (s *wire2026) wait(w *waiter) (*mcp.CallToolResult, error) {
	var ls *listenStream
	defer func() {
		if ls != nil {
			ls.close()
		}
	}()
	listens := 0
	for {
		if err := w.cut(); err != nil {
			return nil, err
		}
		if ls == nil && s.canListen(listens) {
			listens++
			if ls = s.openListen(w); ls == nil {
				// Refused, or the task not agreed: a stream that broke
				// is opened again, not one the server would not give.
				listens = maxListens
			}
		}
		var g *ext2026.GetTaskResult
		var st *TaskStatus
		if ls != nil {
			ev, err := w.awaitPush(ls.notes.ready, ls.done, nil)
			if err != nil {
				return nil, err
			}
			raw := ls.notes.take()
			switch {
			case raw != nil:
				if g, st, err = decodeTask2026(raw, w.id, wire.MethodTasks); err != nil {
					s.c.log.Warn("ignoring a task notification", "task", w.id, "err", err)
					g, st = nil, nil
				} else if w.stale(st) {
					continue
				}
			case ev == pushNote:
				continue // read already
			case ev == pushDown:
				// The stream broke, or ended without the terminal state:
				// poll now, and at the server's interval.
				s.c.log.Info("the task's notification stream ended; polling", "task", w.id)
				if time.Since(ls.opened) > time.Minute {
					listens = 0 // it served well: it may be opened again
				}
				ls.close()
				ls = nil
			}
		}
		if st == nil {
			var err error
			g, st, err = s.getTask(w.dctx, w.id)
			if err != nil {
				if err := w.pollFailed(err); err != nil {
					return nil, err
				}
				continue
			}
			w.answeredNow()
		}
		w.seen(st)
		switch st.Status {
		case statusCompleted:
			if len(g.Result) == 0 || string(g.Result) == "null" {
				return nil, fmt.Errorf("task %s: the server reports it completed but sent no result", w.id)
			}
			var res mcp.CallToolResult
			if err := json.Unmarshal(g.Result, &res); err != nil {
				return nil, fmt.Errorf("task %s: the server's result is not a tool result: %v", w.id, err)
			}
			return &res, nil
		case statusFailed:
			if g.Error == nil {
				return nil, taskError(w.id, -32603, "", nil)
			}
			return nil, taskError(w.id, g.Error.Code, g.Error.Message, g.Error.Data)
		case statusCancelled:
			return nil, fmt.Errorf("task %s: %w", w.id, ErrCancelled)
		case statusInputRequired:
			if err := s.answer(w, g.InputRequests); err != nil {
				return nil, err
			}
		}
		if ls == nil {
			if err := w.pause(nil); err != nil {
				return nil, err
			}
		}
	}
}

// maxListens bounds the listen streams one wait opens after streams that
// broke (a stream that lived long does not count).
const maxListens = 3

// canListen reports whether the wait may open a listen stream.
func (s *wire2026) canListen(opened int) bool {
	l := s.c.listen
	return l != nil && !s.c.opts.DisablePush && s.extension && !l.unsupported.Load() && opened < maxListens && !closed(s.c.closing)
}

// openListen opens a listen stream for the wait's task; nil when the
// server refused it or did not agree the task (the wait polls).
func (s *wire2026) openListen(w *waiter) *listenStream {
	ls, err := s.c.listen.open(w.dctx, w.id)
	if err != nil {
		s.c.log.Debug("no notification stream for the task; polling", "task", w.id, "err", err)
		return nil
	}
	s.c.log.Debug("following the task's notifications", "task", w.id)
	return ls
}

// decodeTask2026 decodes a task as tasks/get (or its notification,
// method notifications/tasks) carries it.
func decodeTask2026(raw json.RawMessage, id, method string) (*ext2026.GetTaskResult, *TaskStatus, error) {
	var g ext2026.GetTaskResult
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, nil, fmt.Errorf("the server's %s answer is not a task: %v", method, err)
	}
	st := status2026(g.TaskFields)
	st.Operation = operationOf(raw)
	st.Log = logOf(raw)
	st.Correlation = correlationOf(raw)
	st.Links = linksOf(raw)
	st.Outcome = outcomeOf(raw)
	st.Parent = parentOf(raw)
	st.Children = childrenOf(raw)
	if err := st.validate(method + " answer"); err != nil {
		return nil, nil, err
	}
	if st.ID != id {
		return nil, nil, fmt.Errorf("the server answered %s for task %s with task %s", method, id, st.ID)
	}
	return &g, st, nil
}

// answer hands each input request not answered yet to the host's handlers
// and sends the answers with tasks/update.
func (s *wire2026) answer(w *waiter, requests map[string]json.RawMessage) error {
	c := s.c
	keys := make([]string, 0, len(requests))
	for k := range requests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	keys = s.claim(w.id, keys)
	if len(keys) == 0 {
		return nil
	}
	answers := map[string]json.RawMessage{}
	var answered []string
	release := func() { s.unclaim(w.id, keys) }
	for _, k := range keys {
		a, err := c.answerInput(w.dctx, w.id, k, requests[k])
		if err != nil {
			release()
			if cut := w.cut(); cut != nil {
				return cut
			}
			return fmt.Errorf("task %s: answering input request %s: %w", w.id, k, err)
		}
		if a != nil {
			answers[k] = a
			answered = append(answered, k)
		}
	}
	if len(answers) == 0 {
		return nil
	}
	// The answers are sent until the server takes them: one whose reply
	// was lost is sent again as it is (the server ignores an answer it
	// already has), never asked of the user again.
	for {
		_, err := c.custom(w.dctx, wire.MethodTasksUpdate, &taskParams{TaskID: w.id, InputResponses: answers})
		if err == nil {
			w.answeredNow()
			c.log.Info("answered a task's input requests", "task", w.id, "keys", answered)
			return nil
		}
		if st := finishedRefusal(err); st != "" {
			// The task ended before the answers arrived, or after an
			// earlier send that landed and whose reply was lost: they
			// can change nothing now. The wait's next poll reads the end.
			c.log.Info("a task's answers arrived after it ended", "task", w.id, "keys", answered, "status", st)
			return nil
		}
		if d, ok := rateLimited(err); ok {
			if err := w.backOff(d); err != nil {
				s.unclaim(w.id, answered)
				return err
			}
			continue
		}
		if retry, uerr := w.unanswered(err); retry {
			if uerr != nil {
				s.unclaim(w.id, answered)
				return uerr
			}
			continue
		}
		s.unclaim(w.id, answered)
		return w.fail("sending the answers to its input requests", err)
	}
}

// finishedRefusal returns the status of the task a tasks/update was
// refused for because it ended (mcptask's -32602 with {"status": S} as
// its data, S terminal), else "".
func finishedRefusal(err error) string {
	we, ok := rpcError(err)
	if !ok || we.Code != jsonrpc.CodeInvalidParams || len(we.Data) == 0 {
		return ""
	}
	var data struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(we.Data, &data) != nil {
		return ""
	}
	if !task.Status(data.Status).Terminal() {
		return ""
	}
	return data.Status
}

// claim marks input request keys of a task as being answered and returns
// those no other Wait claimed before.
func (s *wire2026) claim(id string, keys []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.handled[id]
	if m == nil {
		m = map[string]bool{}
		s.handled[id] = m
	}
	var out []string
	for _, k := range keys {
		if !m[k] {
			m[k] = true
			out = append(out, k)
		}
	}
	return out
}

// unclaim releases keys whose answers could not be delivered.
func (s *wire2026) unclaim(id string, keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.handled[id], k)
	}
}

// forget drops the memory of an ended task's answered input requests.
func (s *wire2026) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.handled, id)
}
