// Package metrics counts mcptask's tasks and requests as Prometheus
// metrics, for a library user's own registry or mcptaskd's /metrics:
//
//	reg := prometheus.NewRegistry()
//	m := metrics.New(reg)
//	eng, err := engine.New(engine.Options{Store: st, Observer: m})
//	...
//	if err := m.CollectStore(st, time.Second); err != nil { ... }
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// [Metrics] implements [engine.Observer]: the engine and the server's
// adapter tell it of every task created, finished and refused, every
// tasks/* request, denied lookup, limit refusal and raised poll interval,
// every start of a task that waited in a queue, every store call (its
// latency and failure), change-feed reconnect and takeover.
// [Metrics.CollectStore] adds gauges computed from the store when they are scraped (the tasks
// working and input_required, the tasks waiting per queue), which hold
// across restarts and across every instance sharing the store.
//
// Every label is bounded: tool and queue names (the server's own),
// statuses, methods, outcomes and reasons; never a task ID, a principal
// or an argument. docs/metrics.md lists every metric.
package metrics

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// Namespace is the prefix of every metric's name.
const Namespace = "mcptask"

// Metrics holds mcptask's collectors, registered on one registry by New.
// It implements [engine.Observer]; its methods are safe for concurrent
// use.
type Metrics struct {
	reg prometheus.Registerer

	created     *prometheus.CounterVec
	finished    *prometheus.CounterVec
	refused     *prometheus.CounterVec
	routed      *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	queueWait   *prometheus.HistogramVec
	requests    *prometheus.CounterVec
	denied      *prometheus.CounterVec
	limited     *prometheus.CounterVec
	pollsRaised prometheus.Counter
	storeCalls  *prometheus.HistogramVec
	storeErrors *prometheus.CounterVec
	feed        prometheus.Counter
	takeovers   *prometheus.CounterVec
	webhooks    *prometheus.CounterVec
	hookLatency prometheus.Histogram
	steps       *prometheus.CounterVec
	stepTime    *prometheus.HistogramVec
}

var _ engine.Observer = (*Metrics)(nil)

// DurationBuckets are the buckets (seconds) of the task duration and
// queue wait histograms: from 10 ms to 6 hours.
var DurationBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 6 * 3600}

// StoreBuckets are the buckets (seconds) of the store call latency
// histogram: from 0.5 ms to 10 s.
var StoreBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10}

