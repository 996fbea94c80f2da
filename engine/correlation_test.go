package engine_test

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
)

// TestStartCorrelation: the host correlation keys given to Start are
// stored with the task, whether its work finishes within the create or
// not, and copied to the operations its work records; a map over the
// bounds is refused and creates nothing.
func TestStartCorrelation(t *testing.T) {
	for _, finishWithin := range []string{"quick", "slow"} {
		t.Run(finishWithin, func(t *testing.T) {
			opts := engine.Options{}
			if finishWithin == "slow" {
				opts.FinishWithin = -1
			}
			e, st := newEngine(t, opts)
			ctx := context.Background()
			corr := map[string]string{"claudecode/toolUseId": "toolu_01A09q90qw90lq917835lq9"}
			spec := engine.StartSpec{Tool: "deploy", Wire: "2026-07-28", Correlation: corr}
			tk, err := e.Start(ctx, spec, func(ctx context.Context) (json.RawMessage, error) {
				op, err := engine.FromContext(ctx).RecordOperation(ctx, engine.OperationSpec{Object: "service/api", Effect: "deploy api"})
				if err != nil {
					return nil, err
				}
				if err := op.Confirmed(ctx, "applied"); err != nil {
					return nil, err
				}
				return json.RawMessage(`{"content":[]}`), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			corr["claudecode/toolUseId"] = "changed by the caller afterwards"
			done := waitTerminal(t, e, tk.ID)
			want := map[string]string{"claudecode/toolUseId": "toolu_01A09q90qw90lq917835lq9"}
			if done.Status != task.Completed || !maps.Equal(done.Correlation, want) {
				t.Errorf("task: %s, correlation %v; want completed with %v", done.Status, done.Correlation, want)
			}
			stored, err := st.Get(ctx, tk.ID)
			if err != nil || !maps.Equal(stored.Correlation, want) {
				t.Errorf("stored task: %v, %v; want correlation %v", stored, err, want)
			}
			op, err := e.LatestOperation(ctx, tk.ID)
			if err != nil || op == nil {
				t.Fatalf("operation: %v, %v; want one", op, err)
			}
			if !maps.Equal(op.Correlation, want) {
				t.Errorf("operation correlation %v, want %v", op.Correlation, want)
			}

			bad := spec
			bad.Correlation = map[string]string{"k": strings.Repeat("v", task.MaxCorrelationValue+1)}
			if got, err := e.Start(ctx, bad, func(context.Context) (json.RawMessage, error) { return nil, nil }); err == nil {
				t.Errorf("Start with an over-long correlation value: %v, nil error", got)
			}
		})
	}
}
