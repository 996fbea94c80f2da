// Package delivery is the webhook deliverer of MCP Events: a background
// service that claims the deliveries due in the store's durable outbox
// (store.Events: one per event and matching subscription, queued in the
// transaction of the change), signs and POSTs each (internal/webhook),
// and records the outcome: delivered, retried with capped exponential
// backoff, or, once its attempt budget is spent or the failure is final,
// a dead letter (the subscription suspended until its client refreshes
// it). Any instance sharing the store delivers; a lease keeps a delivery
// to one instance at a time, and a crashed instance's leases lapse. A
// redelivery keeps the event's webhook-id, so receivers dedupe.
//
// It also builds the EventOccurrence of an event (Occurrence), which the
// poll and stream modes send too.
package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/mcptask/mcptask/internal/webhook"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire/events"
	"golang.org/x/time/rate"
)

// The named defaults of the service.
const (
	// DefaultWorkers is how many deliveries are sent at once.
	DefaultWorkers = 16
	// DefaultInterval is how often the outbox is looked at without a
	// wake-up (another instance's changes, retries coming due).
	DefaultInterval = time.Second
	// DefaultLease is how long a claimed delivery is kept from other
	// instances: longer than an attempt, so that a crashed instance's
	// deliveries are taken over after it.
	DefaultLease = time.Minute
	// DefaultMaxAttempts is the attempt budget of a delivery.
	DefaultMaxAttempts = 12
	// DefaultRetryBase and DefaultRetryMax bound the backoff between
	// attempts: base × 2^(attempt-1), at most max, ±20% jitter.
	DefaultRetryBase = time.Second
	DefaultRetryMax  = 5 * time.Minute
	// DefaultRate is the deliveries per second of one requester's
	// subscriptions.
	DefaultRate = 50
	// DefaultRetention is how long events and dead letters are kept.
	DefaultRetention = 24 * time.Hour
	// DefaultPruneInterval is how often the retention is applied.
	DefaultPruneInterval = time.Minute
	// DefaultOpTimeout bounds one store call of the service.
	DefaultOpTimeout = 10 * time.Second
	// MaxResultBytes caps the result carried by a task.status event;
	// a larger one is left out (resultOmitted).
	MaxResultBytes = 64 << 10
)

// Observer is told of deliveries (the metrics implement it).
type Observer interface {
	// WebhookDelivered: an event reached its endpoint, latency after
	// the event happened, at its attempt-th attempt.
	WebhookDelivered(latency time.Duration, attempt int)
	// WebhookFailed: an attempt failed with category; dead says it was
	// the last.
	WebhookFailed(category string, dead bool)
}

// ResultFunc returns the result of the completed task id of owner, for
// its task.status event (nil when it is gone).
type ResultFunc func(ctx context.Context, owner task.Owner, id task.ID) json.RawMessage

// Options configures a Service. Zero fields take the defaults above.
type Options struct {
	Store       store.Events
	Sender      *webhook.Sender
	Result      ResultFunc
	Observer    Observer
	Log         *slog.Logger
	Workers     int
	Interval    time.Duration
	Lease       time.Duration
	MaxAttempts int
	RetryBase   time.Duration
	RetryMax    time.Duration
	Rate        float64
	Retention   time.Duration
	// PruneInterval, if negative, turns the retention off.
	PruneInterval time.Duration
	Now           func() time.Time
}

func (o *Options) defaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	def(&o.Interval, DefaultInterval)
	def(&o.Lease, DefaultLease)
	def(&o.RetryBase, DefaultRetryBase)
	def(&o.RetryMax, DefaultRetryMax)
	def(&o.Retention, DefaultRetention)
	if o.PruneInterval == 0 {
		o.PruneInterval = DefaultPruneInterval
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Service is the webhook deliverer.
type Service struct {
	o    Options
	wake chan struct{}

	mu       sync.Mutex
	limiters map[string]*rate.Limiter // by requester
}

// New returns a Service; Run runs it.
func New(o Options) *Service {
	o.defaults()
	return &Service{o: o, wake: make(chan struct{}, 1), limiters: map[string]*rate.Limiter{}}
}

// Wake makes the service look at the outbox now (a change was written).
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the attempts under way.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, s.o.Workers)
	tick := time.NewTicker(s.o.Interval)
	defer tick.Stop()
	var lastPrune time.Time
	for ctx.Err() == nil {
		if s.o.PruneInterval > 0 && time.Since(lastPrune) >= s.o.PruneInterval {
			lastPrune = time.Now()
			s.prune(ctx)
		}
		// Claim what free workers can take.
		free := s.o.Workers - len(sem)
		var ds []*store.Delivery
		if free > 0 {
			cctx, cancel := context.WithTimeout(ctx, DefaultOpTimeout)
			var err error
			ds, err = s.o.Store.ClaimDeliveries(cctx, s.o.Now(), s.o.Lease, free)
			cancel()
			if err != nil && ctx.Err() == nil {
				s.o.Log.Warn("events: claiming webhook deliveries failed", "err", err)
			}
		}
		for _, d := range ds {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done(); s.Wake() }()
				s.deliver(ctx, d)
			}()
		}
		if len(ds) == free && free > 0 {
			continue // more may be due
		}
		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-tick.C:
		}
	}
}

