package dashboard

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// statuses are the task statuses, in the order the pages show them.
var statuses = []task.Status{task.Working, task.InputRequired, task.Completed, task.Failed, task.Cancelled}

// toolErrorKind is the list filter's and counts' name of the completed
// tasks that are tool errors (task.OutcomeToolError), shown beside the
// statuses.
const toolErrorKind = "tool_error"

// kinds are what the list filters and counts by: the statuses, and the
// tool errors among the completed tasks.
var kinds = []string{string(task.Working), string(task.InputRequired), string(task.Completed), toolErrorKind,
	string(task.Failed), string(task.Cancelled)}

// kindLabel is how the pages name a kind.
func kindLabel(k string) string {
	if k == toolErrorKind {
		return "tool error"
	}
	return k
}

// maxTrail bounds the cursors of earlier pages a list URL carries (for
// its "previous" link); deeper, "previous" is the first page.
const maxTrail = 40

// timeForm is the format of the time filters (an <input type=datetime-local>), in UTC.
const timeForm = "2006-01-02T15:04"

// shownTime is how the pages show a time.
const shownTime = "2006-01-02 15:04:05.000Z"

// maxShown bounds a status message or JSON value as a page shows it.
const maxShown = 4096

// parseTemplates parses the embedded templates; gates says whether the
// navigation links to the Approvals page.
func parseTemplates(gates bool) (*template.Template, error) {
	return template.New("").Funcs(template.FuncMap{
		"statusClass": func(s string) string { return "st-" + strings.ReplaceAll(s, "_", "-") },
		"kindLabel":   kindLabel,
		"hasGates":    func() bool { return gates },
	}).ParseFS(assets, "assets/templates/*.html")
}

