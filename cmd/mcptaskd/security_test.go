package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/task"
)

// TestSecurity is the isolation suite of issue 6 (docs/security.md, "One
// client reads, answers, cancels or lists another's task" and the rows
// after it). mcptaskd runs in-process with a tokens file of three
// principals: alice@acme is the victim; mallory@globex (another tenant)
// and bob@acme (alice's own tenant: tasks are bound to the principal, not
// only to the tenant) attack her tasks on both wires. Every response an
// attacker receives is kept, and at the end none may hold anything of
// alice's, nor may the server's log, which must show the attempts as
// denied in the audit trail.
//
// TestAuthentication covers the bearer checks, the 2026-07-28 get, update
// and cancel of a running task from another tenant, and a token expiring
// mid-task; this suite does not repeat them.
func TestSecurity(t *testing.T) {
	srv, ps := startSecServer(t, "alice@acme", "mallory@globex", "bob@acme")
	alice, mallory, bob := ps[0], ps[1], ps[2]
	attackers := []*secPrincipal{mallory, bob}

	// What of alice's must never reach an attacker: her results, the
	// service name she deploys (it shows in her status messages, input
	// requests and result), and her task IDs anywhere but in the echo of
	// an ID the attacker itself sent.
	const (
		secretService = "acme-payroll-q7x3"
		secretN       = 104729 // the 10000th prime
		secretDone    = "There are 10000 primes up to 104729 (computed in 1 steps)."
		secretDeploy  = "Deployed acme-payroll-q7x3@latest to production."
	)
	var victimIDs []string
	victim := func(ids ...string) { victimIDs = append(victimIDs, ids...) }
	notVictim := func(t *testing.T, what, id string) {
		t.Helper()
		if slices.Contains(victimIDs, id) {
			t.Errorf("%s: got alice's task %s", what, id)
		}
	}

	// Alice's tool calls: one that runs (a minute per step), one that
	// completes at once, one that asks for input.
	running := map[string]any{"n": 1000, "steps": 5, "step_delay_ms": 60000}
	quick := map[string]any{"n": secretN, "steps": 1, "step_delay_ms": 0}
	deploy := map[string]any{"service": secretService, "build_steps": 1, "step_delay_ms": 0}
	isInput := func(tk *wiretest.Task) bool { return tk.Status == "input_required" || terminal(tk) }
	// victims26 starts alice's three tasks over the 2026-07-28 wire: a
	// deploy waiting for input (the key and JSON of its input requests are
	// returned too), a running task, and one completed (returned as done).
	victims26 := func(t *testing.T) (vDeploy, vRun, vDone, key string, inputBefore []byte, done *wiretest.Task) {
		t.Helper()
		vDeploy = alice.start26(t, "deploy_with_confirmation", deploy, nil)
		vRun = alice.start26(t, "long_computation", running, nil)
		vDone = alice.start26(t, "long_computation", quick, nil)
		victim(vDeploy, vRun, vDone)
		dtk := alice.wait26(t, vDeploy, "input_required", isInput)
		key = elicitKey(t, dtk, secretService)
		inputBefore, _ = json.Marshal(dtk.InputRequests)
		done = alice.wait26(t, vDone, "terminal", terminal)
		return
	}

	t.Run("2025-11-25 wire: another principal's task answers exactly like an unknown one", func(t *testing.T) {
		vs := alice.open25(t)
		vRun := vs.start(t, "long_computation", running, nil)
		vDone := vs.start(t, "long_computation", quick, nil)
		vInput := vs.start(t, "deploy_with_confirmation", deploy, nil)
		victim(vRun, vDone, vInput)
		vs.wait(t, vDone, "completed", func(tk task25) bool { return tk.Status == "completed" })
		vs.wait(t, vInput, "input_required", func(tk task25) bool { return tk.Status == "input_required" })
		if tk := vs.get(t, vRun); tk.Status != "working" {
			t.Fatalf("alice's computation: %+v, want working", tk)
		}
		before := vs.call(t, "tasks/result", map[string]any{"taskId": vDone})
		if before.Error != nil || textOf(t, before.Result) != secretDone {
			t.Fatalf("alice's tasks/result: %s", before.Body)
		}
		victims := []struct{ state, id string }{{"working", vRun}, {"completed", vDone}, {"input_required", vInput}}

		for _, a := range attackers {
			t.Run(a.String(), func(t *testing.T) {
				as := a.open25(t)
				own := as.start(t, "long_computation", map[string]any{"n": 100, "steps": 1, "step_delay_ms": 0}, nil)
				as.wait(t, own, "completed", func(tk task25) bool { return tk.Status == "completed" })
				for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
					unknown := string(task.NewID())
					want := shapeOf(as.call(t, method, map[string]any{"taskId": unknown}), unknown)
					if want.Code != -32602 {
						t.Fatalf("%s of an unknown task: %+v, want code -32602", method, want)
					}
					for _, v := range victims {
						r := as.call(t, method, map[string]any{"taskId": v.id})
						if got := shapeOf(r, v.id); got != want {
							t.Errorf("%s of alice's %s task: %+v\nwant exactly the unknown task's %+v", method, v.state, got, want)
						}
						if len(r.Requests) > 0 {
							t.Errorf("%s of alice's %s task: the server sent %v to %s", method, v.state, r.Requests, a)
						}
					}
				}
				ids := as.list(t)
				if !slices.Contains(ids, own) {
					t.Errorf("%s's tasks/list %v lacks its own task %s", a, ids, own)
				}
				for _, v := range victims {
					if slices.Contains(ids, v.id) {
						t.Errorf("%s's tasks/list shows alice's %s task %s", a, v.state, v.id)
					}
				}
			})
		}

		// Nothing changed for alice.
		if tk := vs.get(t, vRun); tk.Status != "working" {
			t.Errorf("alice's computation after the attacks: %+v, want working", tk)
		}
		if tk := vs.get(t, vInput); tk.Status != "input_required" {
			t.Errorf("alice's deploy after the attacks: %+v, want input_required", tk)
		}
		if tk := vs.get(t, vDone); tk.Status != "completed" {
			t.Errorf("alice's completed task after the attacks: %+v", tk)
		}
		if after := vs.call(t, "tasks/result", map[string]any{"taskId": vDone}); after.Error != nil || !bytes.Equal(after.Result, before.Result) {
			t.Errorf("alice's tasks/result after the attacks: %s\nwant %s", after.Body, before.Result)
		}
		ids := vs.list(t)
		for _, id := range []string{vRun, vDone, vInput} {
			if !slices.Contains(ids, id) {
				t.Errorf("alice's tasks/list %v lacks her task %s", ids, id)
			}
		}
		for _, id := range []string{vRun, vInput} {
			r := vs.call(t, "tasks/cancel", map[string]any{"taskId": id})
			var tk task25
			if r.Error != nil || json.Unmarshal(r.Result, &tk) != nil || tk.Status != "cancelled" {
				t.Errorf("alice's own tasks/cancel of %s: %s", id, r.Body)
			}
		}
	})

	t.Run("2025-11-25 wire: another principal cannot use the victim's session", func(t *testing.T) {
		vs := alice.open25(t)
		vRun := vs.start(t, "long_computation", running, nil)
		victim(vRun)
		for _, a := range attackers {
			hijack := &session25{p: a, id: vs.id}
			for _, c := range []struct {
				method string
				params map[string]any
			}{{"tasks/get", map[string]any{"taskId": vRun}}, {"tasks/list", nil}, {"tasks/cancel", map[string]any{"taskId": vRun}}} {
				if r := hijack.call(t, c.method, c.params); r.HTTPStatus != http.StatusForbidden || r.Result != nil {
					t.Errorf("%s's %s in alice's session: HTTP %d %s, want 403", a, c.method, r.HTTPStatus, r.Body)
				}
			}
			// Neither the session's stream (where 2025-11-25 servers send
			// requests and notifications) nor its end.
			for _, m := range []string{http.MethodGet, http.MethodDelete} {
				if r := a.post(t, m, hijack.headers(), nil); r.HTTPStatus != http.StatusForbidden {
					t.Errorf("%s's %s of alice's session: HTTP %d %s, want 403", a, m, r.HTTPStatus, r.Body)
				}
			}
		}
		if tk := vs.get(t, vRun); tk.Status != "working" {
			t.Errorf("alice's task after the attempts: %+v, want working", tk)
		}
		if ids := vs.list(t); !slices.Contains(ids, vRun) {
			t.Errorf("alice's tasks/list %v lacks %s", ids, vRun)
		}
		vs.call(t, "tasks/cancel", map[string]any{"taskId": vRun})
	})

	t.Run("2026-07-28 wire: another principal's task answers exactly like an unknown one", func(t *testing.T) {
		vDeploy, vRun, vDone, key, inputBefore, done := victims26(t)
		if r := resultOf(t, done); r.text() != secretDone {
			t.Fatalf("alice's result %q", r.text())
		}
		victims := []struct{ state, id string }{{"input_required", vDeploy}, {"working", vRun}, {"completed", vDone}}
		answer := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
		params := func(method, id string) map[string]any {
			p := map[string]any{"taskId": id}
			if method == "tasks/update" {
				p["inputResponses"] = answer // alice's outstanding key
			}
			return p
		}

		for _, a := range attackers {
			t.Run(a.String(), func(t *testing.T) {
				for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
					unknown := string(task.NewID())
					want := shapeOf(a.call26(t, method, params(method, unknown)), unknown)
					if want.Code != -32602 {
						t.Fatalf("%s of an unknown task: %+v, want code -32602", method, want)
					}
					for _, v := range victims {
						if got := shapeOf(a.call26(t, method, params(method, v.id)), v.id); got != want {
							t.Errorf("%s of alice's %s task: %+v\nwant exactly the unknown task's %+v", method, v.state, got, want)
						}
					}
				}
				// tasks/result and tasks/list are not part of this wire:
				// "method not found" whatever the task, without a trace of
				// alice's.
				for _, method := range []string{"tasks/result", "tasks/list"} {
					unknown := string(task.NewID())
					want := shapeOf(a.call26(t, method, map[string]any{"taskId": unknown}), unknown)
					if want.Code != -32601 {
						t.Fatalf("%s on the 2026-07-28 wire: %+v, want code -32601", method, want)
					}
					for _, v := range victims {
						if got := shapeOf(a.call26(t, method, map[string]any{"taskId": v.id}), v.id); got != want {
							t.Errorf("%s of alice's %s task: %+v\nwant %+v", method, v.state, got, want)
						}
					}
				}
				r := a.call26(t, "tasks/list", nil)
				if r.Error == nil || r.Error.Code != -32601 {
					t.Errorf("tasks/list on the 2026-07-28 wire: %s, want -32601", r.Body)
				}
				for _, v := range victims {
					if strings.Contains(r.Body, v.id) {
						t.Errorf("tasks/list of %s names alice's task %s: %s", a, v.id, r.Body)
					}
				}
			})
		}

		// The attackers' answers were not delivered: alice's deploy still
		// waits for the same request under the same key, the computation
		// runs, the result is intact.
		tk := alice.get26(t, vDeploy)
		if inputAfter, _ := json.Marshal(tk.InputRequests); tk.Status != "input_required" || !bytes.Equal(inputAfter, inputBefore) {
			t.Errorf("alice's deploy after the attacks: %s %s\nwant input_required with %s", tk.Status, inputAfter, inputBefore)
		}
		if tk := alice.get26(t, vRun); tk.Status != "working" {
			t.Errorf("alice's computation after the attacks: %+v, want working", tk)
		}
		if tk := alice.get26(t, vDone); tk.Status != "completed" || !bytes.Equal(tk.Result, done.Result) {
			t.Errorf("alice's completed task after the attacks: %s %s, want completed %s", tk.Status, tk.Result, done.Result)
		}
		// Alice's own answer to that key is the one that counts.
		if r := alice.call26(t, "tasks/update", params("tasks/update", vDeploy)); r.Error != nil {
			t.Fatalf("alice's tasks/update: %s", r.Body)
		}
		if r := resultOf(t, alice.wait26(t, vDeploy, "terminal", terminal)); r.text() != secretDeploy {
			t.Errorf("alice's deploy result %q, want %q", r.text(), secretDeploy)
		}
		if r := alice.call26(t, "tasks/cancel", map[string]any{"taskId": vRun}); r.Error != nil {
			t.Errorf("alice's tasks/cancel: %s", r.Body)
		}
		if tk := alice.get26(t, vRun); tk.Status != "cancelled" {
			t.Errorf("alice's computation after her cancel: %s", tk.Status)
		}
	})

	t.Run("2026-07-28 wire: subscriptions/listen agrees none of another principal's tasks", func(t *testing.T) {
		vDeploy, vRun, vDone, _, _, _ := victims26(t)
		vids := []string{vDeploy, vRun, vDone}
		listen := func(t *testing.T, p *secPrincipal, ids []string) []wiretest.Message {
			t.Helper()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			c := &wiretest.Client{URL: p.srv.url, Tasks: true, Header: http.Header{"Authorization": {"Bearer " + p.token}}}
			s, err := c.Listen(ctx, map[string]any{"taskIds": ids})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got []wiretest.Message
			for m := range s.Messages {
				got = append(got, m)
				if m.Result != nil || m.Error != nil || len(got) == 1+len(ids) {
					break
				}
			}
			return got
		}
		for _, a := range attackers {
			t.Run(a.String(), func(t *testing.T) {
				msgs := listen(t, a, append(slices.Clone(vids), string(task.NewID())))
				if len(msgs) != 2 || msgs[0].Method != "notifications/subscriptions/acknowledged" || msgs[1].Result == nil {
					t.Fatalf("%s's listen for alice's tasks: %+v, want an acknowledgement agreeing none, then the end", a, msgs)
				}
				var ack struct {
					Notifications struct {
						TaskIDs []string `json:"taskIds"`
					} `json:"notifications"`
				}
				if err := json.Unmarshal(msgs[0].Params, &ack); err != nil || len(ack.Notifications.TaskIDs) != 0 {
					t.Errorf("%s's listen agreed %v of alice's tasks (%v)", a, ack.Notifications.TaskIDs, err)
				}
				for _, m := range msgs {
					b, _ := json.Marshal(m)
					for _, secret := range []string{secretService, secretDone, secretDeploy, vDeploy, vRun, vDone} {
						if strings.Contains(string(b), secret) {
							t.Errorf("%s's listen stream carried %q: %s", a, secret, b)
						}
					}
				}
			})
		}
		// Alice's own listen agrees all three, and carries her result.
		msgs := listen(t, alice, vids)
		if len(msgs) < 1+len(vids) || !strings.Contains(string(msgs[0].Params), vRun) {
			t.Fatalf("alice's listen: %+v", msgs)
		}
		found := false
		for _, m := range msgs[1:] {
			found = found || strings.Contains(string(m.Params), secretDone)
		}
		if !found {
			t.Errorf("alice's listen stream lacks her completed task's result")
		}
		alice.call26(t, "tasks/cancel", map[string]any{"taskId": vRun})
		alice.call26(t, "tasks/cancel", map[string]any{"taskId": vDeploy})
	})

	t.Run("task logs: another principal's log answers exactly like an unknown one, on both wires", func(t *testing.T) {
		vDeploy := alice.start26(t, "deploy_with_confirmation", deploy, nil)
		vDone := alice.start26(t, "long_computation", quick, nil)
		victim(vDeploy, vDone)
		alice.wait26(t, vDeploy, "input_required", isInput)
		alice.wait26(t, vDone, "terminal", terminal)
		logURIs := func(id string) []string {
			base := "mcptask://tasks/" + id + "/log"
			return []string{base, base + "?cursor=0", base + "?format=json&limit=1000"}
		}
		// Alice reads her own log (her service's name is in it).
		if r := alice.call26(t, "resources/read", map[string]any{"uri": logURIs(vDeploy)[0]}); r.Error != nil || !strings.Contains(r.Body, secretService) {
			t.Fatalf("alice's own log: %s", r.Body)
		}
		for _, a := range attackers {
			t.Run(a.String(), func(t *testing.T) {
				as := a.open25(t)
				for i := range logURIs("") {
					unknown := string(task.NewID())
					u := logURIs(unknown)[i]
					want26 := shapeOf(a.call26(t, "resources/read", map[string]any{"uri": u}), unknown)
					want25 := shapeOf(as.call(t, "resources/read", map[string]any{"uri": u}), unknown)
					if want26.Code != -32602 || want25.Code != -32602 {
						t.Fatalf("resources/read of an unknown task's log: %+v, %+v; want code -32602", want26, want25)
					}
					for _, v := range []string{vDeploy, vDone} {
						vu := logURIs(v)[i]
						if got := shapeOf(a.call26(t, "resources/read", map[string]any{"uri": vu}), v); got != want26 {
							t.Errorf("2026-07-28 resources/read of %s: %+v\nwant exactly the unknown task's %+v", vu, got, want26)
						}
						if got := shapeOf(as.call(t, "resources/read", map[string]any{"uri": vu}), v); got != want25 {
							t.Errorf("2025-11-25 resources/read of %s: %+v\nwant exactly the unknown task's %+v", vu, got, want25)
						}
					}
				}
				// No subscription to it either: answered as for an
				// unknown task's log.
				unknown := string(task.NewID())
				want := shapeOf(as.call(t, "resources/subscribe", map[string]any{"uri": logURIs(unknown)[0]}), unknown)
				if want.Code == 0 {
					t.Fatalf("resources/subscribe of an unknown task's log succeeded: %+v", want)
				}
				if got := shapeOf(as.call(t, "resources/subscribe", map[string]any{"uri": logURIs(vDeploy)[0]}), vDeploy); got != want {
					t.Errorf("resources/subscribe of alice's log: %+v\nwant %+v", got, want)
				}
				// Nor does tasks/get of its own task link to anything of
				// alice's.
				if r := a.call26(t, "tasks/get", map[string]any{"taskId": vDeploy}); strings.Contains(r.Body, "/log") {
					t.Errorf("tasks/get of alice's task links a log: %s", r.Body)
				}
			})
		}
		if r := alice.call26(t, "tasks/cancel", map[string]any{"taskId": vDeploy}); r.Error != nil {
			t.Errorf("alice's tasks/cancel: %s", r.Body)
		}
	})

	t.Run("guessed, truncated and malformed task IDs", func(t *testing.T) {
		vRun := alice.start26(t, "long_computation", running, nil)
		vDone := alice.start26(t, "long_computation", quick, nil)
		victim(vRun, vDone)
		done := alice.wait26(t, vDone, "terminal", terminal)
		sessions := map[*secPrincipal]*session25{alice: alice.open25(t), mallory: mallory.open25(t)}

		type variant struct {
			name string
			id   any // a string, a json.RawMessage, or absent (no taskId)
		}
		absent := struct{}{}
		variants := func(v string) []variant {
			last := byte('a')
			if v[len(v)-1] == 'a' {
				last = 'b'
			}
			firstUpper := v
			if i := strings.IndexFunc(v, func(r rune) bool { return r >= 'a' && r <= 'z' }); i >= 0 {
				firstUpper = v[:i] + strings.ToUpper(v[i:i+1]) + v[i+1:]
			}
			tenKB := strings.Repeat(v, 10240/len(v)+1)[:10240]
			return []variant{
				{"last character changed", v[:len(v)-1] + string(last)},
				{"truncated by one", v[:len(v)-1]},
				{"truncated by half", v[:len(v)/2]},
				{"one character more", v + "a"},
				{"upper-case", strings.ToUpper(v)},
				{"one letter upper-case", firstUpper},
				{"leading space", " " + v},
				{"trailing space", v + " "},
				{"tab-padded", "\t" + v + "\t"},
				{"trailing newline", v + "\n"},
				{"trailing NUL", v + "\x00"},
				{"empty", ""},
				{"10 KB", tenKB},
				{"the ID and 10 KB more", v + tenKB},
				{"number", json.RawMessage(`123`)},
				{"float", json.RawMessage(`1.5e300`)},
				{"boolean", json.RawMessage(`true`)},
				{"null", json.RawMessage(`null`)},
				{"object holding the ID", map[string]any{"taskId": v}},
				{"array holding the ID", []any{v}},
				{"absent", absent},
			}
		}
		call := func(p *secPrincipal, wire, method string, id any) *rpcResp {
			params := map[string]any{}
			if id != any(absent) {
				params["taskId"] = id
			}
			if method == "tasks/update" {
				params["inputResponses"] = map[string]any{"k": map[string]any{"action": "decline"}}
			}
			if wire == "2026" {
				return p.call26(t, method, params)
			}
			return sessions[p].call(t, method, params)
		}
		methods := map[string][]string{"2026": {"tasks/get", "tasks/update", "tasks/cancel"}, "2025": {"tasks/get", "tasks/result", "tasks/cancel"}}

		// Alice herself is asked too: an altered ID resolves to no task at
		// all, not to the task it resembles.
		for _, p := range []*secPrincipal{mallory, alice} {
			for _, wire := range []string{"2026", "2025"} {
				for _, method := range methods[wire] {
					unknown := string(task.NewID())
					want := shapeOf(call(p, wire, method, unknown), unknown)
					if want.Code != -32602 {
						t.Fatalf("%s, %s wire, %s of an unknown task: %+v, want code -32602", p, wire, method, want)
					}
					for _, base := range []struct{ state, id string }{{"working", vRun}, {"completed", vDone}} {
						for _, v := range variants(base.id) {
							what := fmt.Sprintf("%s, %s wire, %s of alice's %s task's ID %s", p, wire, method, base.state, v.name)
							r := call(p, wire, method, v.id)
							if r.Error == nil || r.Result != nil {
								t.Errorf("%s: HTTP %d %.300s, want a -32602 error", what, r.HTTPStatus, r.Body)
								continue
							}
							s, isString := v.id.(string)
							_, malformed := task.ParseID(s)
							switch {
							case isString && malformed == nil:
								// Well-formed: exactly an unknown task.
								if got := shapeOf(r, s); got != want {
									t.Errorf("%s: %+v\nwant exactly the unknown task's %+v", what, got, want)
								}
							case wire == "2026" && isString && !headerSafe(s) && r.Error.Code == -32020 && r.HTTPStatus == http.StatusBadRequest:
								// An ID no Mcp-Name header can carry fails
								// the routing check first (SEP-2243).
							case r.Error.Code != -32602:
								t.Errorf("%s: HTTP %d error %d %q, want -32602", what, r.HTTPStatus, r.Error.Code, r.Error.Message)
							}
							if strings.Contains(r.Body, secretDone) || strings.Contains(r.Body, `"status"`) {
								t.Errorf("%s: the answer shows a task: %.300s", what, r.Body)
							}
						}
					}
				}
			}
		}

		if tk := alice.get26(t, vRun); tk.Status != "working" {
			t.Errorf("alice's computation afterwards: %s, want working", tk.Status)
		}
		if tk := alice.get26(t, vDone); tk.Status != "completed" || !bytes.Equal(tk.Result, done.Result) {
			t.Errorf("alice's completed task afterwards: %s %s", tk.Status, tk.Result)
		}
		alice.call26(t, "tasks/cancel", map[string]any{"taskId": vRun})
	})

	t.Run("spoofed related-task _meta", func(t *testing.T) {
		related := func(id string) map[string]any {
			return map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": id}}
		}
		vDeploy, vRun, vDone, key, inputBefore, done := victims26(t)
		victims := []string{vDeploy, vRun, vDone}
		// expectErr checks that r is an error (and nothing else) of code.
		expectErr := func(what string, r *rpcResp, code int64) {
			t.Helper()
			if r.Error == nil || r.Result != nil || r.Error.Code != code {
				t.Errorf("%s: HTTP %d %s, want error %d", what, r.HTTPStatus, r.Body, code)
			}
		}

		for _, a := range attackers {
			t.Run(a.String()+", 2026-07-28 wire", func(t *testing.T) {
				ownDeploy := a.start26(t, "deploy_with_confirmation", map[string]any{"service": a.principal + "-svc", "build_steps": 1, "step_delay_ms": 0}, nil)
				ownRun := a.start26(t, "long_computation", running, nil)
				a.wait26(t, ownDeploy, "input_required", isInput)
				for i, v := range victims {
					meta := meta26(related(v))
					// The task ID in params is the only source of truth.
					if tk := decodeTask26(t, a.call26(t, "tasks/get", map[string]any{"taskId": ownRun, "_meta": meta}), "tasks/get"); tk.TaskID != ownRun || tk.Status != "working" {
						t.Errorf("tasks/get of its own task with alice's related-task: %+v", tk)
					}
					for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
						p := func(id string, m map[string]any) map[string]any {
							out := map[string]any{"_meta": m}
							if id != "" {
								out["taskId"] = id
							}
							if method == "tasks/update" {
								out["inputResponses"] = map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
							}
							return out
						}
						unknown := string(task.NewID())
						want := shapeOf(a.call26(t, method, p(unknown, meta26(nil))), unknown)
						if got := shapeOf(a.call26(t, method, p(unknown, meta)), unknown); got != want {
							t.Errorf("%s of an unknown task with alice's related-task: %+v\nwant %+v", method, got, want)
						}
						expectErr(method+" without taskId, with alice's related-task", a.call26(t, method, p("", meta)), -32602)
					}
					// Alice's key, sent to the attacker's own task, answers
					// at most that task (a waiting one: the decline ends
					// it, and a finished task takes no more input).
					deploy := ownDeploy
					if i > 0 {
						deploy = a.start26(t, "deploy_with_confirmation", map[string]any{"service": a.principal + "-svc", "build_steps": 1, "step_delay_ms": 0}, nil)
						a.wait26(t, deploy, "input_required", isInput)
					}
					r := a.call26(t, "tasks/update", map[string]any{"taskId": deploy, "_meta": meta,
						"inputResponses": map[string]any{key: map[string]any{"action": "decline"}}})
					if r.Error != nil {
						t.Errorf("tasks/update of its own task: %s", r.Body)
					}
					// Tool calls carrying the _meta.
					r = a.call26(t, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}, "_meta": meta})
					if r.Error != nil || textOf(t, r.Result) != "hi" {
						t.Errorf("echo with alice's related-task: %s", r.Body)
					}
					id := a.start26(t, "long_computation", map[string]any{"n": 100, "steps": 1, "step_delay_ms": 0}, related(v))
					notVictim(t, "tools/call with alice's related-task", id)
					if tk := a.wait26(t, id, "terminal", terminal); !strings.Contains(resultOf(t, tk).text(), "25 primes up to 100") {
						t.Errorf("its own task's result: %s", tk.Result)
					}
				}
				if r := a.call26(t, "tasks/cancel", map[string]any{"taskId": ownRun, "_meta": meta26(related(vRun))}); r.Error != nil {
					t.Errorf("tasks/cancel of its own task with alice's related-task: %s", r.Body)
				}
				if tk := a.get26(t, ownRun); tk.Status != "cancelled" {
					t.Errorf("its own task after its cancel: %s", tk.Status)
				}
				a.call26(t, "tasks/cancel", map[string]any{"taskId": ownDeploy})
			})

			t.Run(a.String()+", 2025-11-25 wire", func(t *testing.T) {
				as := a.open25(t)
				own := as.start(t, "long_computation", map[string]any{"n": 100, "steps": 1, "step_delay_ms": 0}, nil)
				ownRun := as.start(t, "long_computation", running, nil)
				as.wait(t, own, "completed", func(tk task25) bool { return tk.Status == "completed" })
				for _, v := range victims {
					m := related(v)
					r := as.call(t, "tasks/get", map[string]any{"taskId": own, "_meta": m})
					var tk task25
					if r.Error != nil || json.Unmarshal(r.Result, &tk) != nil || tk.TaskID != own {
						t.Errorf("tasks/get of its own task with alice's related-task: %s", r.Body)
					}
					r = as.call(t, "tasks/result", map[string]any{"taskId": own, "_meta": m})
					var res struct {
						Meta map[string]json.RawMessage `json:"_meta"`
					}
					var rel struct {
						TaskID string `json:"taskId"`
					}
					if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || json.Unmarshal(res.Meta["io.modelcontextprotocol/related-task"], &rel) != nil ||
						rel.TaskID != own || !strings.Contains(textOf(t, r.Result), "25 primes up to 100") {
						t.Errorf("tasks/result of its own task with alice's related-task: %s", r.Body)
					}
					for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
						unknown := string(task.NewID())
						want := shapeOf(as.call(t, method, map[string]any{"taskId": unknown}), unknown)
						if got := shapeOf(as.call(t, method, map[string]any{"taskId": unknown, "_meta": m}), unknown); got != want {
							t.Errorf("%s of an unknown task with alice's related-task: %+v\nwant %+v", method, got, want)
						}
						expectErr(method+" without taskId, with alice's related-task", as.call(t, method, map[string]any{"_meta": m}), -32602)
					}
					r = as.call(t, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}, "_meta": m})
					if r.Error != nil || textOf(t, r.Result) != "hi" {
						t.Errorf("echo with alice's related-task: %s", r.Body)
					}
					id := as.start(t, "long_computation", map[string]any{"n": 100, "steps": 1, "step_delay_ms": 0}, m)
					notVictim(t, "task-augmented tools/call with alice's related-task", id)
				}
				r := as.call(t, "tasks/cancel", map[string]any{"taskId": ownRun, "_meta": related(vRun)})
				var tk task25
				if r.Error != nil || json.Unmarshal(r.Result, &tk) != nil || tk.TaskID != ownRun || tk.Status != "cancelled" {
					t.Errorf("tasks/cancel of its own task with alice's related-task: %s", r.Body)
				}
			})
		}

		tk := alice.get26(t, vDeploy)
		if inputAfter, _ := json.Marshal(tk.InputRequests); tk.Status != "input_required" || !bytes.Equal(inputAfter, inputBefore) {
			t.Errorf("alice's deploy after the attacks: %s %s\nwant input_required with %s", tk.Status, inputAfter, inputBefore)
		}
		if tk := alice.get26(t, vRun); tk.Status != "working" {
			t.Errorf("alice's computation after the attacks: %s, want working", tk.Status)
		}
		if tk := alice.get26(t, vDone); tk.Status != "completed" || !bytes.Equal(tk.Result, done.Result) {
			t.Errorf("alice's completed task after the attacks: %s %s", tk.Status, tk.Result)
		}
		alice.call26(t, "tasks/cancel", map[string]any{"taskId": vRun})
		alice.call26(t, "tasks/cancel", map[string]any{"taskId": vDeploy})
	})

	t.Run("replayed idempotency keys", func(t *testing.T) {
		spellings := []struct {
			name string
			meta func(key string) map[string]any
		}{
			{"io.mcptask/idempotency-key", func(k string) map[string]any { return map[string]any{"io.mcptask/idempotency-key": k} }},
			{"modelcontextprotocol.io/task", func(k string) map[string]any {
				return map[string]any{"modelcontextprotocol.io/task": map[string]any{"taskId": k}}
			}},
		}
		args := map[string]any{"n": 7919, "steps": 5, "step_delay_ms": 60000}
		other := func(p *secPrincipal) map[string]any {
			return map[string]any{"service": p.principal + "-svc", "build_steps": 1, "step_delay_ms": 60000}
		}
		var started []struct {
			p  *secPrincipal
			id string
		}
		own := func(p *secPrincipal, id string) {
			started = append(started, struct {
				p  *secPrincipal
				id string
			}{p, id})
		}

		for i, vsp := range spellings {
			t.Run("alice's key as "+vsp.name, func(t *testing.T) {
				key := "alice-key-" + strconv.Itoa(i) + "-" + string(task.NewID())
				otherKey := key + "-other-tool"
				vid := alice.start26(t, "long_computation", args, vsp.meta(key))
				vOther := alice.start26(t, "long_computation", args, vsp.meta(otherKey))
				victim(vid, vOther)
				own(alice, vid)
				own(alice, vOther)
				for _, a := range attackers {
					// A first use of alice's key with another tool creates
					// a task: the key is not "already used" for anyone but
					// alice.
					r := a.call26(t, "tools/call", map[string]any{"name": "deploy_with_confirmation", "arguments": other(a), "_meta": meta26(vsp.meta(otherKey))})
					if r.Error != nil {
						t.Errorf("%s's first call of another tool with alice's key: %s, want a new task", a, r.Body)
					} else if tk := decodeTask26(t, r, "tools/call"); tk.TaskID == "" || tk.TaskID == vOther {
						t.Errorf("%s's call of another tool with alice's key: %s", a, r.Body)
					} else {
						own(a, tk.TaskID)
					}

					var first string
					for _, asp := range spellings {
						id := a.start26(t, "long_computation", args, asp.meta(key))
						if id == vid {
							t.Fatalf("%s replaying alice's key (as %s) got alice's task %s", a, asp.name, vid)
						}
						notVictim(t, a.String()+" replaying alice's key", id)
						if first == "" {
							first = id
							own(a, id)
						} else if id != first {
							// The key binds per requester: the attacker's own
							// retry gets the attacker's own task.
							t.Errorf("%s's retry with the key as %s: task %s, want its own first task %s", a, asp.name, id, first)
						}
						if tk := a.get26(t, id); tk.TaskID != id {
							t.Errorf("%s's own task: %+v", a, tk)
						}
						// And alice does not see it.
						if r := alice.call26(t, "tasks/get", map[string]any{"taskId": id}); r.Error == nil || r.Error.Code != -32602 {
							t.Errorf("alice's tasks/get of %s's task: %s", a, r.Body)
						}
					}
					// The 2025-11-25 wire binds keys the same way.
					as := a.open25(t)
					if id := as.start(t, "long_computation", args, vsp.meta(key)); id == vid {
						t.Errorf("%s replaying alice's key on the 2025-11-25 wire got alice's task", a)
					}
					// A SEP-1686 client-chosen taskId equal to alice's task
					// ID is only a key: a new task, never hers.
					id := a.start26(t, "long_computation", args, spellings[1].meta(vid))
					notVictim(t, a.String()+" with alice's task ID as SEP-1686 taskId", id)
					own(a, id)
				}
				// Alice's retries, with either spelling, still get her task,
				// untouched.
				for _, asp := range spellings {
					if id := alice.start26(t, "long_computation", args, asp.meta(key)); id != vid {
						t.Errorf("alice's retry with her key as %s: task %s, want her task %s", asp.name, id, vid)
					}
				}
				as := alice.open25(t)
				if id := as.start(t, "long_computation", args, vsp.meta(key)); id != vid {
					t.Errorf("alice's retry on the 2025-11-25 wire: task %s, want %s", id, vid)
				}
				if tk := alice.get26(t, vid); tk.Status != "working" {
					t.Errorf("alice's task after the replays: %s, want working", tk.Status)
				}
			})
		}
		for _, s := range started {
			s.p.call26(t, "tasks/cancel", map[string]any{"taskId": s.id})
		}
	})

	t.Run("nothing of the victim's reaches the attackers or the log", func(t *testing.T) {
		secrets := []string{secretService, secretDone, secretDeploy, alice.token}
		for _, a := range attackers {
			bodies := srv.received(a)
			if len(bodies) < 100 {
				t.Fatalf("only %d responses to %s recorded", len(bodies), a)
			}
			for _, body := range bodies {
				for _, s := range secrets {
					if strings.Contains(body, s) {
						t.Errorf("a response to %s holds alice's %q: %.500s", a, s, body)
					}
				}
				// Alice's IDs appear only where an error message quotes
				// the ID the attacker itself sent.
				for _, id := range victimIDs {
					if strings.Contains(body, id) && (strings.Contains(body, `"result"`) || !strings.Contains(body, `"error"`)) {
						t.Errorf("a response to %s names alice's task %s outside an error: %.500s", a, id, body)
					}
				}
			}
		}
		logs := srv.logs.String()
		if !strings.Contains(logs, `"msg":"task created"`) {
			t.Fatalf("the server log has no task records:\n%s", logs)
		}
		denied := map[string]map[any]bool{} // attacker -> ops audited as denied on alice's tasks
		retrieved := 0                      // result_retrieved and cancelled records
		for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Errorf("log line is not a JSON record: %q", line)
				continue
			}
			for _, s := range []string{secretService, secretDone, secretDeploy, alice.token, mallory.token, bob.token} {
				if strings.Contains(line, s) {
					t.Errorf("the server log holds %q: %s", s, line)
				}
			}
			if strings.Contains(strings.ToLower(line), "panic") {
				t.Errorf("the server logged a panic: %s", line)
			}
			// Zero cross-principal reads in the whole test: every outcome
			// handed out and every cancellation went to the task's owner.
			if rec["msg"] == audit.Message && (rec["event"] == audit.EventResultRetrieved || rec["event"] == audit.EventCancelled) {
				retrieved++
				if rec["principal"] != rec["owner_principal"] || rec["tenant"] != rec["owner_tenant"] {
					t.Errorf("%v of another principal's task: %s", rec["event"], line)
				}
			}
			// Forensics: the attackers' attempts on alice's tasks are
			// audited as such (docs/security.md).
			if rec["msg"] == audit.Message && rec["event"] == audit.EventDenied && rec["reason"] == audit.ReasonOtherOwner &&
				rec["owner_principal"] == alice.principal && rec["owner_tenant"] == alice.tenant {
				who := fmt.Sprintf("%v@%v", rec["principal"], rec["tenant"])
				if denied[who] == nil {
					denied[who] = map[any]bool{}
				}
				denied[who][rec["op"]] = true
			}
		}
		if retrieved == 0 {
			t.Error("no result_retrieved or cancelled audit record: the cross-principal check saw nothing")
		}
		for _, a := range attackers {
			for _, op := range []string{"tasks/get", "tasks/update", "tasks/cancel", "tasks/result", "subscriptions/listen", "resources/read"} {
				if !denied[a.String()][op] {
					t.Errorf("no %s audit record of %s's %s of alice's tasks (got %v)", audit.EventDenied, a, op, denied[a.String()])
				}
			}
		}
	})
}
