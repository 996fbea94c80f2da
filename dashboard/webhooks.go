package dashboard

import (
	"net/http"
	"net/url"
	"time"
)

// maxDeadLetters caps the dead letters the Webhooks page shows.
const maxDeadLetters = 200

// webhooksPage is the data of the Webhooks page: the outbox's counts and
// its newest dead letters.
type webhooksPage struct {
	Base, CSRF    string
	SignedIn      bool
	Flash, Error  string
	Pending, Dead int64
	Letters       []*deadRow
	Instance      string
}

// deadRow is one dead letter. The callback is shown as its host only:
// its path or query may be the receiver's secret (a capability URL).
type deadRow struct {
	At, Ago         string
	Subscription    string
	Owner, Callback string
	Event, TaskID   string
	What            string
	Attempts        int
	Error           string
}

// serveWebhooks shows the webhook outbox: deliveries pending, dead
// letters (given up after their attempt budget or a final failure; their
// subscriptions are suspended until the client refreshes them).
func (h *Handler) serveWebhooks(w http.ResponseWriter, r *http.Request, v *visitor) {
	p := &webhooksPage{Base: base(r), CSRF: v.csrf, SignedIn: h.opts.Authenticate != nil && !v.bearer,
		Instance: h.opts.Engine.InstanceID()}
	code := http.StatusOK
	ctx := r.Context()
	var err error
	if p.Pending, p.Dead, err = h.opts.Store.EventCounts(ctx); err == nil {
		dls, derr := h.opts.Store.DeadLetters(ctx, maxDeadLetters)
		err = derr
		now := h.now()
		for _, d := range dls {
			cb := d.URL
			if u, perr := url.Parse(d.URL); perr == nil {
				cb = u.Host
			}
			what := string(d.Event.Kind)
			if d.Event.Status != "" {
				what += " " + string(d.Event.Status)
			}
			p.Letters = append(p.Letters, &deadRow{At: d.At.UTC().Format(time.DateTime), Ago: ago(d.At, now),
				Subscription: d.SubID, Owner: string(d.Owner), Callback: cb, Event: d.Event.ID(), TaskID: string(d.Event.TaskID),
				What: what, Attempts: d.Attempts, Error: d.Error})
		}
	}
	if err != nil {
		h.opts.Logger.Error("dashboard: reading the webhook outbox", "err", err)
		p.Error = "The webhook outbox could not be read from the store."
		code = http.StatusInternalServerError
	}
	h.render(w, code, "webhooks", p)
}
