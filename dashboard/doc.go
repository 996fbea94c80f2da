// Package dashboard serves mcptask's operator dashboard: a web view of
// every task in a store, live, with the actions an operator needs.
//
//	eng, _ := engine.New(st, &engine.Options{InstanceID: "api-1"})
//	dash, err := dashboard.New(dashboard.Options{
//		Engine: eng,
//		Store:  st, // store/sqlite or store/postgres
//		Authenticate: func(r *http.Request, token string) (task.Owner, time.Time, bool) {
//			return task.UserOwner("", "ops"), time.Time{}, token == adminToken // no expiry of its own
//		},
//	})
//	if err != nil { ... }
//	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", dash))
//
// It shows:
//
//   - the task list: counts per status and of the tool errors (completed
//     tasks whose result says isError: true, shown apart from successes),
//     filters by status, tool, owner and creation time, one to hide child
//     tasks (started by a task's work), a search by task ID, pages of 50 compact rows with each task's wait and run, over any
//     number of tasks (keyset pagination: as fast on the 2,000th page as on
//     the first; previous and next, "51–100 of N"), rows updated live;
//   - the Tools page: per tool and queue, what runs against the cap, what
//     waits, the drain switch, and the last hour's failures and durations;
//   - a task page: its status and status message, the timeline of its
//     history (every creation, status change and start of its work, with
//     the time and the instance that made it), pending input requests, the domain operations and
//     their receipts (the ledger), the tail of its log, TTL and expiry,
//     owner; its parent, when it is a child, and its children (step, tool,
//     status); its result or error, and its arguments, only on an explicit,
//     audited request (the result's text shown as text);
//   - actions: cancel a task, cancel the selected tasks, drain a tool and
//     undrain it (with Options.Drain), run a finished task's call again
//     (with Options.RunAgain). Each is audited, naming the operator that
//     Options.Authenticate returned.
//
// Live updates are Server-Sent Events fed by Engine.Subscribe, so changes
// made by other instances sharing a PostgreSQL store appear as well (the
// store's change feed announces them). Every URL the pages use is
// relative, so the dashboard works under any path prefix, behind a
// reverse proxy that strips or keeps one, without configuration. Its
// assets are embedded: nothing is built or fetched.
//
// # Security
//
// The dashboard is an operator surface: it sees every owner's tasks.
// With Options.Authenticate set, a visitor signs in with a token (a form
// answering the "sign in" prompt; or an Authorization: Bearer header for
// scripts) and gets a session cookie (HttpOnly, SameSite=Strict, signed,
// expiring after Options.SessionTTL or with the token, whichever comes
// first; signing out revokes it). Failed sign-ins are limited per source
// IP. Without it, anyone who reaches the handler is admitted:
// mount it on a loopback listener only, as mcptaskd does. Every action is
// a POST that needs the page's anti-CSRF token and a same-origin request
// (net/http's CrossOriginProtection). Pages are sent with a strict
// Content-Security-Policy (no inline script or style, nothing from other
// origins, no framing), and every task field is HTML-escaped by
// html/template: tool names, status messages and input requests are the
// input of whoever called the tool, so the pages treat them as hostile.
package dashboard
