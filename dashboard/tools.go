package dashboard

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// The Tools page's window: the tasks created in the last ToolsWindow
// that have ended, at most MaxToolsScan of them (the newest), read at
// most every toolsMaxAge (the figures are shared by every view).
const (
	ToolsWindow  = time.Hour
	MaxToolsScan = 2000
	toolsMaxAge  = 5 * time.Second
)

// windowStats are the Tools page's figures of the window, per tool.
type windowStats struct {
	at      time.Time
	tools   map[string]*toolRow // Finished, Failed, ToolEr, durs only
	scanned int
	partial bool
}

// toolsCache holds the latest windowStats.
type toolsCache struct {
	mu sync.Mutex
	w  *windowStats
}

// window returns the figures of the window, read again once older than
// toolsMaxAge.
func (h *Handler) window(ctx context.Context) (*windowStats, error) {
	now := h.now()
	h.toolsCache.mu.Lock()
	w := h.toolsCache.w
	h.toolsCache.mu.Unlock()
	if w != nil && now.Sub(w.at) < toolsMaxAge {
		return w, nil
	}
	w = &windowStats{at: now, tools: map[string]*toolRow{}}
	q := store.BrowseQuery{Statuses: []task.Status{task.Completed, task.Failed, task.Cancelled},
		CreatedAfter: now.Add(-ToolsWindow), Limit: store.MaxBrowseLimit}
	for w.scanned < MaxToolsScan {
		page, next, err := h.opts.Store.Browse(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, t := range page {
			tr := w.tools[t.Tool]
			if tr == nil {
				tr = &toolRow{Name: t.Tool}
				w.tools[t.Tool] = tr
			}
			tr.Finished++
			switch t.Outcome() {
			case task.OutcomeFailed:
				tr.Failed++
			case task.OutcomeToolError:
				tr.ToolEr++
			}
			tr.durs = append(tr.durs, t.LastUpdatedAt.Sub(t.CreatedAt))
		}
		w.scanned += len(page)
		if next == "" {
			break
		}
		if w.scanned >= MaxToolsScan {
			w.partial = true
			break
		}
		q.Cursor = next
	}
	for _, tr := range w.tools {
		slices.Sort(tr.durs)
	}
	h.toolsCache.mu.Lock()
	h.toolsCache.w = w
	h.toolsCache.mu.Unlock()
	return w, nil
}

// toolsPage is the data of the Tools page.
type toolsPage struct {
	Base, CSRF   string
	SignedIn     bool
	Flash, Error string
	// AllDrained says every tool is drained; HasDrain that the page can
	// change the switch.
	AllDrained, HasDrain bool
	Tools                []*toolRow
	Queues               []*queueRow
	// HasFleet says the page shows the fleet's switches: DrainWhy says
	// who drained the fleet, when and why (when it drains anything),
	// Canaries and Rollbacks the tools' canaries and rollbacks.
	HasFleet bool
	DrainWhy string
	// FleetReadAgo says when this instance last read the switches (""
	// when it has not).
	FleetReadAgo string
	Canaries     []*canaryView
	Rollbacks    []*rollbackView
	// Scanned is how many ended tasks the figures read; Partial says the
	// window held more (the figures are of the newest MaxToolsScan).
	Scanned  int
	Partial  bool
	Instance string
}

// toolRow is one tool on the Tools page.
type toolRow struct {
	Name                    string
	Queue                   string
	Cap                     int
	Running, Input, Waiting int
	Drained                 bool
	// DrainWhy says who drained the tool fleet-wide, when and why;
	// LocalDrained that this instance's own switch (its configuration)
	// drains it.
	DrainWhy     string
	LocalDrained bool
	// Canary and Rollback are the tool's, if any.
	Canary                   *canaryView
	Rollback                 *rollbackView
	Finished, Failed, ToolEr int
	// ErrorRate is the share of the finished tasks that failed or ended
	// with a tool error ("" when none finished); Bad flags one over 20%.
	ErrorRate string
	Bad       bool
	// P50 and P95 are the finished tasks' durations (creation to end).
	P50, P95 string
	durs     []time.Duration
}

// canaryView is a tool's canary on the Tools page: the requesters served
// as tasks, and who set it, when and why.
type canaryView struct {
	Tool                string
	Percent             int
	Tenants, Principals string
	By, At, Ago, Reason string
}

// rollbackView is a tool's rollback on the Tools page: what its new
// calls get, who rolled it back, when and why, and what the rollback's
// reconciliation found (counts; the keys in the cells' titles).
type rollbackView struct {
	Tool, Fallback                                                     string
	By, At, Ago, Reason                                                string
	Running, Held, Confirmed, Rejected, Unknown, InFlight              int
	RunningIDs, ConfirmedKeys, RejectedKeys, UnknownKeys, InFlightKeys string
}

// queueRow is one concurrency queue on the Tools page.
type queueRow struct {
	Name             string
	Cap              int
	Running, Waiting int
	Tools            []string
	Full             bool
}

// serveTools serves the Tools page: per tool and per queue, what runs
// against the cap, what waits, whether the tool is drained (the switch
// is there), and over the last hour its error rate and durations.
func (h *Handler) serveTools(w http.ResponseWriter, r *http.Request, v *visitor) {
	p := &toolsPage{Base: base(r), CSRF: v.csrf, SignedIn: h.opts.Authenticate != nil && !v.bearer,
		Flash: flash(r.URL.Query().Get("done")), Instance: h.opts.Engine.InstanceID(), HasDrain: h.opts.Drain != nil}
	code := http.StatusOK
	if err := h.loadTools(r, p); err != nil {
		h.opts.Logger.Error("dashboard: reading the tools' figures", "err", err)
		p.Error = "The figures could not be read from the store."
		code = http.StatusInternalServerError
	}
	h.render(w, code, "tools", p)
}

// loadTools fills p from the store.
func (h *Handler) loadTools(r *http.Request, p *toolsPage) error {
	ctx := r.Context()
	rows := map[string]*toolRow{}
	row := func(name string) *toolRow {
		tr := rows[name]
		if tr == nil {
			tr = &toolRow{Name: name}
			if h.opts.Queue != nil {
				tr.Queue, tr.Cap = h.opts.Queue(name)
			}
			rows[name] = tr
		}
		return tr
	}
	if h.opts.Tools != nil {
		for _, name := range h.opts.Tools() {
			row(name)
		}
	}
	var drained []string
	if h.opts.Drain != nil {
		p.AllDrained, drained = h.opts.Drain.DrainState()
	}
	active, err := h.opts.Store.CountActive(ctx)
	if err != nil {
		return err
	}
	for _, a := range active {
		tr := row(a.Tool)
		switch {
		case a.Queued:
			tr.Waiting += a.N
		case a.Status == task.InputRequired:
			tr.Input += a.N
		default:
			tr.Running += a.N
		}
	}
	// The ended tasks of the window (shared, read at most every
	// toolsMaxAge).
	w, err := h.window(ctx)
	if err != nil {
		return err
	}
	p.Scanned, p.Partial = w.scanned, w.partial
	for name, ws := range w.tools {
		tr := row(name)
		tr.Finished, tr.Failed, tr.ToolEr, tr.durs = ws.Finished, ws.Failed, ws.ToolEr, ws.durs
	}
	var fleet mcptask.Fleet
	if h.opts.Fleet != nil {
		fleet = h.opts.Fleet()
		h.loadFleet(fleet, p, rows)
	}
	queues := map[string]*queueRow{}
	for _, name := range slices.Sorted(maps.Keys(rows)) {
		tr := rows[name]
		tr.Drained = p.AllDrained || slices.Contains(drained, name)
		if h.opts.Fleet != nil {
			if tr.Drained && (fleet.Drain.All || slices.Contains(fleet.Drain.Tools, name)) {
				tr.DrainWhy = p.DrainWhy
			}
			tr.LocalDrained = fleet.LocalDrain.All || slices.Contains(fleet.LocalDrain.Tools, name)
		}
		if tr.Finished > 0 {
			bad := tr.Failed + tr.ToolEr
			tr.ErrorRate = strconv.Itoa(bad*100/tr.Finished) + "%"
			tr.Bad = bad*5 > tr.Finished
			tr.P50, tr.P95 = span(quantile(tr.durs, 0.50)), span(quantile(tr.durs, 0.95))
		}
		if tr.Queue != "" {
			qr := queues[tr.Queue]
			if qr == nil {
				qr = &queueRow{Name: tr.Queue, Cap: tr.Cap}
				queues[tr.Queue] = qr
				p.Queues = append(p.Queues, qr)
			}
			qr.Running += tr.Running + tr.Input
			qr.Waiting += tr.Waiting
			qr.Tools = append(qr.Tools, name)
		}
		p.Tools = append(p.Tools, tr)
	}
	for _, qr := range p.Queues {
		qr.Full = qr.Cap > 0 && qr.Running >= qr.Cap
	}
	slices.SortFunc(p.Queues, func(a, b *queueRow) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// loadFleet fills p with the fleet's switches f, and the rows of the
// tools they name.
func (h *Handler) loadFleet(f mcptask.Fleet, p *toolsPage, rows map[string]*toolRow) {
	now := h.now()
	p.HasFleet = true
	if !f.ReadAt.IsZero() {
		p.FleetReadAgo = ago(f.ReadAt, now)
	}
	if f.Drain.Active() {
		p.DrainWhy = switchFacts(f.Drain.By, f.Drain.At, f.Drain.Reason, now)
	}
	for _, name := range slices.Sorted(maps.Keys(f.Canaries)) {
		c := f.Canaries[name]
		cv := &canaryView{Tool: name, Percent: c.Percent, Tenants: strings.Join(c.Tenants, ", "),
			Principals: strings.Join(c.Principals, ", "), By: c.By, Reason: c.Reason}
		if !c.At.IsZero() {
			cv.At, cv.Ago = c.At.UTC().Format(time.DateTime), ago(c.At, now)
		}
		p.Canaries = append(p.Canaries, cv)
		if tr := rows[name]; tr != nil {
			tr.Canary = cv
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Rollbacks)) {
		rb := f.Rollbacks[name]
		rv := &rollbackView{Tool: name, Fallback: string(rb.Fallback), By: rb.By, Reason: rb.Reason,
			Running: len(rb.Running), Held: len(rb.Held), Confirmed: len(rb.Confirmed), Rejected: len(rb.Rejected), Unknown: len(rb.Unknown), InFlight: len(rb.InFlight),
			RunningIDs: clip(strings.Join(rb.Running, ", "), maxShown), ConfirmedKeys: clip(strings.Join(rb.Confirmed, ", "), maxShown),
			RejectedKeys: clip(strings.Join(rb.Rejected, ", "), maxShown), UnknownKeys: clip(strings.Join(rb.Unknown, ", "), maxShown),
			InFlightKeys: clip(strings.Join(rb.InFlight, ", "), maxShown)}
		if rv.Fallback == "" {
			rv.Fallback = string(mcptask.DrainRefuse)
		}
		if !rb.At.IsZero() {
			rv.At, rv.Ago = rb.At.UTC().Format(time.DateTime), ago(rb.At, now)
		}
		p.Rollbacks = append(p.Rollbacks, rv)
		if tr := rows[name]; tr != nil {
			tr.Rollback = rv
		}
	}
}

// switchFacts says who set a switch, when and why, for people: "by
// admin:alice, 5 min ago: incident 7" (the parts not known left out).
func switchFacts(by string, at time.Time, reason string, now time.Time) string {
	var parts []string
	if by != "" {
		parts = append(parts, "by "+by)
	}
	if !at.IsZero() {
		parts = append(parts, ago(at, now))
	}
	s := strings.Join(parts, ", ")
	if reason != "" {
		if s != "" {
			s += ": "
		}
		s += reason
	}
	return s
}

// quantile returns the q-quantile of sorted ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds)) + 0.999999)
	return ds[min(max(i-1, 0), len(ds)-1)]
}