// render writes the template name with data as an HTML page.
func (h *Handler) render(w http.ResponseWriter, code int, name string, data any) {
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		h.opts.Logger.Error("dashboard: rendering a page", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// fragmentVersion is a short digest of a rendered fragment.
func fragmentVersion(html string) string {
	sum := sha256.Sum256([]byte(html))
	return hex.EncodeToString(sum[:12])
}

// fragment renders the template name with data, for a live update.
func (h *Handler) fragment(name string, data any) (string, error) {
	var buf bytes.Buffer
	err := h.tmpl.ExecuteTemplate(&buf, name, data)
	return buf.String(), err
}

// filter is a list page's selection, from its URL's query.
type filter struct {
	// Statuses holds the kinds selected (see kinds): statuses, and
	// toolErrorKind for the tool errors.
	Statuses      map[string]bool
	Tool, Owner   string
	After, Before string // as typed (timeForm), "" for none
	// HideChildren shows only the tasks with no parent (query
	// children=hide); Parent, if set, only the children of that task
	// (query parent=ID).
	HideChildren bool
	Parent       string
	Cursor       string
	// Trail holds the cursors of the earlier pages, first page ("")
	// first, when the list was paged through from its first page.
	Trail []string
	query store.BrowseQuery
	err   string
}

// parseFilter reads the list's filters from a query.
func parseFilter(q url.Values) *filter {
	f := &filter{Statuses: map[string]bool{}}
	for _, s := range q["status"] {
		if slices.Contains(kinds, s) {
			f.Statuses[s] = true
		}
	}
	f.Tool = strings.TrimSpace(q.Get("tool"))
	f.Owner = strings.TrimSpace(q.Get("owner"))
	f.HideChildren = q.Get("children") == "hide"
	f.Parent = strings.TrimSpace(q.Get("parent"))
	f.Cursor = q.Get("cursor")
	if f.Cursor != "" {
		f.Trail = q["prev"]
		if len(f.Trail) > maxTrail {
			f.Trail = nil
		}
	}
	bq := store.BrowseQuery{Tool: f.Tool, Owner: task.Owner(f.Owner), Parent: task.ID(f.Parent), TopLevel: f.HideChildren,
		Cursor: f.Cursor, Limit: PageSize}
	for _, s := range statuses {
		if f.Statuses[string(s)] {
			bq.Statuses = append(bq.Statuses, s)
		}
	}
	if f.Statuses[toolErrorKind] && !f.Statuses[string(task.Completed)] {
		bq.Outcomes = []task.Outcome{task.OutcomeToolError}
	}
	parse := func(name string) (string, time.Time) {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			return "", time.Time{}
		}
		t, err := time.Parse(timeForm, v)
		if err != nil {
			if t, err = time.Parse(time.RFC3339, v); err != nil {
				f.err = "The time " + strconv.Quote(v) + " is not a date and time (YYYY-MM-DDTHH:MM, UTC)."
				return v, time.Time{}
			}
		}
		return v, t.UTC()
	}
	f.After, bq.CreatedAfter = parse("after")
	f.Before, bq.CreatedBefore = parse("before")
	f.query = bq
	return f
}

// Encoded returns the filter as a query, with the cursor: the list a
// form's action returns to.
func (f *filter) Encoded() string {
	v := f.values()
	if f.Cursor != "" {
		v.Set("cursor", f.Cursor)
		v["prev"] = f.Trail
	}
	return v.Encode()
}

// values returns the filter as a query, without the cursor.
func (f *filter) values() url.Values {
	v := url.Values{}
	for _, s := range kinds {
		if f.Statuses[s] {
			v.Add("status", s)
		}
	}
	for k, s := range map[string]string{"tool": f.Tool, "owner": f.Owner, "after": f.After, "before": f.Before, "parent": f.Parent} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.HideChildren {
		v.Set("children", "hide")
	}
	return v
}

// listPage is the data of the task list.
type listPage struct {
	Base, CSRF string
	SignedIn   bool
	Filter     *filter
	Statuses   []string
	Counts     *countsView
	Rows       []*rowView
	NextHref   string
	FirstHref  string
	PrevHref   string
	// Range says which tasks the page shows, e.g. "51–100 of 215" (""
	// when the page's place is not known).
	Range    string
	Tools    []string
	Drain    *drainView
	Flash    string
	Error    string
	LiveHref string
	Instance string
	Search   string
}

// countsView is the counts strip of the list.
type countsView struct {
	Total shownCount
	Items []countItem
	// Problems links to the failed tasks and the tool errors, under the
	// other filters; ProblemsOn says the list shows just those.
	Problems   string
	ProblemsOn bool
	// selected is how many tasks the filter's kinds select.
	selected shownCount
}

// shownCount is a count as the list shows it: the store's counts stop at
// store.DefaultCountLimit, and one that reached it is shown "N+".
type shownCount struct {
	n    int64
	more bool // n or more
}

// add returns c + o.
func (c shownCount) add(o shownCount) shownCount {
	return shownCount{c.n + o.n, c.more || o.more}
}

// String is c in digits, with "+" if it is n or more.
func (c shownCount) String() string {
	return c.format(func(n int64) string { return strconv.FormatInt(n, 10) })
}

// format is c's n written by f, with "+" if it is n or more.
func (c shownCount) format(f func(int64) string) string {
	if c.more {
		return f(c.n) + "+"
	}
	return f(c.n)
}

// countItem is one status's count, and the link that toggles it in the
// filter.
type countItem struct {
	Status string
	N      shownCount
	On     bool
	Href   string
}

// rowView is one task of the list.
type rowView struct {
	ID, Tool, Status, Message, Owner, Created, Updated, Runner string
	CreatedISO, UpdatedISO                                     string
	// CreatedAgo and UpdatedAgo are the times relative to the page's
	// (the page's script keeps them current).
	CreatedAgo, UpdatedAgo string
	// Wait is how long the task waited to start (in its queue), Run how
	// long its work ran (so far, while it runs); "" when not known.
	Wait, Run                          string
	Terminal, Queued, Expired, ToolErr bool
	// Link is the first link about the task its tool gives, if any.
	Link, LinkName string
	// Parent is the task whose work started this one ("" for none), Step
	// the child's step name.
	Parent, Step string
}

// drainView is the drain switch as the list shows it.
type drainView struct {
	All   bool
	Tools []toolDrain
}

// toolDrain is one tool's drain switch.
type toolDrain struct {
	Name    string
	Drained bool
}

// serveList serves the task list.
func (h *Handler) serveList(w http.ResponseWriter, r *http.Request, v *visitor) {
	q := r.URL.Query()
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		if _, err := h.opts.Store.Get(r.Context(), task.ID(id)); err == nil {
			redirect(w, base(r)+"tasks/"+url.PathEscape(id))
			return
		}
	}
	f := parseFilter(q)
	p := &listPage{
		Base: base(r), CSRF: v.csrf, SignedIn: h.opts.Authenticate != nil && !v.bearer,
		Filter: f, Instance: h.opts.Engine.InstanceID(), Flash: flash(q.Get("done")),
		Search: q.Get("id"),
	}
	p.Statuses = kinds
	if p.Search != "" {
		p.Error = "No task has the ID " + strconv.Quote(p.Search) + "."
	}
	if f.err != "" {
		p.Error = f.err
	}
	code := http.StatusOK
	if err := h.loadList(r, f, p); err != nil {
		code = http.StatusInternalServerError
		if errors.Is(err, store.ErrBadCursor) {
			code = http.StatusBadRequest
			p.Error = "This page's cursor is not valid: start again from the first page."
		} else {
			h.opts.Logger.Error("dashboard: listing tasks", "err", err)
			p.Error = "The tasks could not be read from the store."
		}
	}
	live := f.values()
	p.LiveHref = "live?" + live.Encode()
	h.render(w, code, "list", p)
}

