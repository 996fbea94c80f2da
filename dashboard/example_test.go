package dashboard_test

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/mcptask/mcptask/dashboard"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// Mount the dashboard under /dashboard/ of a server, signed in with an
// admin token.
func Example() {
	dir, _ := os.MkdirTemp("", "dashboard-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(filepath.Join(dir, "tasks.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(engine.Options{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	defer eng.Shutdown(context.Background())

	adminToken := []byte("an-admin-token-of-32-characters!")
	dash, err := dashboard.New(dashboard.Options{
		Engine: eng,
		Store:  st,
		// The admin token has no expiry of its own (a JWT's would end
		// the sign-in's session with it).
		Authenticate: func(_ *http.Request, token string) (task.Owner, time.Time, bool) {
			return task.UserOwner("", "ops"), time.Time{}, subtle.ConstantTimeCompare([]byte(token), adminToken) == 1
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer dash.Close()
	mux := http.NewServeMux()
	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", dash))

	// A visitor without a session is sent to the sign-in form.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/dashboard/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Location"))

	// A script signs in with the token as a bearer token.
	req := httptest.NewRequest(http.MethodGet, "/dashboard/", nil)
	req.Header.Set("Authorization", "Bearer "+string(adminToken))
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output:
	// 303 ./login?next=
	// 200 text/html; charset=utf-8
}
