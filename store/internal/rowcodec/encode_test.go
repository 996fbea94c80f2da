package rowcodec

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/task"
)

func TestEncodeDialects(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123).UTC()
	tk := &task.Task{ID: task.NewID(), Owner: "alice", Tool: "build", Status: task.Working,
		CreatedAt: now, LastUpdatedAt: now, TTL: time.Hour}
	for _, d := range []Dialect{{Backend: "sqlite store"}, {Backend: "postgres store", NullNone: true}} {
		e, err := d.Encode(tk)
		if err != nil {
			t.Fatal(err)
		}
		args := e.InsertArgs()
		if len(args) != 30 {
			t.Fatalf("%s: %d insert args, want 30", d.Backend, len(args))
		}
		lease, key := args[19], args[20]
		if d.NullNone && (lease != nil || key != nil) {
			t.Errorf("%s: no lease and no key bind as %v, %v; want NULL", d.Backend, lease, key)
		}
		if !d.NullNone && (lease != int64(0) || key != "") {
			t.Errorf("%s: no lease and no key bind as %v, %v; want 0 and \"\"", d.Backend, lease, key)
		}
		if args[10] != nil {
			t.Errorf("%s: a working task binds expires_at_ns %v, want NULL", d.Backend, args[10])
		}
		up := e.UpdateArgs()
		if up[len(up)-1] != string(tk.ID) || len(up) != 30 {
			t.Errorf("%s: update args end in %v (len %d), want the ID last", d.Backend, up[len(up)-1], len(up))
		}
		q := e.InQueue(3)
		if !q.Queued || q.Runner != "" || q.LeaseMS != 0 || !strings.Contains(q.StatusMessage, "3") || e.Queued {
			t.Errorf("%s: InQueue gave %+v (and changed the original: %v)", d.Backend, q, e.Queued)
		}
	}

	done := *tk
	done.Status, done.LeaseExpiresAt, done.IdempotencyKey = task.Completed, now.Add(time.Minute), "k1"
	e, err := Dialect{Backend: "postgres store", NullNone: true}.Encode(&done)
	if err != nil {
		t.Fatal(err)
	}
	args := e.InsertArgs()
	if args[10] != now.Add(time.Hour).UnixNano() || args[19] != now.Add(time.Minute).UnixMilli() || args[20] != "k1" {
		t.Errorf("a finished, leased, keyed task binds expires %v, lease %v, key %v", args[10], args[19], args[20])
	}
}

func TestEncodeRefuses(t *testing.T) {
	bad := errors.New("is bad")
	d := Dialect{Backend: "postgres store", CheckText: func(s string) error {
		if strings.Contains(s, "\x00") {
			return bad
		}
		return nil
	}}
	ok := &task.Task{ID: task.NewID(), Status: task.Working}
	for name, mut := range map[string]func(*task.Task){
		"id":      func(t *task.Task) { t.ID = "no pe" },
		"status":  func(t *task.Task) { t.Status = "sleeping" },
		"tool":    func(t *task.Task) { t.Tool = "a\x00b" },
		"request": func(t *task.Task) { t.Request = []byte(`"a\u0000"` + "\x00") },
	} {
		tk := *ok
		mut(&tk)
		if _, err := d.Encode(&tk); err == nil || !strings.HasPrefix(err.Error(), "postgres store: ") {
			t.Errorf("%s: Encode gave %v, want an error naming the backend", name, err)
		}
	}
}

func TestTimes(t *testing.T) {
	if got := UnixNano(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)); got != math.MaxInt64 {
		t.Errorf("UnixNano(3000) = %d, want saturation", got)
	}
	if got := UnixNano(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)); got != math.MinInt64 {
		t.Errorf("UnixNano(1000) = %d, want saturation", got)
	}
	at := time.UnixMilli(5000)
	if CeilMS(at) != 5000 || CeilMS(at.Add(time.Nanosecond)) != 5001 || CeilMS(at.Add(-time.Nanosecond)) != 5000 {
		t.Errorf("CeilMS: %d %d %d", CeilMS(at), CeilMS(at.Add(time.Nanosecond)), CeilMS(at.Add(-time.Nanosecond)))
	}
}

func TestNumbered(t *testing.T) {
	got := Numbered([]string{"a = ?", "(x, y) < (?, ?)", "status = ANY(?::text[])", "false"}, 1)
	want := []string{"a = $1", "(x, y) < ($2, $3)", "status = ANY($4::text[])", "false"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Numbered[%d] = %q, want %q", i, got[i], want[i])
		}
	}
}