// loadList fills p with a page of tasks and the counts.
func (h *Handler) loadList(r *http.Request, f *filter, p *listPage) error {
	ctx := r.Context()
	now := h.now()
	// A page shows counts read after the last change the dashboard saw.
	counts, _, err := h.counts(r, f, h.lastChange())
	if err != nil {
		return err
	}
	p.Counts = counts
	ts, next, err := h.opts.Store.Browse(ctx, f.query)
	if err != nil {
		return err
	}
	for _, t := range ts {
		p.Rows = append(p.Rows, h.rowOf(t, now))
	}
	vals := f.values()
	known := f.Cursor == "" || len(f.Trail) > 0 // the page's place
	if next != "" {
		nv := f.values()
		nv.Set("cursor", next)
		if known && len(f.Trail) < maxTrail {
			nv["prev"] = append(slices.Clone(f.Trail), f.Cursor)
		}
		p.NextHref = "?" + nv.Encode()
	}
	if f.Cursor != "" {
		p.FirstHref = "?" + vals.Encode()
		if p.FirstHref == "?" {
			p.FirstHref = "./"
		}
		if n := len(f.Trail); n > 0 {
			pv := f.values()
			if c := f.Trail[n-1]; c != "" {
				pv.Set("cursor", c)
				pv["prev"] = f.Trail[:n-1]
			}
			p.PrevHref = "?" + pv.Encode()
			if p.PrevHref == "?" {
				p.PrevHref = "./"
			}
		}
	}
	if known && len(p.Rows) > 0 {
		from := int64(len(f.Trail))*PageSize + 1
		of := shownCount{max(counts.selected.n, from+int64(len(p.Rows))-1), counts.selected.more}
		p.Range = fmtCount(from) + "–" + fmtCount(from+int64(len(p.Rows))-1) + " of " + of.format(fmtCount)
	}
	if h.opts.Tools != nil {
		p.Tools = slices.Sorted(slices.Values(h.opts.Tools()))
	}
	if h.opts.Drain != nil {
		all, drained := h.opts.Drain.DrainState()
		d := &drainView{All: all}
		for _, name := range p.Tools {
			d.Tools = append(d.Tools, toolDrain{Name: name, Drained: all || slices.Contains(drained, name)})
		}
		for _, name := range drained {
			if !slices.Contains(p.Tools, name) {
				d.Tools = append(d.Tools, toolDrain{Name: name, Drained: true})
			}
		}
		p.Drain = d
	}
	return nil
}

