// Command mcptask-curves measures how mcptask's costs grow, over loopback
// HTTP on the 2026-07-28 wire, against in-process servers assembled like
// mcptaskd (loadgen.StartServer) on SQLite (synchronous=FULL) and on
// PostgreSQL. It has three parts (all by default; name some as arguments
// to run only those):
//
//   - retained: tasks/get of random retained tasks and of recent ones, and
//     task creation, with -c workers, on a store holding each of -sizes
//     completed tasks (one store per size, all filled first, then
//     measured in turn over the rounds, so that a drift of the machine
//     hits every size alike). Each store is filled in bulk through the
//     store package's own encoding (sqlite.Store.LoadTasks at
//     synchronous=NORMAL, the file then reopened at FULL by the server;
//     postgres.Store.LoadTasks, a COPY, then VACUUM (ANALYZE)), with copies of a
//     task created through the server, so that every filled task is one
//     the client may read. The fill time is reported.
//   - create: task creation with each of -create-c workers.
//   - instances: creation and tasks/get with -c workers spread over each
//     of -instances PostgreSQL instances on one schema (a schema per
//     number of instances, all measured in turn over the rounds; in
//     process: each instance has its own pgx pool, engine, MCP server and
//     HTTP server, but they share one Go runtime with each other and the
//     client).
//
// Each part runs on each of -backends that applies (instances: PostgreSQL
// only). PostgreSQL needs -postgres (default $MCPTASK_TEST_POSTGRES_DSN);
// every store is a fresh schema (mcptask_curves_…) dropped at the end, or
// a SQLite file in a temporary directory removed at the end.
package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcptask/mcptask/bench/internal/loadgen"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

func main() { loadgen.Main("mcptask-curves", run) }

// Backends and parts.
const (
	backendSQLite   = "sqlite"
	backendPostgres = "postgres"

	partRetained  = "retained"
	partCreate    = "create"
	partInstances = "instances"
)

var allParts = []string{partRetained, partCreate, partInstances}

// config is the command line.
type config struct {
	dsn         string
	dir         string
	parts       []string
	backends    []string
	sizes       []int
	conc        int
	createConc  []int
	instances   []int
	dur         time.Duration
	rounds      int
	recent      int
	pool        int
	fillWorkers int
	fillChunk   int
	jsonOut     bool
	printFile   string
	verbose     bool
}

// usage is the text of -h, before the flags.
const usage = `Usage: mcptask-curves [flags] [retained] [create] [instances]

Cost curves of mcptask over loopback HTTP (2026-07-28 wire), in-process
servers on SQLite (synchronous=FULL) and PostgreSQL:
  retained   tasks/get (random and recent tasks) and creation as the store
             holds each of -sizes tasks (filled in bulk, timed)
  create     creation with each of -create-c workers
  instances  creation and tasks/get on each of -instances PostgreSQL
             instances sharing one schema
With no part named, runs all three.

Examples:
  mcptask-curves retained -sizes 1000,100000,1000000
  mcptask-curves create -backends sqlite -create-c 1,16,64 -d 10s
  mcptask-curves instances -instances 1,2,3 -json

Flags:
`