// New returns Metrics with its collectors registered on reg (a nil reg:
// prometheus.DefaultRegisterer). It panics if they are registered there
// already, as prometheus.MustRegister does.
func New(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: DurationBuckets}, labels)
	}
	m := &Metrics{
		reg:       reg,
		created:   counter("tasks_created_total", "Tasks created, by tool.", "tool"),
		finished:  counter("tasks_finished_total", "Tasks that reached a terminal status (completed, failed, cancelled), by tool, status and outcome (ok, tool_error: completed with isError, failed, cancelled).", "tool", "status", "outcome"),
		refused:   counter("tasks_refused_total", "Task-augmented tool calls refused before a task was created, by tool and reason (draining, canary, rollback, create_rate, active_tasks).", "tool", "reason"),
		routed:    counter("calls_routed_total", "Task-augmented tool calls by tool and the mode they were served in (task, approval, handoff, sync, refused) under the fleet's switches.", "tool", "mode"),
		duration:  histogram("task_duration_seconds", "Time from a task's creation to its terminal status, by tool, status and outcome.", "tool", "status", "outcome"),
		queueWait: histogram("queue_wait_seconds", "Time a task waited in its concurrency queue before it started, by queue.", "queue"),
		requests:  counter("requests_total", "tasks/* requests, by method and outcome (ok, error, limited).", "method", "outcome"),
		denied:    counter("denied_lookups_total", "Requests naming a task the requester may not see, by reason (unknown, other_owner, expired).", "reason"),
		limited:   counter("limit_refusals_total", "Requests refused by a per-requester limit, by limit (request_rate, create_rate, active_tasks, listen_streams).", "limit"),
		pollsRaised: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "poll_interval_raised_total",
			Help: "Answers that suggested a raised poll interval to a requester polling faster than suggested."}),
		storeCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "store_operation_duration_seconds",
			Help: "Latency of the engine's store calls, by operation.", Buckets: StoreBuckets}, []string{"operation"}),
		storeErrors: counter("store_errors_total", "Store calls of the engine that failed, by operation (not found, duplicates, quotas and cancellations are not failures).", "operation"),
		feed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "change_feed_reconnects_total",
			Help: "Times the engine followed the store's change feed again after it failed."}),
		webhooks: counter("webhook_deliveries_total", "Webhook delivery attempts of MCP Events, by result (delivered, retry, dead) and error category (none, connection_refused, timeout, tls_error, http_4xx, http_5xx, redirect, blocked_address, request_error).", "result", "error"),
		hookLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "webhook_delivery_latency_seconds",
			Help: "Time from an event (a status change, an output) to its webhook delivery's acceptance by the endpoint.", Buckets: StoreBuckets}),
		steps:     counter("workflow_steps_total", "Workflow steps that ended, by workflow, step and outcome (ok, tool_error, failed, cancelled, skipped); a run of a workflow again after a restart counts the steps it waited for again.", "workflow", "step", "outcome"),
		stepTime:  histogram("workflow_step_duration_seconds", "Time a workflow waited for a step, retries included, by workflow, step and outcome.", "workflow", "step", "outcome"),
		takeovers: counter("takeovers_total", "Tasks taken over from a stopped process or an expired lease, by tool and outcome (rerun, failed_unknown, failed_attempts, reconciled, not_rerun).", "tool", "outcome"),
	}
	reg.MustRegister(m.created, m.finished, m.refused, m.routed, m.duration, m.queueWait, m.requests, m.denied, m.limited, m.pollsRaised,
		m.storeCalls, m.storeErrors, m.feed, m.takeovers, m.webhooks, m.hookLatency, m.steps, m.stepTime)
	return m
}

// WorkflowStep counts a step of a workflow that ended with outcome
// after d (zero for a skipped step, which is not timed); see
// workflow.Observer.
func (m *Metrics) WorkflowStep(workflow, step, outcome string, d time.Duration) {
	m.steps.WithLabelValues(workflow, step, outcome).Inc()
	if outcome != "skipped" {
		m.stepTime.WithLabelValues(workflow, step, outcome).Observe(d.Seconds())
	}
}

// WebhookDelivered counts a webhook delivery accepted by its endpoint,
// latency after its event; see delivery.Observer.
func (m *Metrics) WebhookDelivered(latency time.Duration, _ int) {
	m.webhooks.WithLabelValues("delivered", "none").Inc()
	m.hookLatency.Observe(latency.Seconds())
}

// WebhookFailed counts a failed webhook delivery attempt; dead says it
// was the delivery's last (a dead letter); see delivery.Observer.
func (m *Metrics) WebhookFailed(category string, dead bool) {
	result := "retry"
	if dead {
		result = "dead"
	}
	m.webhooks.WithLabelValues(result, category).Inc()
}

// TaskCreated counts a task of tool created; see [engine.TaskObserver].
func (m *Metrics) TaskCreated(tool string) { m.created.WithLabelValues(tool).Inc() }

// TaskFinished counts a task of tool finished with outcome and observes
// its duration; see [engine.TaskObserver]. A tool error counts as status
// "completed", outcome "tool_error": an alert on failures includes it by
// the outcome label.
func (m *Metrics) TaskFinished(tool string, outcome task.Outcome, age time.Duration) {
	status := string(outcome.Status())
	m.finished.WithLabelValues(tool, status, string(outcome)).Inc()
	m.duration.WithLabelValues(tool, status, string(outcome)).Observe(age.Seconds())
}

// QueueWaited observes the wait of a task started from queue; see
// [engine.TaskObserver].
func (m *Metrics) QueueWaited(queue string, wait time.Duration) {
	m.queueWait.WithLabelValues(queue).Observe(wait.Seconds())
}