// countsMaxAge is how long counts per status are reused by every page
// and live view showing the same filters: counting 100,000 tasks takes
// tens of milliseconds, and a busy store changes every moment.
const countsMaxAge = time.Second

// countCache holds the latest counts per status of each filter.
type countCache struct {
	mu sync.Mutex
	m  map[string]countEntry
}

// countEntry is the counts of one filter, read at at.
type countEntry struct {
	at time.Time
	n  store.Counts
}

// counts returns the counts strip under f's other filters, and when they
// were read: counts read at notBefore or later, and less than
// countsMaxAge ago, are reused.
func (h *Handler) counts(r *http.Request, f *filter, notBefore time.Time) (*countsView, time.Time, error) {
	key := f.values()
	key.Del("status")
	k := key.Encode()
	now := h.now()
	h.countCache.mu.Lock()
	e, ok := h.countCache.m[k]
	h.countCache.mu.Unlock()
	if !ok || e.at.Before(notBefore) || now.Sub(e.at) >= countsMaxAge {
		q := f.query
		q.CountLimit = h.countLimit
		n, err := h.opts.Store.CountByStatus(r.Context(), q)
		if err != nil {
			return nil, time.Time{}, err
		}
		e = countEntry{at: now, n: n}
		h.countCache.mu.Lock()
		if h.countCache.m == nil || len(h.countCache.m) > 1000 {
			h.countCache.m = map[string]countEntry{}
		}
		h.countCache.m[k] = e
		h.countCache.mu.Unlock()
	}
	n := e.n
	c := &countsView{}
	limit := store.CountLimitOf(store.BrowseQuery{CountLimit: h.countLimit})
	shown := func(v int64) shownCount { return shownCount{v, v >= limit} }
	for _, s := range statuses {
		c.Total = c.Total.add(shown(n.ByStatus[s]))
	}
	count := func(k string) shownCount {
		if k == toolErrorKind {
			return shown(n.ToolErrors)
		}
		return shown(n.ByStatus[task.Status(k)])
	}
	for _, k := range kinds {
		tv := f.values()
		tv.Del("status")
		for _, o := range kinds {
			if (o == k) != f.Statuses[o] { // toggle k, keep the others
				tv.Add("status", o)
			}
		}
		href := "?" + tv.Encode()
		if href == "?" {
			href = "./"
		}
		c.Items = append(c.Items, countItem{Status: k, N: count(k), On: f.Statuses[k], Href: href})
		if f.Statuses[k] && (k != toolErrorKind || !f.Statuses[string(task.Completed)]) {
			c.selected = c.selected.add(count(k))
		}
	}
	if len(f.Statuses) == 0 {
		c.selected = c.Total
	}
	pv := f.values()
	pv["status"] = []string{string(task.Failed), toolErrorKind}
	c.Problems = "?" + pv.Encode()
	c.ProblemsOn = len(f.Statuses) == 2 && f.Statuses[string(task.Failed)] && f.Statuses[toolErrorKind]
	return c, e.at, nil
}

