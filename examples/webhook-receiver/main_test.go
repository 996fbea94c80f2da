package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestMain keeps the receiver's log out of the test output unless -v.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		log.SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}

// newSecret is a fresh whsec_ secret of n random bytes, padded base64
// unless raw.
func newSecret(t *testing.T, n int, raw bool) string {
	t.Helper()
	key := make([]byte, n)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if raw {
		return "whsec_" + base64.RawStdEncoding.EncodeToString(key)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// request is a POST of body signed by the Standard Webhooks library with
// each of secrets at ts, as mcptaskd sends it.
func request(t *testing.T, secrets []string, id string, ts time.Time, body string) *http.Request {
	t.Helper()
	var sigs []string
	for _, s := range secrets {
		wh, err := newWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign(id, ts, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		sigs = append(sigs, sig)
	}
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(standardwebhooks.HeaderWebhookID, id)
	r.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	r.Header.Set(standardwebhooks.HeaderWebhookSignature, strings.Join(sigs, " "))
	r.Header.Set("X-MCP-Subscription-Id", "sub_1")
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// lines are the JSON lines written to out.
func lines(t *testing.T, out *bytes.Buffer) []line {
	t.Helper()
	var ls []line
	for _, s := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if s == "" {
			continue
		}
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		ls = append(ls, l)
	}
	return ls
}

const event = `{"eventId":"evt_1","name":"task.status","timestamp":"2026-01-02T03:04:05Z",
  "data":{"taskId":"t1","status":"completed"},"cursor":"c1"}`

func TestDelivery(t *testing.T) {
	secret := newSecret(t, 32, false)
	var out bytes.Buffer
	h, err := newHandler(secret+"\n", &out) // as read from a file
	if err != nil {
		t.Fatal(err)
	}
	w := serve(h, request(t, []string{secret}, "evt_1", time.Now(), event))
	if w.Code/100 != 2 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	ls := lines(t, &out)
	if len(ls) != 1 {
		t.Fatalf("printed %q", out.String())
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("not one line: %q", out.String())
	}
	l := ls[0]
	if l.WebhookID != "evt_1" || l.SubscriptionID != "sub_1" || l.ReceivedAt.IsZero() {
		t.Errorf("line %+v", l)
	}
	var got, want any
	_ = json.Unmarshal(l.Body, &got)
	_ = json.Unmarshal([]byte(event), &want)
	if gb, _ := json.Marshal(got); string(gb) != mustJSON(t, want) {
		t.Errorf("body %s, want %s", gb, mustJSON(t, want))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDuplicatePrintedOnce(t *testing.T) {
	secret := newSecret(t, 32, false)
	var out bytes.Buffer
	h, err := newHandler(secret, &out)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		// A retry: same webhook-id, a later timestamp, signed again.
		w := serve(h, request(t, []string{secret}, "evt_dup", time.Now().Add(time.Duration(i)*time.Second), event))
		if w.Code/100 != 2 {
			t.Fatalf("attempt %d: status %d", i, w.Code)
		}
	}
	if n := len(lines(t, &out)); n != 1 {
		t.Fatalf("printed %d lines: %q", n, out.String())
	}
}

func TestDuplicateSetIsBounded(t *testing.T) {
	secret := newSecret(t, 32, false)
	var out bytes.Buffer
	h, err := newHandler(secret, &out)
	if err != nil {
		t.Fatal(err)
	}
	rc := h.(*receiver)
	rc.order = make([]string, 2) // remember two webhook-ids
	for _, id := range []string{"a", "b", "c", "a", "c"} {
		if w := serve(h, request(t, []string{secret}, id, time.Now(), event)); w.Code/100 != 2 {
			t.Fatalf("%s: status %d", id, w.Code)
		}
	}
	var ids []string
	for _, l := range lines(t, &out) {
		ids = append(ids, l.WebhookID)
	}
	// "a" was forgotten when "c" came, so it is printed again; "c" not.
	if got := strings.Join(ids, ","); got != "a,b,c,a" {
		t.Errorf("printed %s", got)
	}
	if len(rc.seen) != 2 {
		t.Errorf("remembers %d ids", len(rc.seen))
	}
}

func TestRejected(t *testing.T) {
	secret := newSecret(t, 32, false)
	other := newSecret(t, 32, false)
	now := time.Now()
	cases := []struct {
		name string
		req  func() *http.Request
		want int
	}{
		{"tampered body", func() *http.Request {
			r := request(t, []string{secret}, "evt_1", now, event)
			r.Body = httptestBody(strings.Replace(event, "completed", "failed", 1))
			return r
		}, http.StatusUnauthorized},
		{"other secret", func() *http.Request {
			return request(t, []string{other}, "evt_1", now, event)
		}, http.StatusUnauthorized},
		{"changed webhook-id", func() *http.Request {
			r := request(t, []string{secret}, "evt_1", now, event)
			r.Header.Set(standardwebhooks.HeaderWebhookID, "evt_2")
			return r
		}, http.StatusUnauthorized},
		{"no signature", func() *http.Request {
			r := request(t, []string{secret}, "evt_1", now, event)
			r.Header.Del(standardwebhooks.HeaderWebhookSignature)
			return r
		}, http.StatusUnauthorized},
		{"stale timestamp", func() *http.Request {
			return request(t, []string{secret}, "evt_1", now.Add(-6*time.Minute), event)
		}, http.StatusUnauthorized},
		{"future timestamp", func() *http.Request {
			return request(t, []string{secret}, "evt_1", now.Add(6*time.Minute), event)
		}, http.StatusUnauthorized},
		{"signed but not JSON", func() *http.Request {
			return request(t, []string{secret}, "evt_1", now, "not json")
		}, http.StatusBadRequest},
		{"too large", func() *http.Request {
			return request(t, []string{secret}, "evt_1", now, `{"x":"`+strings.Repeat("a", maxBody)+`"}`)
		}, http.StatusRequestEntityTooLarge},
		{"GET", func() *http.Request {
			return httptest.NewRequest(http.MethodGet, "/", nil)
		}, http.StatusMethodNotAllowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			h, err := newHandler(secret, &out)
			if err != nil {
				t.Fatal(err)
			}
			w := serve(h, c.req())
			if w.Code != c.want {
				t.Errorf("status %d, want %d", w.Code, c.want)
			}
			if out.Len() != 0 {
				t.Errorf("printed %q", out.String())
			}
			if strings.Contains(w.Body.String(), strings.TrimPrefix(secret, "whsec_")) {
				t.Error("the answer holds the secret")
			}
		})
	}
}

func httptestBody(s string) *readCloser { return &readCloser{strings.NewReader(s)} }

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

func TestStaleRetryAfterRefusal(t *testing.T) {
	// A refused stale delivery is not remembered: the same webhook-id,
	// sent again fresh, is accepted.
	secret := newSecret(t, 32, false)
	var out bytes.Buffer
	h, _ := newHandler(secret, &out)
	if w := serve(h, request(t, []string{secret}, "evt_s", time.Now().Add(-10*time.Minute), event)); w.Code != http.StatusUnauthorized {
		t.Fatalf("stale: status %d", w.Code)
	}
	if w := serve(h, request(t, []string{secret}, "evt_s", time.Now(), event)); w.Code/100 != 2 {
		t.Fatalf("fresh: status %d", w.Code)
	}
	if n := len(lines(t, &out)); n != 1 {
		t.Errorf("printed %d lines", n)
	}
}

func TestVerificationEchoed(t *testing.T) {
	secret := newSecret(t, 32, false)
	var out bytes.Buffer
	h, err := newHandler(secret, &out)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"type":"verification","challenge":"n0nce-_x"}`
	w := serve(h, request(t, []string{secret}, "msg_verification_1", time.Now(), body))
	if w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var echo struct{ Challenge string }
	if err := json.Unmarshal(w.Body.Bytes(), &echo); err != nil || echo.Challenge != "n0nce-_x" {
		t.Errorf("answer %q (%v)", w.Body, err)
	}
	if out.Len() != 0 {
		t.Errorf("a verification was printed: %q", out.String())
	}

	// An unsigned challenge is not answered.
	r := request(t, []string{newSecret(t, 32, false)}, "msg_verification_2", time.Now(), body)
	if w := serve(h, r); w.Code != http.StatusUnauthorized || strings.Contains(w.Body.String(), "n0nce") {
		t.Errorf("forged verification: status %d, body %q", w.Code, w.Body)
	}
}

func TestRotationAndUnpaddedSecret(t *testing.T) {
	// mcptaskd signs with every secret of a subscription during a rotation
	// and accepts secrets without base64 padding (25 bytes need it).
	secret := newSecret(t, 25, true)
	var out bytes.Buffer
	h, err := newHandler(secret, &out)
	if err != nil {
		t.Fatal(err)
	}
	r := request(t, []string{newSecret(t, 32, false), secret}, "evt_r", time.Now(), event)
	if w := serve(h, r); w.Code/100 != 2 {
		t.Fatalf("status %d", w.Code)
	}
	if n := len(lines(t, &out)); n != 1 {
		t.Errorf("printed %d lines", n)
	}
}

func TestControlEnvelopesPrinted(t *testing.T) {
	secret := newSecret(t, 32, false)
	var out bytes.Buffer
	h, _ := newHandler(secret, &out)
	for i, body := range []string{
		`{"type":"gap","cursor":"c7"}`,
		`{"type":"terminated","error":{"code":-32001,"message":"subscription expired"}}`,
	} {
		if w := serve(h, request(t, []string{secret}, "ctl_"+strconv.Itoa(i), time.Now(), body)); w.Code/100 != 2 {
			t.Fatalf("%s: status %d", body, w.Code)
		}
	}
	ls := lines(t, &out)
	if len(ls) != 2 || !bytes.Contains(ls[0].Body, []byte(`"gap"`)) || !bytes.Contains(ls[1].Body, []byte(`"terminated"`)) {
		t.Errorf("printed %q", out.String())
	}
}

// failingWriter fails its first write.
type failingWriter struct {
	mu     sync.Mutex
	failed bool
	buf    bytes.Buffer
}

func (f *failingWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failed {
		f.failed = true
		return 0, errors.New("disk full")
	}
	return f.buf.Write(p)
}

func TestNot2xxUntilRecorded(t *testing.T) {
	secret := newSecret(t, 32, false)
	out := &failingWriter{}
	h, _ := newHandler(secret, out)
	if w := serve(h, request(t, []string{secret}, "evt_w", time.Now(), event)); w.Code != http.StatusInternalServerError {
		t.Fatalf("failed write: status %d", w.Code)
	}
	// The redelivery is not taken for a duplicate.
	if w := serve(h, request(t, []string{secret}, "evt_w", time.Now(), event)); w.Code/100 != 2 {
		t.Fatalf("redelivery: status %d", w.Code)
	}
	if n := strings.Count(out.buf.String(), "\n"); n != 1 {
		t.Errorf("printed %d lines", n)
	}
}

func TestConcurrentDuplicates(t *testing.T) {
	secret := newSecret(t, 32, false)
	var out bytes.Buffer
	h, _ := newHandler(secret, &out)
	srv := httptest.NewServer(h)
	defer srv.Close()
	var reqs []*http.Request
	for i := range 8 {
		r := request(t, []string{secret}, "evt_"+strconv.Itoa(i%2), time.Now(), event)
		req, err := http.NewRequest(http.MethodPost, srv.URL, r.Body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = r.Header
		reqs = append(reqs, req)
	}
	var wg sync.WaitGroup
	for _, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				t.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	srv.Close()
	if n := len(lines(t, &out)); n != 2 {
		t.Errorf("printed %d lines, want 2: %q", n, out.String())
	}
}

func TestBadSecrets(t *testing.T) {
	for _, s := range []string{"", "whsec_", "nopefix", "whsec_!!!", "   "} {
		if _, err := newHandler(s, &bytes.Buffer{}); err == nil {
			t.Errorf("newHandler(%q) succeeded", s)
		} else if rest := strings.TrimSpace(strings.TrimPrefix(s, "whsec_")); rest != "" && strings.Contains(err.Error(), rest) {
			t.Errorf("the error repeats the secret: %v", err)
		}
	}
}
