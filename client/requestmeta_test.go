package client_test

import (
	"context"
	"testing"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/upstreamtest"
)

// tpKey is the context key of the traceparent the test's RequestMeta
// writes.
type tpKey struct{}

// TestRequestMeta: Options.RequestMeta adds to the _meta of the
// tools/call and of the tasks/* requests that follow its task, with the
// context of the call that sends each (a Wait's for tasks/get and
// tasks/result).
func TestRequestMeta(t *testing.T) {
	for _, tc := range []struct{ wire, follow string }{
		{client.Wire20260728, "tasks/get"},
		{client.Wire20251125, "tasks/result"},
	} {
		t.Run(tc.wire, func(t *testing.T) {
			up := upstreamtest.New(t)
			up.Release()
			c, err := client.Dial(t.Context(), up.URL, &client.Options{ProtocolVersion: tc.wire, DisablePush: true,
				RequestMeta: func(ctx context.Context, meta map[string]any) {
					if tp, ok := ctx.Value(tpKey{}).(string); ok {
						meta["traceparent"] = tp
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const callTP = "00-11111111111111111111111111111111-1111111111111111-01"
			const waitTP = "00-22222222222222222222222222222222-2222222222222222-01"
			call, err := c.CallTool(context.WithValue(t.Context(), tpKey{}, callTP), "work", map[string]any{"label": "x"})
			if err != nil {
				t.Fatal(err)
			}
			if call.Task == nil {
				t.Fatalf("work ran at once: %+v", call)
			}
			if _, err := c.Wait(context.WithValue(t.Context(), tpKey{}, waitTP), call.Task.ID, nil); err != nil {
				t.Fatal(err)
			}
			if got := up.Traceparents("tools/call"); len(got) != 1 || got[0] != callTP {
				t.Errorf("tools/call traceparents %q, want [%s]", got, callTP)
			}
			follows := up.Traceparents(tc.follow)
			if len(follows) == 0 {
				t.Fatalf("the server got no %s", tc.follow)
			}
			for _, tp := range follows {
				if tp != waitTP {
					t.Errorf("%s traceparent %q, want the Wait's %s", tc.follow, tp, waitTP)
				}
			}
		})
	}
}