// parseConfig reads the command line.
func parseConfig(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := loadgen.NewFlagSet("mcptask-curves", stderr, usage)
	fs.StringVar(&c.dsn, "postgres", os.Getenv("MCPTASK_TEST_POSTGRES_DSN"), "PostgreSQL `DSN` (default $MCPTASK_TEST_POSTGRES_DSN); each store is a fresh schema there, dropped at the end. Empty skips PostgreSQL")
	fs.StringVar(&c.dir, "dir", "", "`directory` for the SQLite files (default: a temporary directory, removed at the end)")
	backends := fs.String("backends", "sqlite,postgres", "`list` of backends: sqlite, postgres")
	sizes := fs.String("sizes", "1000,100000,1000000", "retained: `list` of numbers of retained tasks, increasing")
	fs.IntVar(&c.conc, "c", 16, "retained, instances: concurrent closed-loop `workers`")
	createConc := fs.String("create-c", "1,16,64", "create: `list` of numbers of workers")
	instances := fs.String("instances", "1,2,3", "instances: `list` of numbers of PostgreSQL instances")
	fs.DurationVar(&c.dur, "d", 8*time.Second, "measured `duration` of each operation at each point, split over the rounds")
	fs.IntVar(&c.rounds, "rounds", 4, "rounds the operations of a point are interleaved over")
	fs.IntVar(&c.recent, "recent", 1000, "retained: tasks/get of recent tasks cycles through the newest `n` filled")
	fs.IntVar(&c.pool, "pool", 10000, "instances: completed tasks tasks/get picks from at random")
	fs.IntVar(&c.fillWorkers, "fill-workers", 4, "goroutines loading tasks in bulk")
	fs.IntVar(&c.fillChunk, "fill-chunk", 5000, "tasks per bulk load (one transaction or COPY)")
	fs.BoolVar(&c.jsonOut, "json", false, "print the figures as JSON")
	fs.StringVar(&c.printFile, "print", "", "measure nothing: print the tables of the JSON output of an earlier run, read from `file`")
	fs.BoolVar(&c.verbose, "v", false, "report progress on stderr")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.sizes, err = parseInts(*sizes); err != nil {
		return c, fmt.Errorf("-sizes: %w", err)
	}
	if !slices.IsSorted(c.sizes) {
		return c, errors.New("-sizes: must be increasing")
	}
	if c.createConc, err = parseInts(*createConc); err != nil {
		return c, fmt.Errorf("-create-c: %w", err)
	}
	if c.instances, err = parseInts(*instances); err != nil {
		return c, fmt.Errorf("-instances: %w", err)
	}
	for _, b := range strings.Split(*backends, ",") {
		switch b = strings.TrimSpace(b); b {
		case backendSQLite, backendPostgres:
			c.backends = append(c.backends, b)
		case "":
		default:
			return c, fmt.Errorf("-backends: unknown backend %q", b)
		}
	}
	for _, p := range fs.Args() {
		if !slices.Contains(allParts, p) {
			return c, fmt.Errorf("unknown part %q (want %s)", p, strings.Join(allParts, ", "))
		}
		if !slices.Contains(c.parts, p) {
			c.parts = append(c.parts, p)
		}
	}
	if len(c.parts) == 0 {
		c.parts = allParts
	}
	if c.conc < 1 || c.rounds < 1 || c.dur <= 0 || c.recent < 1 || c.pool < 1 || c.fillWorkers < 1 || c.fillChunk < 1 {
		return c, errors.New("-c, -rounds, -d, -recent, -pool, -fill-workers and -fill-chunk must be positive")
	}
	return c, nil
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// Report is everything a run measured (the -json output).
type Report struct {
	Environment Environment      `json:"environment"`
	Retained    []RetainedPoint  `json:"retained,omitempty"`
	Create      []CreatePoint    `json:"create,omitempty"`
	Instances   []InstancesPoint `json:"instances,omitempty"`
}

// Environment describes the run.
type Environment struct {
	Date       time.Time `json:"date"`
	GoVersion  string    `json:"goVersion"`
	NumCPU     int       `json:"numCPU"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	CPU        string    `json:"cpu"`
	Workers    int       `json:"workers"`
	Duration   string    `json:"durationPerOp"`
	Rounds     int       `json:"rounds"`
}

// RetainedPoint is the retained part's figures for one backend and size.
type RetainedPoint struct {
	Backend  string `json:"backend"`
	Retained int    `json:"retained"`
	// FillTime is how long the bulk load of the Retained tasks took.
	FillTime time.Duration `json:"fillNs"`
	// StoreBytes is the size of the store after the fill: SQLite file
	// and WAL; PostgreSQL tasks table with its indexes and TOAST.
	StoreBytes int64         `json:"storeBytes"`
	GetRandom  loadgen.Stats `json:"getRandom"`
	GetRecent  loadgen.Stats `json:"getRecent"`
	Create     loadgen.Stats `json:"create"`
}

// CreatePoint is the create part's figures for one backend and number
// of workers.
type CreatePoint struct {
	Backend string        `json:"backend"`
	Workers int           `json:"workers"`
	Create  loadgen.Stats `json:"create"`
}

// InstancesPoint is the instances part's figures for one number of
// PostgreSQL instances.
type InstancesPoint struct {
	Instances int           `json:"instances"`
	Create    loadgen.Stats `json:"create"`
	Get       loadgen.Stats `json:"tasksGet"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		return err
	}
	if cfg.printFile != "" {
		b, err := os.ReadFile(cfg.printFile)
		if err != nil {
			return err
		}
		var rep Report
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("%s: %w", cfg.printFile, err)
		}
		printReport(stdout, &rep)
		return nil
	}
	if cfg.dsn == "" && slices.Contains(cfg.backends, backendPostgres) {
		fmt.Fprintln(stderr, "mcptask-curves: no PostgreSQL DSN (-postgres or $MCPTASK_TEST_POSTGRES_DSN): PostgreSQL skipped")
		cfg.backends = slices.DeleteFunc(cfg.backends, func(b string) bool { return b == backendPostgres })
	}
	if cfg.dir == "" {
		dir, err := os.MkdirTemp("", "mcptask-curves-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.dir = dir
	}
	rep := &Report{Environment: Environment{
		Date: time.Now().UTC(), GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), CPU: loadgen.CPUModel(), Workers: cfg.conc,
		Duration: cfg.dur.String(), Rounds: cfg.rounds,
	}}
	progress := func(format string, a ...any) {
		if cfg.verbose {
			fmt.Fprintf(stderr, time.Now().Format("15:04:05 ")+format+"\n", a...)
		}
	}
	for _, part := range cfg.parts {
		switch part {
		case partRetained:
			for _, b := range cfg.backends {
				pts, err := runRetained(ctx, cfg, b, progress)
				if err != nil {
					return fmt.Errorf("retained, %s: %w", b, err)
				}
				rep.Retained = append(rep.Retained, pts...)
			}
		case partCreate:
			for _, b := range cfg.backends {
				pts, err := runCreate(ctx, cfg, b, progress)
				if err != nil {
					return fmt.Errorf("create, %s: %w", b, err)
				}
				rep.Create = append(rep.Create, pts...)
			}
		case partInstances:
			if !slices.Contains(cfg.backends, backendPostgres) {
				fmt.Fprintln(stderr, "mcptask-curves: instances needs PostgreSQL: skipped")
				continue
			}
			pts, err := runInstances(ctx, cfg, progress)
			if err != nil {
				return fmt.Errorf("instances: %w", err)
			}
			rep.Instances = pts
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if cfg.jsonOut {
		return loadgen.WriteJSON(stdout, rep)
	}
	printReport(stdout, rep)
	return nil
}

// bed is a store and the servers on it.
type bed struct {
	cfg     config
	backend string
	path    string // SQLite: the file
	schema  string // PostgreSQL: the schema
	servers []*loadgen.Server
	clients []*loadgen.Client
	tmpl    *task.Task // a completed task created through the server
	ids     []task.ID  // the filled tasks, oldest first
}

var quiet = slog.New(slog.DiscardHandler)

// newBed starts n servers on a fresh store of backend (SQLite: n is 1)
// and creates, through the first, the task the fills copy.
func newBed(ctx context.Context, cfg config, backend string, n int) (_ *bed, err error) {
	b := &bed{cfg: cfg, backend: backend}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.close())
		}
	}()
	switch backend {
	case backendSQLite:
		b.path = filepath.Join(cfg.dir, "curves-"+randomHex()+".db")
		if err := b.startSQLite(); err != nil {
			return nil, err
		}
	case backendPostgres:
		b.schema = "mcptask_curves_" + randomHex()
		for i := range n {
			pg, err := postgres.Open(ctx, cfg.dsn, &postgres.Options{Schema: b.schema, Logger: quiet})
			if err != nil {
				return nil, err
			}
			srv, err := loadgen.StartServer("", &loadgen.ServerOptions{Store: pg, InstanceID: fmt.Sprintf("curves-%d", i)})
			if err != nil {
				pg.Close()
				return nil, err
			}
			b.servers = append(b.servers, srv)
		}
	default:
		return nil, fmt.Errorf("unknown backend %q", backend)
	}
	if err := b.connect(); err != nil {
		return nil, err
	}
	id, err := b.clients[0].Create(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.clients[0].WaitCompleted(ctx, id); err != nil {
		return nil, err
	}
	if b.tmpl, err = b.servers[0].Tasks.Get(ctx, task.ID(id)); err != nil {
		return nil, err
	}
	return b, nil
}