// Request counts a tasks/* request; see [engine.RequestObserver].
func (m *Metrics) Request(method, outcome string) { m.requests.WithLabelValues(method, outcome).Inc() }

// Denied counts a denied lookup; see [engine.RequestObserver].
func (m *Metrics) Denied(reason string) { m.denied.WithLabelValues(reason).Inc() }

// Limited counts a limit refusal; see [engine.RequestObserver].
func (m *Metrics) Limited(limit string) { m.limited.WithLabelValues(limit).Inc() }

// TaskRefused counts a refused task creation; see
// [engine.RequestObserver].
func (m *Metrics) TaskRefused(tool, reason string) { m.refused.WithLabelValues(tool, reason).Inc() }

// CallRouted counts a task-augmented call by the mode it was served in;
// see [engine.RequestObserver].
func (m *Metrics) CallRouted(tool, mode string) { m.routed.WithLabelValues(tool, mode).Inc() }

// PollRaised counts a raised poll interval; see [engine.RequestObserver].
func (m *Metrics) PollRaised() { m.pollsRaised.Inc() }

// StoreCall observes the latency of a store call and counts its failure;
// see [engine.StoreObserver].
func (m *Metrics) StoreCall(op string, d time.Duration, err error) {
	m.storeCalls.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		m.storeErrors.WithLabelValues(op).Inc()
	}
}

// FeedReconnect counts a change feed followed again; see
// [engine.StoreObserver].
func (m *Metrics) FeedReconnect() { m.feed.Inc() }

// TaskTakenOver counts a task taken over; see [engine.StoreObserver].
func (m *Metrics) TaskTakenOver(tool, outcome string) {
	m.takeovers.WithLabelValues(tool, outcome).Inc()
}

// DefaultCountTimeout bounds the store reads of a scrape when
// CollectStore is given no timeout.
const DefaultCountTimeout = 2 * time.Second

// CollectStore registers, on the registry of New, the gauges read from
// st at each scrape, within timeout (zero: DefaultCountTimeout):
// mcptask_tasks (unfinished tasks running, by tool and status) and
// mcptask_queue_waiting_tasks (tasks waiting per queue). declared, if
// not nil, names the server's tools and queues at each scrape: their
// gauges are sent at 0 when the store counts none, so that an idle tool
// or queue is present (an alert on it sees 0, not nothing). A failed
// read leaves its gauges out of that scrape and counts in
// mcptask_store_count_errors_total. It returns the registry's error if
// they are registered already.
func (m *Metrics) CollectStore(st store.Store, timeout time.Duration, declared func() (tools, queues []string)) error {
	if timeout <= 0 {
		timeout = DefaultCountTimeout
	}
	sc := &storeCollector{
		store: st, timeout: timeout, declared: declared,
		tasks: prometheus.NewDesc(Namespace+"_tasks", "Unfinished tasks that are not waiting in a queue, by tool and status (working, input_required), read from the store at scrape time.",
			[]string{"tool", "status"}, nil),
		waiting: prometheus.NewDesc(Namespace+"_queue_waiting_tasks", "Tasks waiting in a concurrency queue, by queue, read from the store at scrape time.",
			[]string{"queue"}, nil),
		hooks: prometheus.NewDesc(Namespace+"_webhook_deliveries", "Webhook deliveries of MCP Events in the store's outbox, by state (pending, dead: dead letters kept for the retention), read at scrape time.",
			[]string{"state"}, nil),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "store_count_errors_total",
			Help: "Scrape-time store reads that failed (their gauges were left out of the scrape), by read (tasks, queues, webhooks)."}, []string{"read"}),
	}
	return m.reg.Register(sc)
}

// storeCollector reads the gauges of CollectStore at each scrape.
type storeCollector struct {
	store          store.Store
	timeout        time.Duration
	declared       func() (tools, queues []string)
	tasks, waiting *prometheus.Desc
	hooks          *prometheus.Desc
	errs           *prometheus.CounterVec
}