func (s *Service) prune(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, DefaultOpTimeout)
	defer cancel()
	now := s.o.Now()
	if _, err := s.o.Store.PruneEvents(cctx, now.Add(-s.o.Retention), now); err != nil && ctx.Err() == nil {
		s.o.Log.Warn("events: applying the retention of events failed", "err", err)
	}
}

// limiter returns the rate limiter of a requester's deliveries.
func (s *Service) limiter(owner string) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limiters[owner]
	if l == nil {
		if len(s.limiters) > 10000 {
			clear(s.limiters)
		}
		l = rate.NewLimiter(rate.Limit(s.o.Rate), max(1, int(s.o.Rate)))
		s.limiters[owner] = l
	}
	return l
}

// deliver makes one attempt of d and records its outcome.
func (s *Service) deliver(ctx context.Context, d *store.Delivery) {
	res := store.DeliveryResult{}
	err := s.limiter(string(d.Sub.Owner)).Wait(ctx)
	if err == nil {
		err = s.send(ctx, d)
	}
	if ctx.Err() != nil {
		// Shutting down: the lease lapses and another attempt (here
		// or elsewhere) takes it, with the same webhook-id.
		return
	}
	res.At = s.o.Now()
	switch {
	case err == nil:
		res.Delivered = true
		if s.o.Observer != nil {
			s.o.Observer.WebhookDelivered(res.At.Sub(d.Event.At), d.Attempts)
		}
	default:
		category, retryable := "request_error", false
		var we *webhook.Error
		if errors.As(err, &we) {
			category, retryable = we.Category, we.Retryable
		}
		res.Error = category
		if !retryable || d.Attempts >= s.o.MaxAttempts {
			res.Dead = true
			// A spent budget says the endpoint is down: its deliveries
			// wait for the client's refresh. A final failure (413, 410)
			// ends this event only.
			res.Suspend = retryable
		} else {
			res.Next = res.At.Add(s.backoff(d.Attempts))
		}
		if s.o.Observer != nil {
			s.o.Observer.WebhookFailed(category, res.Dead)
		}
		if res.Dead {
			s.o.Log.Warn("events: a webhook delivery was given up (dead letter)", "subscription", d.Sub.ID,
				"event", d.Event.ID(), "attempts", d.Attempts, "error", category)
		}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultOpTimeout)
	defer cancel()
	if err := s.o.Store.FinishDelivery(cctx, d, res); err != nil {
		// The lease lapses and the delivery is attempted again.
		s.o.Log.Warn("events: recording a webhook delivery failed", "subscription", d.Sub.ID, "event", d.Event.ID(), "err", err)
	}
}

// backoff is the wait after the attempt-th failed attempt.
func (s *Service) backoff(attempt int) time.Duration {
	d := s.o.RetryBase
	for i := 1; i < attempt && d < s.o.RetryMax; i++ {
		d *= 2
	}
	d = min(d, s.o.RetryMax)
	j := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(d) * j)
}

// send POSTs d's event, signed with the subscription's secrets.
func (s *Service) send(ctx context.Context, d *store.Delivery) error {
	cursor := d.Watermark.String()
	occ := Occurrence(ctx, d.Event, d.Sub.Name, d.Sub.Owner, &cursor, s.o.Result)
	body, err := json.Marshal(occ)
	if err != nil {
		return err
	}
	return s.o.Sender.Send(ctx, webhook.Message{URL: d.Sub.URL, ID: d.Event.ID(), SubscriptionID: d.Sub.ID,
		Secrets: Secrets(d.Sub, s.o.Now()), Body: body})
}

// Secrets returns the secrets that sign a subscription's deliveries at
// now: its secret, and its previous one during a rotation's grace.
func Secrets(sub *store.Subscription, now time.Time) []string {
	if sub.OldSecret != "" && now.Before(sub.OldUntil) && sub.OldSecret != sub.Secret {
		return []string{sub.Secret, sub.OldSecret}
	}
	return []string{sub.Secret}
}

// Occurrence returns the EventOccurrence of e, delivered as the event
// type name to owner, with cursor (nil: none).
func Occurrence(ctx context.Context, e *store.Event, name string, owner task.Owner, cursor *string, result ResultFunc) events.Occurrence {
	var data any
	switch e.Kind {
	case store.EventKindStatus:
		sd := events.StatusData{TaskID: string(e.TaskID), Tool: e.Tool, Status: string(e.Status), StatusMessage: e.Text, Outcome: string(e.Outcome)}
		if e.Status == task.Completed && result != nil {
			if r := result(ctx, owner, e.TaskID); len(r) > MaxResultBytes {
				sd.ResultOmitted = true
			} else if r != nil {
				sd.Result = r
			}
		}
		data = sd
	default:
		data = events.OutputData{TaskID: string(e.TaskID), Tool: e.Tool, Stream: e.Stream, Data: e.Data, Text: e.Text}
	}
	raw, _ := json.Marshal(data)
	return events.Occurrence{EventID: e.ID(), Name: name, Timestamp: e.At.UTC().Format(time.RFC3339Nano), Data: raw, Cursor: cursor}
}