// startSQLite starts the server on the SQLite file, synchronous=FULL.
func (b *bed) startSQLite() error {
	srv, err := loadgen.StartServer(b.path, &loadgen.ServerOptions{SQLite: &sqlite.Options{Synchronous: sqlite.SyncFull}})
	if err != nil {
		return err
	}
	b.servers = []*loadgen.Server{srv}
	return nil
}

// connect makes one client per server, each with enough connections for
// every worker.
func (b *bed) connect() error {
	b.closeClients()
	for _, s := range b.servers {
		c, err := loadgen.NewClient(s.URL, loadgen.ClientOptions{Conns: max(b.cfg.conc, slices.Max(b.cfg.createConc))})
		if err != nil {
			return err
		}
		b.clients = append(b.clients, c)
	}
	return nil
}

func (b *bed) closeClients() {
	for _, c := range b.clients {
		c.Close()
	}
	b.clients = nil
}

// close stops the servers and removes the store.
func (b *bed) close() error {
	b.closeClients()
	var errs []error
	for _, s := range b.servers {
		errs = append(errs, s.Close())
	}
	b.servers = nil
	if b.path != "" {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(b.path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if b.schema != "" {
		errs = append(errs, loadgen.DropSchema(b.cfg.dsn, b.schema))
	}
	return errors.Join(errs...)
}

// fill adds n completed tasks, copies of the template with fresh IDs,
// in bulk, and returns how long it took. SQLite: the server is stopped,
// the file loaded at synchronous=NORMAL, and the server started again at
// FULL (a new URL: the clients are remade).
func (b *bed) fill(ctx context.Context, n int) (time.Duration, error) {
	start := time.Now()
	var load func(context.Context, []*task.Task) error
	var after func() error
	switch b.backend {
	case backendSQLite:
		b.closeClients()
		if err := b.servers[0].Close(); err != nil {
			return 0, err
		}
		b.servers = nil
		st, err := sqlite.Open(b.path, &sqlite.Options{Synchronous: sqlite.SyncNormal})
		if err != nil {
			return 0, err
		}
		load = st.LoadTasks
		after = func() error {
			if err := st.Close(); err != nil {
				return err
			}
			if err := b.startSQLite(); err != nil {
				return err
			}
			return b.connect()
		}
	case backendPostgres:
		pg := b.servers[0].Tasks.(*postgres.Store)
		load = pg.LoadTasks
		after = func() error { return pg.Analyze(ctx) }
	}
	first := len(b.ids)
	for range n {
		b.ids = append(b.ids, task.NewID())
	}
	chunks := make(chan []task.ID)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range b.cfg.fillWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ids := range chunks {
				now := time.Now()
				tasks := make([]*task.Task, len(ids))
				for i, id := range ids {
					t := *b.tmpl
					t.ID, t.CreatedAt, t.LastUpdatedAt = id, now, now
					tasks[i] = &t
				}
				if err := load(ctx, tasks); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := first; i < len(b.ids) && ctx.Err() == nil; i += b.cfg.fillChunk {
		chunks <- b.ids[i:min(i+b.cfg.fillChunk, len(b.ids))]
	}
	close(chunks)
	wg.Wait()
	errs = append(errs, ctx.Err(), after())
	return time.Since(start), errors.Join(errs...)
}

// size returns the size of the store: SQLite file and WAL; PostgreSQL
// tasks table with its indexes and TOAST.
func (b *bed) size(ctx context.Context) (int64, error) {
	if b.backend == backendSQLite {
		var n int64
		for _, suffix := range []string{"", "-wal"} {
			fi, err := os.Stat(b.path + suffix)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return 0, err
			}
			if err == nil {
				n += fi.Size()
			}
		}
		return n, nil
	}
	conn, err := pgx.Connect(ctx, b.cfg.dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int64
	err = conn.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", pgx.Identifier{b.schema, "tasks"}.Sanitize()).Scan(&n)
	return n, err
}

// client returns the client worker w uses: the workers are spread over
// the servers in turn.
func (b *bed) client(w int) *loadgen.Client { return b.clients[w%len(b.clients)] }

// idle waits until every task created so far has completed.
func (b *bed) idle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return b.servers[0].WaitIdle(ctx)
}

// phase is one operation measured at a point, with its figures per round.
type phase struct {
	name string
	conc int
	op   loadgen.Op
	runs []loadgen.Stats
}

// phaseSet is the phases measured on one bed.
type phaseSet struct {
	bed    *bed
	phases []*phase
}

// measure is measureSets of one bed, returning each phase's combined
// figures.
func (b *bed) measure(ctx context.Context, phases []*phase) ([]loadgen.Stats, error) {
	if err := measureSets(ctx, b.cfg, []*phaseSet{{bed: b, phases: phases}}); err != nil {
		return nil, err
	}
	out := make([]loadgen.Stats, len(phases))
	for i, p := range phases {
		out[i] = p.combined()
	}
	return out, nil
}

// combined returns the phase's figures over its rounds.
func (p *phase) combined() loadgen.Stats { return loadgen.Combine(p.runs...) }

// measureSets warms each phase up, then runs every phase of every set
// over the rounds (d ÷ rounds each), the sets in an order that rotates
// from round to round, so that a drift of the machine hits them alike;
// after each phase it waits until the tasks it created have completed.
// The figures of each round are appended to each phase's runs.
func measureSets(ctx context.Context, cfg config, sets []*phaseSet) error {
	for _, set := range sets {
		for _, p := range set.phases {
			s := loadgen.Run(ctx, loadgen.Load{Concurrency: p.conc, Count: int64(20 * p.conc)}, p.op)
			if s.Errors > 0 {
				return fmt.Errorf("%s (warm-up): %d errors, first: %s", p.name, s.Errors, s.FirstError)
			}
			if err := set.bed.idle(ctx); err != nil {
				return err
			}
		}
	}
	per := cfg.dur / time.Duration(cfg.rounds)
	for r := range cfg.rounds {
		for i := range sets {
			set := sets[(r+i)%len(sets)]
			for _, p := range set.phases {
				s := loadgen.Run(ctx, loadgen.Load{Concurrency: p.conc, Duration: per}, p.op)
				if s.Errors > 0 {
					return fmt.Errorf("%s: %d errors, first: %s", p.name, s.Errors, s.FirstError)
				}
				p.runs = append(p.runs, s)
				if err := set.bed.idle(ctx); err != nil {
					return err
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// getOp returns the op of tasks/get of a task picked by pick; the task
// must be completed.
func (b *bed) getOp(pick func() task.ID) loadgen.Op {
	return func(ctx context.Context, w int) error {
		st, err := b.client(w).Get(ctx, string(pick()))
		if err == nil && st != "completed" {
			err = fmt.Errorf("tasks/get: status %s", st)
		}
		return err
	}
}

// createOp is the op of task creation.
func (b *bed) createOp(ctx context.Context, w int) error {
	_, err := b.client(w).Create(ctx)
	return err
}

// runRetained measures the retained part on backend: one store per
// size, each filled to its size, then measured in turn over the rounds.
func runRetained(ctx context.Context, cfg config, backend string, progress func(string, ...any)) (_ []RetainedPoint, err error) {
	var (
		beds  []*bed
		sets  []*phaseSet
		fills []time.Duration
		sizes []int64
	)
	defer func() {
		for _, b := range beds {
			err = errors.Join(err, b.close())
		}
	}()
	for _, size := range cfg.sizes {
		b, err := newBed(ctx, cfg, backend, 1)
		if err != nil {
			return nil, err
		}
		beds = append(beds, b)
		progress("%s: filling %d tasks", backend, size)
		took, err := b.fill(ctx, size)
		if err != nil {
			return nil, err
		}
		progress("%s: filled %d tasks in %v (%.0f/s)", backend, size, took.Round(time.Millisecond), float64(size)/took.Seconds())
		fills = append(fills, took)
		size, err := b.size(ctx)
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, size)
		ids := b.ids
		recent := ids[max(0, len(ids)-cfg.recent):]
		var (
			mu   sync.Mutex
			next int
		)
		sets = append(sets, &phaseSet{bed: b, phases: []*phase{
			{name: "tasks/get random", conc: cfg.conc, op: b.getOp(func() task.ID { return ids[rand.IntN(len(ids))] })},
			{name: "tasks/get recent", conc: cfg.conc, op: b.getOp(func() task.ID {
				mu.Lock()
				defer mu.Unlock()
				next = (next + 1) % len(recent)
				return recent[next]
			})},
			{name: "create", conc: cfg.conc, op: b.createOp},
		}})
	}
	progress("%s: measuring", backend)
	if err := measureSets(ctx, cfg, sets); err != nil {
		return nil, err
	}
	out := make([]RetainedPoint, len(sets))
	for i, set := range sets {
		p := RetainedPoint{Backend: backend, Retained: cfg.sizes[i], FillTime: fills[i], StoreBytes: sizes[i],
			GetRandom: set.phases[0].combined(), GetRecent: set.phases[1].combined(), Create: set.phases[2].combined()}
		progress("%s at %d: get random %.0f/s, recent %.0f/s, create %.0f/s", backend, p.Retained,
			p.GetRandom.Throughput, p.GetRecent.Throughput, p.Create.Throughput)
		out[i] = p
	}
	return out, nil
}

// runCreate measures creation with each number of workers on a fresh
// store of backend, the numbers interleaved over the rounds.
func runCreate(ctx context.Context, cfg config, backend string, progress func(string, ...any)) (_ []CreatePoint, err error) {
	b, err := newBed(ctx, cfg, backend, 1)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.close()) }()
	var phases []*phase
	for _, c := range cfg.createConc {
		phases = append(phases, &phase{name: fmt.Sprintf("create, %d workers", c), conc: c, op: b.createOp})
	}
	st, err := b.measure(ctx, phases)
	if err != nil {
		return nil, err
	}
	out := make([]CreatePoint, len(st))
	for i, s := range st {
		out[i] = CreatePoint{Backend: backend, Workers: cfg.createConc[i], Create: s}
		progress("%s: create with %d workers: %.0f/s", backend, cfg.createConc[i], s.Throughput)
	}
	return out, nil
}

// runInstances measures creation and tasks/get on each number of
// PostgreSQL instances, each number on a fresh schema of its own: all are
// started and filled first, then measured in turn over the rounds.
func runInstances(ctx context.Context, cfg config, progress func(string, ...any)) (_ []InstancesPoint, err error) {
	var (
		beds []*bed
		sets []*phaseSet
	)
	defer func() {
		for _, b := range beds {
			err = errors.Join(err, b.close())
		}
	}()
	for _, n := range cfg.instances {
		b, err := newBed(ctx, cfg, backendPostgres, n)
		if err != nil {
			return nil, fmt.Errorf("%d instances: %w", n, err)
		}
		beds = append(beds, b)
		if _, err := b.fill(ctx, cfg.pool); err != nil {
			return nil, fmt.Errorf("%d instances: %w", n, err)
		}
		ids := b.ids
		sets = append(sets, &phaseSet{bed: b, phases: []*phase{
			{name: fmt.Sprintf("create, %d instances", n), conc: cfg.conc, op: b.createOp},
			{name: fmt.Sprintf("tasks/get, %d instances", n), conc: cfg.conc, op: b.getOp(func() task.ID { return ids[rand.IntN(len(ids))] })},
		}})
	}
	progress("instances: measuring")
	if err := measureSets(ctx, cfg, sets); err != nil {
		return nil, err
	}
	out := make([]InstancesPoint, len(sets))
	for i, set := range sets {
		out[i] = InstancesPoint{Instances: cfg.instances[i], Create: set.phases[0].combined(), Get: set.phases[1].combined()}
		progress("%d instances: create %.0f/s, tasks/get %.0f/s", out[i].Instances, out[i].Create.Throughput, out[i].Get.Throughput)
	}
	return out, nil
}

// randomHex returns 12 random hex digits.
func randomHex() string {
	b := make([]byte, 6)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// printReport prints the figures as tables, with ratios to each part's
// first point.
func printReport(w io.Writer, rep *Report) {
	e := rep.Environment
	fmt.Fprintf(w, "mcptask-curves %s, %s, %d CPUs (%s), GOMAXPROCS %d; %v per operation over %d rounds\n",
		e.Date.Format("2006-01-02 15:04 MST"), e.GoVersion, e.NumCPU, e.CPU, e.GOMAXPROCS, e.Duration, e.Rounds)
	d := loadgen.FormatDuration
	ratio := func(x, base float64) string {
		if base == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", x/base)
	}
	if len(rep.Retained) > 0 {
		fmt.Fprintf(w, "\nretained tasks, %d workers (ratios ÷ the first size of the backend):\n\n", e.Workers)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "backend\tretained\tstore MiB\tfill\tfill/s\tget rnd ops/s\tp50\tp99\tget recent ops/s\tp50\tp99\tcreate ops/s\tp50\tp99\t")
		var first RetainedPoint
		for i, p := range rep.Retained {
			if i == 0 || p.Backend != rep.Retained[i-1].Backend {
				first = p
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%.0f\t%.0f\t%s\t%s\t%.0f\t%s\t%s\t%.0f\t%s\t%s\t\n", p.Backend, p.Retained, float64(p.StoreBytes)/(1<<20),
				p.FillTime.Round(10*time.Millisecond), float64(p.Retained)/p.FillTime.Seconds(),
				p.GetRandom.Throughput, d(p.GetRandom.P50), d(p.GetRandom.P99),
				p.GetRecent.Throughput, d(p.GetRecent.P50), d(p.GetRecent.P99),
				p.Create.Throughput, d(p.Create.P50), d(p.Create.P99))
			if p.Retained != first.Retained {
				fmt.Fprintf(tw, "÷ %d\t\t\t\t\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", first.Retained,
					ratio(p.GetRandom.Throughput, first.GetRandom.Throughput), ratio(float64(p.GetRandom.P50), float64(first.GetRandom.P50)), ratio(float64(p.GetRandom.P99), float64(first.GetRandom.P99)),
					ratio(p.GetRecent.Throughput, first.GetRecent.Throughput), ratio(float64(p.GetRecent.P50), float64(first.GetRecent.P50)), ratio(float64(p.GetRecent.P99), float64(first.GetRecent.P99)),
					ratio(p.Create.Throughput, first.Create.Throughput), ratio(float64(p.Create.P50), float64(first.Create.P50)), ratio(float64(p.Create.P99), float64(first.Create.P99)))
			}
		}
		tw.Flush()
	}
	if len(rep.Create) > 0 {
		fmt.Fprintf(w, "\ncreation by number of workers (ops/s ratio ÷ the first number of the backend):\n\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "backend\tworkers\tops/s\t÷ first\tp50\tp99\t")
		var first CreatePoint
		for i, p := range rep.Create {
			if i == 0 || p.Backend != rep.Create[i-1].Backend {
				first = p
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t\n", p.Backend, p.Workers, p.Create.Throughput,
				ratio(p.Create.Throughput, first.Create.Throughput), d(p.Create.P50), d(p.Create.P99))
		}
		tw.Flush()
	}
	if len(rep.Instances) > 0 {
		fmt.Fprintf(w, "\nPostgreSQL instances on one schema, %d workers spread over them (ops/s ratio ÷ the first):\n\n", e.Workers)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "instances\tcreate ops/s\t÷ first\tp50\tp99\tget ops/s\t÷ first\tp50\tp99\t")
		first := rep.Instances[0]
		for _, p := range rep.Instances {
			fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t\n", p.Instances,
				p.Create.Throughput, ratio(p.Create.Throughput, first.Create.Throughput), d(p.Create.P50), d(p.Create.P99),
				p.Get.Throughput, ratio(p.Get.Throughput, first.Get.Throughput), d(p.Get.P50), d(p.Get.P99))
		}
		tw.Flush()
	}
}