// Describe sends the descriptions of the collector's metrics.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tasks
	ch <- c.waiting
	ch <- c.hooks
	c.errs.Describe(ch)
}

// Collect reads the store and sends the gauges.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var tools, queues []string
	if c.declared != nil {
		tools, queues = c.declared()
		slices.Sort(queues)
		queues = slices.Compact(queues)
	}
	if counts, err := c.store.CountActive(ctx); err != nil {
		c.errs.WithLabelValues("tasks").Inc()
	} else {
		type key struct{ tool, status string }
		sum := map[key]int{}
		for _, tool := range tools {
			sum[key{tool, string(task.Working)}] += 0
			sum[key{tool, string(task.InputRequired)}] += 0
		}
		for _, n := range counts {
			if !n.Queued {
				sum[key{n.Tool, string(n.Status)}] += n.N
			}
		}
		for k, n := range sum {
			ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(n), k.tool, k.status)
		}
	}
	if waiting, err := c.store.WaitingQueues(ctx); err != nil {
		c.errs.WithLabelValues("queues").Inc()
	} else {
		for _, q := range queues {
			if _, ok := waiting[q]; !ok {
				ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, 0, q)
			}
		}
		for q, n := range waiting {
			ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n), q)
		}
	}
	if pending, dead, err := c.store.EventCounts(ctx); err != nil {
		c.errs.WithLabelValues("webhooks").Inc()
	} else {
		ch <- prometheus.MustNewConstMetric(c.hooks, prometheus.GaugeValue, float64(pending), "pending")
		ch <- prometheus.MustNewConstMetric(c.hooks, prometheus.GaugeValue, float64(dead), "dead")
	}
	c.errs.Collect(ch)
}

// CollectUpstreams registers, on the registry of New, the gauge
// mcptask_upstream_up: for each upstream that health names (e.g. the
// upstream MCP servers of a [gateway.Gateway], by its Health method), 1
// when it answered last, 0 when it did not. health is called at each
// scrape and must be quick. Upstream names are the configuration's.
//
// [gateway.Gateway]: https://pkg.go.dev/github.com/mcptask/mcptask/source/gateway#Gateway
func (m *Metrics) CollectUpstreams(health func() map[string]error) error {
	return m.reg.Register(&upstreamCollector{health: health,
		up: prometheus.NewDesc(Namespace+"_upstream_up", "Whether an upstream (a gateway's upstream MCP server) answered last: 1, or 0 when it did not, by upstream, at scrape time.",
			[]string{"upstream"}, nil)})
}

// CollectJobAPIs registers, on the registry of New, the gauge
// mcptask_jobapi_up: for each HTTP job tool that health names (e.g. by
// the Health method of the [httpjob.Tools] registered), 1 when its last
// request to its job API was answered (or it sent none yet), 0 when it
// failed (no answer, or HTTP 5xx). health is called at each scrape and
// must be quick. Tool names are the configuration's.
//
// [httpjob.Tools]: https://pkg.go.dev/github.com/mcptask/mcptask/source/httpjob#Tools
func (m *Metrics) CollectJobAPIs(health func() map[string]error) error {
	return m.reg.Register(&upstreamCollector{health: health,
		up: prometheus.NewDesc(Namespace+"_jobapi_up", "Whether the job API of an HTTP job tool answered its last request: 1, or 0 when it failed (no answer, HTTP 5xx), by tool, at scrape time.",
			[]string{"tool"}, nil)})
}

// upstreamCollector reads a gauge of CollectUpstreams or CollectJobAPIs
// at each scrape.
type upstreamCollector struct {
	health func() map[string]error
	up     *prometheus.Desc
}

// Describe sends the description of the gauge.
func (c *upstreamCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.up }

// Collect sends the gauge for each upstream or tool.
func (c *upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	for name, err := range c.health() {
		v := 1.0
		if err != nil {
			v = 0
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, v, name)
	}
}