// fmtCount writes n with thousands separated by commas.
func fmtCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// rowOf returns the list row of t.
func (h *Handler) rowOf(t *task.Task, now time.Time) *rowView {
	r := &rowView{
		ID: string(t.ID), Tool: t.Tool, Status: string(t.Status), Message: clip(t.StatusMessage, 200),
		Owner: string(t.Owner), Runner: t.Runner,
		Created: t.CreatedAt.UTC().Format(shownTime), Updated: t.LastUpdatedAt.UTC().Format(shownTime),
		CreatedISO: t.CreatedAt.UTC().Format(time.RFC3339Nano), UpdatedISO: t.LastUpdatedAt.UTC().Format(time.RFC3339Nano),
		Terminal: t.Status.Terminal(), Queued: t.Queued, Expired: t.Expired(now), ToolErr: t.Outcome() == task.OutcomeToolError,
		Parent: string(t.Parent), Step: task.StepOf(t),
	}
	r.Wait, r.Run = waitAndRun(t, now)
	r.CreatedAgo, r.UpdatedAgo = ago(t.CreatedAt, now), ago(t.LastUpdatedAt, now)
	if h.opts.Links != nil {
		links := h.opts.Links(t)
		for _, k := range slices.Sorted(maps.Keys(links)) {
			if u := links[k]; strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
				r.Link, r.LinkName = u, k
				break
			}
		}
	}
	return r
}

// waitAndRun returns how long t waited to start and how long its work
// ran (until it ended, or until now), as the pages show durations; ""
// for what is not known (a task recorded before stores kept starts).
func waitAndRun(t *task.Task, now time.Time) (wait, run string) {
	end := now
	if t.Status.Terminal() {
		end = t.LastUpdatedAt
	}
	switch {
	case t.StartedAt.IsZero() && t.Status.Terminal() && (t.Queued || t.Attempts == 0):
		return span(end.Sub(t.CreatedAt)), "" // ended while it waited
	case t.Queued:
		return span(now.Sub(t.CreatedAt)), ""
	case t.StartedAt.IsZero():
		return "", ""
	}
	return span(t.StartedAt.Sub(t.CreatedAt)), span(end.Sub(t.StartedAt))
}

// span writes a duration for people: "0 s", "850 ms", "12.3 s",
// "4 min 05 s", "2 h 03 min", "3 d 4 h".
func span(d time.Duration) string {
	switch {
	case d <= 0:
		return "0 s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	case d < time.Hour:
		s := int(d / time.Second)
		return fmt.Sprintf("%d min %02d s", s/60, s%60)
	case d < 48*time.Hour:
		m := int(d / time.Minute)
		return fmt.Sprintf("%d h %02d min", m/60, m%60)
	}
	h := int(d / time.Hour)
	return fmt.Sprintf("%d d %d h", h/24, h%24)
}

// ago writes how long before now t was, for people: "just now",
// "12 s ago", "5 min ago", "3 h ago", "4 d ago".
func ago(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 2*time.Second:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h ago"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + " d ago"
}

// clip cuts s to n bytes (on a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// flash returns the message of an action's outcome named in the URL
// after it (never text from the URL itself).
func flash(done string) string {
	kind, n, _ := strings.Cut(done, ":")
	count, _ := strconv.Atoi(n)
	switch kind {
	case "cancelled":
		return "Cancelled " + strconv.Itoa(count) + " task" + plural(count) + "."
	case "skipped":
		return "Cancelled " + strconv.Itoa(count) + " task" + plural(count) + "; the others had already ended or are gone."
	case "refused":
		return "The cancel of " + strconv.Itoa(count) + " task" + plural(count) + " was refused by the system doing the work: " +
			"such a task goes on, and its status message says why."
	case "rerun":
		return "This task runs the call of a finished task again, started by an operator."
	case "drained":
		return "The tool is drained: it takes no new tasks."
	case "undrained":
		return "The tool takes new tasks again."
	}
	return ""
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// taskPage is the data of a task's page.
type taskPage struct {
	Base, CSRF string
	SignedIn   bool
	Live       *taskLive
	Revealed   *revealed
	Flash      string
	Error      string
	// CanRunAgain offers the re-run of the task's call (it has ended);
	// Nonce is the form's token, which makes its resubmission harmless.
	CanRunAgain bool
	Nonce       string
	LiveHref    string
	// LiveHTML is the live part, rendered once (by html/template, so
	// escaped) for the page and for the version its stream is told.
	LiveHTML template.HTML
}

// taskLive is the part of a task page that live updates replace.
type taskLive struct {
	ID, Tool, Status, Message, Owner, Wire            string
	Created, Updated, Expires, TTL, Poll              string
	Runner, Lease, Queue, ExternalRef, IdempotencyKey string
	Attempts                                          int64
	Wait, Run                                         string
	Terminal, Queued, Expired, ToolErr                bool
	HasOutcome                                        bool
	Events                                            []eventView
	Inputs                                            []inputView
	Ops                                               []opView
	Log                                               []logView
	LogDropped                                        int64
	LogMore                                           int64
	// Correlation is the host correlation keys of the call that created
	// the task, sorted by key.
	Correlation []correlationView
	// Links are links about the task its tool gives (Options.Links).
	Links []correlationView
	// Step is the task's step name when it is a child; Parent is the
	// task whose work started it, Root the top of its tree when that is
	// not its parent (nil for none).
	Step         string
	Parent, Root *relativeView
	// Children are the task's children, oldest first: all of them, or
	// the latest ChildrenShown when ChildrenTotal says there are more
	// (then ChildrenHref lists them all).
	Children      []childView
	ChildrenTotal int64
	ChildrenHref  string
}

// relativeView is a task's parent, or the top of its tree.
type relativeView struct {
	ID, Tool string
	// Gone says the store no longer holds it (expired or deleted).
	Gone bool
}

// childView is one child of a task.
type childView struct {
	ID, Step, Tool, Status, Message, Created, CreatedISO string
	Terminal, Queued, ToolErr                            bool
}

// correlationView is one host correlation key of a task and its value.
type correlationView struct{ Key, Value string }

// eventView is one entry of a task's timeline.
type eventView struct {
	At, AtISO, Kind, From, To, Instance, Message string
	Attempt                                      int64
}

// inputView is one pending input request.
type inputView struct {
	Key, Method, Message, Params string
}

// opView is one domain operation of the ledger.
type opView struct {
	Key, Effect, Object, State, Receipt, Detail, Updated string
}

// logView is one log line.
type logView struct {
	Seq                int64
	Time, Stream, Text string
}

// revealed is a task's outcome, or its arguments, shown on request.
type revealed struct {
	// Result and Error are the outcome as JSON, pretty-printed; Content
	// is the result rendered for people, nil when it has no content.
	Result, Error string
	Content       *resultView
	// Arguments are the call's arguments, pretty-printed, when those
	// were asked for.
	Arguments string
}

// resultView is a CallToolResult rendered for people.
type resultView struct {
	Items      []contentItem
	Structured string
	IsError    bool
}

// contentItem is one item of a result's content: Text is a text item's
// text (or a text resource's), Note says what another item is.
type contentItem struct{ Text, Note string }

// serveTask serves a task's page.
func (h *Handler) serveTask(w http.ResponseWriter, r *http.Request, v *visitor) {
	h.renderTask(w, r, v, nil)
}

// renderTask renders a task's page, with its outcome when rev is set.
func (h *Handler) renderTask(w http.ResponseWriter, r *http.Request, v *visitor, rev *revealed) {
	h.renderTaskPage(w, r, v, rev, http.StatusOK, "")
}

// renderTaskError renders a task's page with code and an error message
// (an action refused, saying why).
func (h *Handler) renderTaskError(w http.ResponseWriter, r *http.Request, v *visitor, code int, msg string) {
	h.renderTaskPage(w, r, v, nil, code, msg)
}

// renderTaskPage renders a task's page.
func (h *Handler) renderTaskPage(w http.ResponseWriter, r *http.Request, v *visitor, rev *revealed, code int, errMsg string) {
	live, err := h.loadTask(r, task.ID(r.PathValue("id")))
	if errors.Is(err, store.ErrNotFound) {
		h.render(w, http.StatusNotFound, "notfound", &taskPage{Base: base(r), CSRF: v.csrf})
		return
	}
	if err != nil {
		h.opts.Logger.Error("dashboard: reading a task", "err", err)
		http.Error(w, "the task could not be read from the store", http.StatusInternalServerError)
		return
	}
	p := &taskPage{
		Base: base(r), CSRF: v.csrf, SignedIn: h.opts.Authenticate != nil && !v.bearer,
		Live: live, Revealed: rev, Flash: flash(r.URL.Query().Get("done")), Error: errMsg,
		CanRunAgain: h.opts.RunAgain != nil && live.Terminal,
	}
	if p.CanRunAgain {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		p.Nonce = hex.EncodeToString(b)
	}
	// The live stream is told what the page shows, so that it sends the
	// task only once it changed (a re-render would close what the
	// operator opened). Rendered with the page's own base: "../" on the
	// task page, as the stream renders it; deeper on a revealed outcome's
	// page, which follows no stream.
	frag, err := h.fragment("taskLive", &taskPage{Base: p.Base, CSRF: v.csrf, Live: live})
	if err != nil {
		h.opts.Logger.Error("dashboard: rendering a task", "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	p.LiveHTML = template.HTML(frag)
	p.LiveHref = base(r) + "tasks/" + url.PathEscape(live.ID) + "/live?v=" + fragmentVersion(frag)
	h.render(w, code, "task", p)
}

// loadTask reads everything a task page shows of the task with id.
func (h *Handler) loadTask(r *http.Request, id task.ID) (*taskLive, error) {
	ctx := r.Context()
	t, err := h.opts.Store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	now := h.now()
	l := &taskLive{
		ID: string(t.ID), Tool: t.Tool, Status: string(t.Status), Message: clip(t.StatusMessage, maxShown),
		Owner: string(t.Owner), Wire: t.Wire,
		Created: t.CreatedAt.UTC().Format(shownTime), Updated: t.LastUpdatedAt.UTC().Format(shownTime),
		Expires: t.ExpiresAt().UTC().Format(shownTime), TTL: t.TTL.String(), Poll: t.PollInterval.String(),
		Runner: t.Runner, Queue: t.Queue, ExternalRef: t.ExternalRef, IdempotencyKey: t.IdempotencyKey,
		Attempts: t.Attempts, Terminal: t.Status.Terminal(), Queued: t.Queued, Expired: t.Expired(now),
		HasOutcome: t.Result != nil || t.Error != nil, ToolErr: t.Outcome() == task.OutcomeToolError,
	}
	l.Wait, l.Run = waitAndRun(t, now)
	if !t.LeaseExpiresAt.IsZero() {
		l.Lease = t.LeaseExpiresAt.UTC().Format(shownTime)
	}
	for _, k := range slices.Sorted(maps.Keys(t.Correlation)) {
		l.Correlation = append(l.Correlation, correlationView{Key: k, Value: t.Correlation[k]})
	}
	if h.opts.Links != nil {
		links := h.opts.Links(t)
		for _, k := range slices.Sorted(maps.Keys(links)) {
			if u := links[k]; strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
				l.Links = append(l.Links, correlationView{Key: k, Value: u})
			}
		}
	}
	if err := h.loadTree(r, t, l); err != nil {
		return nil, err
	}
	evs, err := h.opts.Store.History(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	for _, e := range evs {
		l.Events = append(l.Events, eventView{
			At: e.At.UTC().Format(shownTime), AtISO: e.At.UTC().Format(time.RFC3339Nano),
			Kind: string(e.Kind), From: string(e.From), To: string(e.To),
			Instance: e.Instance, Message: clip(e.Message, 300), Attempt: e.Attempt,
		})
	}
	for _, key := range slices.Sorted(maps.Keys(t.InputRequests)) {
		l.Inputs = append(l.Inputs, inputOf(key, t.InputRequests[key]))
	}
	ops, _, err := h.opts.Engine.Operations(ctx, t.Owner, store.OperationQuery{TaskID: id, Limit: 50})
	if err != nil {
		return nil, err
	}
	for _, o := range ops {
		l.Ops = append(l.Ops, opView{
			Key: o.Key, Effect: o.Effect, Object: strings.TrimSpace(o.Object + " " + o.ObjectVersion),
			State: string(o.State), Receipt: o.Receipt, Detail: o.Detail, Updated: o.UpdatedAt.UTC().Format(shownTime),
		})
	}
	{
		pos, err := h.opts.Engine.LogPosition(ctx, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if pos != nil && pos.Last > 0 {
			after := max(0, pos.Last-LogTailLines)
			page, _, err := h.opts.Engine.ReadLog(ctx, t.Owner, id, after, LogTailLines)
			var nf *engine.NotFoundError
			switch {
			case errors.As(err, &nf): // expired or deleted meanwhile: no log to show
			case err != nil:
				return nil, err
			default:
				l.LogDropped = pos.Dropped
				l.LogMore = after
				for _, ln := range page.Lines {
					l.Log = append(l.Log, logView{Seq: ln.Seq, Time: ln.Time.UTC().Format(shownTime), Stream: ln.Stream, Text: clip(ln.Text, maxShown)})
				}
			}
		}
	}
	return l, nil
}

// loadTree fills l with t's place in its tree: its parent (and the top
// of its tree), and its children.
func (h *Handler) loadTree(r *http.Request, t *task.Task, l *taskLive) error {
	ctx := r.Context()
	relative := func(id task.ID) (*relativeView, error) {
		rt, err := h.opts.Store.Get(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return &relativeView{ID: string(id), Gone: true}, nil
		case err != nil:
			return nil, err
		}
		return &relativeView{ID: string(id), Tool: rt.Tool}, nil
	}
	if t.Parent != "" {
		l.Step = task.StepOf(t)
		var err error
		if l.Parent, err = relative(t.Parent); err != nil {
			return err
		}
		if t.Root != "" && t.Root != t.Parent && t.Root != t.ID {
			if l.Root, err = relative(t.Root); err != nil {
				return err
			}
		}
	}
	// Browse reads newest first: a task with more children than a page
	// shows its latest ones, oldest first like the others.
	kids, next, err := h.opts.Store.Browse(ctx, store.BrowseQuery{Parent: t.ID, Limit: ChildrenShown})
	if err != nil {
		return err
	}
	for _, k := range slices.Backward(kids) {
		l.Children = append(l.Children, childView{
			ID: string(k.ID), Step: task.StepOf(k), Tool: k.Tool, Status: string(k.Status), Message: clip(k.StatusMessage, 200),
			Created: k.CreatedAt.UTC().Format(shownTime), CreatedISO: k.CreatedAt.UTC().Format(time.RFC3339Nano),
			Terminal: k.Status.Terminal(), Queued: k.Queued, ToolErr: k.Outcome() == task.OutcomeToolError,
		})
	}
	if next != "" {
		n, err := h.opts.Store.CountByStatus(ctx, store.BrowseQuery{Parent: t.ID})
		if err != nil {
			return err
		}
		for _, c := range n.ByStatus {
			l.ChildrenTotal += c
		}
		l.ChildrenTotal = max(l.ChildrenTotal, int64(len(kids))+1)
		l.ChildrenHref = "?" + url.Values{"parent": {string(t.ID)}}.Encode()
	}
	return nil
}

// inputOf returns the view of a pending input request: its method, the
// message it shows the user (an elicitation's), and its params.
func inputOf(key string, raw json.RawMessage) inputView {
	var req struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	json.Unmarshal(raw, &req)
	var msg struct {
		Message string `json:"message"`
	}
	json.Unmarshal(req.Params, &msg)
	return inputView{Key: key, Method: req.Method, Message: clip(msg.Message, maxShown), Params: prettyJSON(req.Params)}
}

// prettyJSON indents a JSON value for a page, cut to maxShown.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return clip(string(raw), maxShown)
	}
	return clip(buf.String(), maxShown)
}
