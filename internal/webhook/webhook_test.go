package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// secret is a whsec_ secret of n bytes (padded base64 unless raw).
func secret(n int, fill byte, raw bool) string {
	key := bytes.Repeat([]byte{fill}, n)
	if raw {
		return "whsec_" + base64.RawStdEncoding.EncodeToString(key)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

func TestValidSecret(t *testing.T) {
	for _, tc := range []struct {
		name, s string
		ok      bool
	}{
		{"24 bytes", secret(24, 1, false), true},
		{"32 bytes padded", secret(32, 2, false), true},
		{"32 bytes unpadded", secret(32, 2, true), true},
		{"64 bytes", secret(64, 3, false), true},
		{"23 bytes", secret(23, 4, false), false},
		{"65 bytes", secret(65, 5, false), false},
		{"no prefix", strings.TrimPrefix(secret(32, 6, false), "whsec_"), false},
		{"other prefix", "whsek_" + strings.TrimPrefix(secret(32, 6, false), "whsec_"), false},
		{"prefix only", "whsec_", false},
		{"empty", "", false},
		{"base64url", "whsec_" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 16)), false},
		{"bad padding", secret(32, 7, true) + "==", false},
		{"newline", secret(32, 7, false)[:20] + "\n" + secret(32, 7, false)[20:], false},
		{"space", secret(32, 7, false) + " ", false},
	} {
		err := ValidSecret(tc.s)
		if (err == nil) != tc.ok {
			t.Errorf("%s: ValidSecret(%q) = %v, want ok=%v", tc.name, tc.s, err, tc.ok)
		}
		if err != nil && len(tc.s) > len("whsec_")+8 && strings.Contains(err.Error(), strings.TrimPrefix(tc.s, "whsec_")) {
			t.Errorf("%s: the error %q repeats the secret", tc.name, err)
		}
	}
}

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		raw      string
		loopback bool
		ok       bool
	}{
		{"https://example.com/hook", false, true},
		{"https://example.com:8443/hook?x=1", false, true},
		{"HTTPS://example.com/hook", false, true},
		{"https://[2606:4700::1]/hook", false, true},
		{"http://example.com/hook", false, false},
		{"http://example.com/hook", true, false},
		{"http://127.0.0.1:8080/hook", false, false},
		{"http://127.0.0.1:8080/hook", true, true},
		{"http://127.9.9.9/hook", true, true},
		{"http://[::1]:8080/hook", true, true},
		{"http://localhost:8080/hook", true, true},
		{"http://LocalHost/hook", true, true},
		{"http://localhost.example.com/hook", true, false},
		{"http://10.0.0.1/hook", true, false},
		{"https://user:pass@example.com/hook", false, false},
		{"https://user@example.com/hook", false, false},
		{"https://example.com/hook#frag", false, false},
		{"https://example.com/hook#", false, false},
		{"/hook", false, false},
		{"example.com/hook", false, false},
		{"//example.com/hook", false, false},
		{"https:///hook", false, false},
		{"https:example.com", false, false},
		{"ftp://example.com/hook", false, false},
		{"ws://example.com/hook", false, false},
		{"https://example.com:x/", false, false},
		{"https://exa mple.com/", false, false},
		{"https://example.com/\x7f", false, false},
		{"", false, false},
		{"https://example.com/" + strings.Repeat("a", 2048-len("https://example.com/")), false, true},
		{"https://example.com/" + strings.Repeat("a", 2049-len("https://example.com/")), false, false},
	} {
		u, err := CheckURL(tc.raw, tc.loopback)
		if (err == nil) != tc.ok {
			t.Errorf("CheckURL(%.60q, %v) = %v, want ok=%v", tc.raw, tc.loopback, err, tc.ok)
		}
		if err == nil && (u == nil || u.Host == "") {
			t.Errorf("CheckURL(%.60q) = %v without a host", tc.raw, u)
		}
	}
}

func TestAllowedAddr(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		allowed bool
	}{
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"93.184.216.34", true},
		{"2606:4700::1", true},
		{"2001:4860:4860::8888", true},
		{"::ffff:8.8.8.8", true},
		{"64:ff9b::8.8.8.8", true},
		{"2002:808:808::1", true},
		{"172.15.255.255", true},
		{"172.32.0.0", true},
		{"100.63.255.255", true},
		{"100.128.0.0", true},
		{"198.17.255.255", true},
		{"198.20.0.0", true},
		{"223.255.255.255", true},

		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"::1", false},
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"10.0.0.1", false},
		{"10.255.255.255", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"192.168.1.1", false},
		{"100.64.0.1", false},
		{"100.127.255.255", false},
		{"169.254.169.254", false},
		{"169.254.0.1", false},
		{"198.18.0.1", false},
		{"198.19.255.255", false},
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"240.0.0.1", false},
		{"255.255.255.255", false},
		{"192.0.2.1", false},
		{"::", false},
		{"fc00::1", false},
		{"fd12:3456::1", false},
		{"fe80::1", false},
		{"fe80::1%eth0", false},
		{"febf::1", false},
		{"ff02::1", false},
		{"ff0e::1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:169.254.169.254", false},
		{"::ffff:192.168.0.1", false},
		{"::127.0.0.1", false},
		{"64:ff9b::127.0.0.1", false},
		{"64:ff9b::10.1.2.3", false},
		{"64:ff9b::169.254.169.254", false},
		{"64:ff9b:1::8.8.8.8", false},
		{"2002:7f00:1::1", false},
		{"2002:a9fe:a9fe::1", false},
	} {
		a, err := netip.ParseAddr(tc.addr)
		if err != nil {
			t.Fatalf("ParseAddr(%q): %v", tc.addr, err)
		}
		if got := allowedAddr(a); got != tc.allowed {
			t.Errorf("allowedAddr(%s) = %v, want %v", tc.addr, got, tc.allowed)
		}
		port := "443"
		err = controlDial("tcp", net.JoinHostPort(tc.addr, port), nil)
		if (err == nil) != tc.allowed {
			t.Errorf("controlDial(%s) = %v, want allowed=%v", tc.addr, err, tc.allowed)
		}
	}
	if allowedAddr(netip.Addr{}) {
		t.Error("the zero Addr is allowed")
	}
	if controlDial("tcp", "not an address", nil) == nil {
		t.Error("controlDial accepts an unparsable address")
	}
}

// recorder is a webhook endpoint that keeps the requests it gets.
type recorder struct {
	mu     sync.Mutex
	reqs   []*http.Request
	bodies [][]byte
	status int
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, r)
	rec.bodies = append(rec.bodies, body)
	status := rec.status
	rec.mu.Unlock()
	if status == 0 {
		status = http.StatusNoContent
	}
	w.WriteHeader(status)
}

func (rec *recorder) last(t *testing.T) (*http.Request, []byte) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) == 0 {
		t.Fatal("the endpoint got no request")
	}
	return rec.reqs[len(rec.reqs)-1], rec.bodies[len(rec.bodies)-1]
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.reqs)
}

func testSender() *Sender {
	return New(Options{AllowPrivate: true, Timeout: 5 * time.Second})
}

// wantError checks that err is an *Error of the category, status and
// retryability.
func wantError(t *testing.T, err error, category string, status int, retryable bool) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want an *Error %s", err, err, category)
	}
	if e.Category != category || e.Status != status || e.Retryable != retryable {
		t.Fatalf("err = %+v, want {Category:%s Status:%d Retryable:%v}", *e, category, status, retryable)
	}
}

func TestSendSigned(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()

	s1, s2 := secret(32, 0x11, false), secret(48, 0x22, false)
	body := []byte(`{"eventId":"ev_1","type":"task.completed"}`)
	for _, secrets := range [][]string{{s1}, {s1, s2}} {
		err := testSender().Send(context.Background(), Message{
			URL: srv.URL + "/hook", ID: "ev_1", SubscriptionID: "sub_1",
			Secrets: secrets, Body: body,
		})
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
		r, got := rec.last(t)
		if r.Method != http.MethodPost || r.URL.Path != "/hook" {
			t.Errorf("%s %s, want POST /hook", r.Method, r.URL.Path)
		}
		if !bytes.Equal(got, body) {
			t.Errorf("body %q, want %q", got, body)
		}
		for h, want := range map[string]string{
			"Content-Type":          "application/json",
			"User-Agent":            "mcptask-webhooks/1",
			"webhook-id":            "ev_1",
			"X-MCP-Subscription-Id": "sub_1",
		} {
			if v := r.Header.Get(h); v != want {
				t.Errorf("%s: %q, want %q", h, v, want)
			}
		}
		ts, err := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
		if err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
			t.Errorf("webhook-timestamp %q is not now", r.Header.Get("webhook-timestamp"))
		}
		sigs := strings.Split(r.Header.Get("webhook-signature"), " ")
		if len(sigs) != len(secrets) {
			t.Errorf("webhook-signature %q has %d signatures, want %d", r.Header.Get("webhook-signature"), len(sigs), len(secrets))
		}
		for i, sec := range secrets {
			if !strings.HasPrefix(sigs[i], "v1,") {
				t.Errorf("signature %q is not v1", sigs[i])
			}
			wh, err := standardwebhooks.NewWebhook(sec)
			if err != nil {
				t.Fatal(err)
			}
			if err := wh.Verify(got, r.Header); err != nil {
				t.Errorf("secret %d of %d: the Standard Webhooks verifier refuses: %v", i+1, len(secrets), err)
			}
			// Each signature verifies on its own too.
			h := r.Header.Clone()
			h.Set("webhook-signature", sigs[i])
			if err := wh.Verify(got, h); err != nil {
				t.Errorf("signature %d alone: %v", i+1, err)
			}
			// A changed body does not verify.
			if err := wh.Verify(append(bytes.Clone(got), ' '), r.Header); err == nil {
				t.Error("a changed body verifies")
			}
		}
		other, _ := standardwebhooks.NewWebhook(secret(32, 0x33, false))
		if err := other.Verify(got, r.Header); err == nil {
			t.Error("another secret verifies")
		}
	}
}

func TestSendTimestampAndUnpaddedSecret(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()

	at := time.Unix(1700000000, 0)
	raw := secret(32, 0x44, true) // unpadded, which the library's NewWebhook refuses
	err := testSender().Send(context.Background(), Message{
		URL: srv.URL, ID: "ev_2", Secrets: []string{raw}, Body: []byte(`{}`),
		Now: func() time.Time { return at },
	})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	r, got := rec.last(t)
	if v := r.Header.Get("webhook-timestamp"); v != "1700000000" {
		t.Errorf("webhook-timestamp %q, want 1700000000", v)
	}
	if v := r.Header.Get("X-MCP-Subscription-Id"); v != "" {
		t.Errorf("X-MCP-Subscription-Id %q without a subscription ID", v)
	}
	wh, err := standardwebhooks.NewWebhookRaw(bytes.Repeat([]byte{0x44}, 32))
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.VerifyIgnoringTimestamp(got, r.Header); err != nil {
		t.Errorf("the Standard Webhooks verifier refuses: %v", err)
	}
	want, err := Sign([]string{raw}, "ev_2", at, got)
	if err != nil || r.Header.Get("webhook-signature") != want {
		t.Errorf("Sign = %q, %v; the header is %q", want, err, r.Header.Get("webhook-signature"))
	}
}

func TestSign(t *testing.T) {
	// The example of the Standard Webhooks specification.
	sig, err := Sign([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; sig != want {
		t.Errorf("Sign = %q, want %q", sig, want)
	}
	if _, err := Sign(nil, "id", time.Now(), nil); err == nil {
		t.Error("Sign without secrets succeeds")
	}
	bad := "whsec_" + strings.Repeat("A", 8)
	if _, err := Sign([]string{secret(32, 1, false), bad}, "id", time.Now(), nil); err == nil || strings.Contains(err.Error(), "AAAAAAAA") {
		t.Errorf("Sign with a bad secret: %v", err)
	}
}

func TestSendStatus(t *testing.T) {
	for _, tc := range []struct {
		status    int
		category  string
		retryable bool
	}{
		{200, "", false},
		{202, "", false},
		{204, "", false},
		{400, "http_4xx", true},
		{404, "http_4xx", true},
		{410, "http_4xx", false},
		{413, "http_4xx", false},
		{429, "http_4xx", true},
		{500, "http_5xx", true},
		{503, "http_5xx", true},
		{304, "redirect", true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Secret-Header", "leaky-header")
			w.WriteHeader(tc.status)
			if tc.status != 304 && tc.status != 204 {
				io.WriteString(w, "leaky-body "+strings.Repeat("x", 10000))
			}
		}))
		err := New(Options{AllowPrivate: true, MaxBody: 16}).Send(context.Background(), Message{
			URL: srv.URL, ID: "ev", Secrets: []string{secret(32, 1, false)}, Body: []byte(`{}`),
		})
		srv.Close()
		if tc.category == "" {
			if err != nil {
				t.Errorf("%d: %v", tc.status, err)
			}
			continue
		}
		wantError(t, err, tc.category, tc.status, tc.retryable)
		if msg := err.Error(); strings.Contains(msg, "leaky") || strings.Contains(msg, "whsec") || !strings.Contains(msg, strconv.Itoa(tc.status)) {
			t.Errorf("%d: error text %q", tc.status, msg)
		}
	}
}

func TestSendRedirectNotFollowed(t *testing.T) {
	target := &recorder{}
	tsrv := httptest.NewServer(target)
	defer tsrv.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, tsrv.URL+"/elsewhere", http.StatusFound)
	}))
	defer srv.Close()

	err := testSender().Send(context.Background(), Message{
		URL: srv.URL, ID: "ev", Secrets: []string{secret(32, 1, false)}, Body: []byte(`{}`),
	})
	wantError(t, err, "redirect", http.StatusFound, true)
	if n := target.count(); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
}

func TestSendTimeout(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for the handler

	start := time.Now()
	err := New(Options{AllowPrivate: true, Timeout: 200 * time.Millisecond}).Send(context.Background(), Message{
		URL: srv.URL, ID: "ev", Secrets: []string{secret(32, 1, false)}, Body: []byte(`{}`),
	})
	wantError(t, err, "timeout", 0, true)
	select {
	case <-arrived:
	default:
		t.Error("the request did not reach the handler")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Send took %v with a 200ms timeout", d)
	}
}

func TestSendContextDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := testSender().Send(ctx, Message{
		URL: srv.URL, ID: "ev", Secrets: []string{secret(32, 1, false)}, Body: []byte(`{}`),
	})
	wantError(t, err, "timeout", 0, true)
}

func TestSendConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	err = testSender().Send(context.Background(), Message{
		URL: "http://" + addr + "/hook", ID: "ev", Secrets: []string{secret(32, 1, false)}, Body: []byte(`{}`),
	})
	wantError(t, err, "connection_refused", 0, true)
}

func TestSendBlockedAddress(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(rec)
	defer tlsSrv.Close()

	port := srv.Listener.Addr().(*net.TCPAddr).Port
	s := New(Options{Timeout: 2 * time.Second})
	for _, u := range []string{
		srv.URL,
		"http://localhost:" + strconv.Itoa(port),
		tlsSrv.URL,
	} {
		err := s.Send(context.Background(), Message{
			URL: u, ID: "ev", Secrets: []string{secret(32, 1, false)}, Body: []byte(`{}`),
		})
		wantError(t, err, "blocked_address", 0, true)
	}
	err := s.Verify(context.Background(), srv.URL, "sub", []string{secret(32, 1, false)})
	wantError(t, err, "blocked_address", 0, true)
	if n := rec.count(); n != 0 {
		t.Errorf("the blocked endpoint got %d requests", n)
	}
}

func TestSendTLSUntrusted(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewUnstartedServer(rec)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	defer srv.Close()
	err := testSender().Send(context.Background(), Message{
		URL: srv.URL, ID: "ev", Secrets: []string{secret(32, 1, false)}, Body: []byte(`{}`),
	})
	wantError(t, err, "tls_error", 0, true)
	if n := rec.count(); n != 0 {
		t.Errorf("the untrusted endpoint got %d requests", n)
	}
}

func TestSendInvalidMessage(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	good := Message{URL: srv.URL, ID: "ev", SubscriptionID: "sub", Secrets: []string{secret(32, 1, false)}, Body: []byte(`{}`)}
	for name, change := range map[string]func(*Message){
		"no secret":          func(m *Message) { m.Secrets = nil },
		"bad secret":         func(m *Message) { m.Secrets = []string{"whsec_short"} },
		"no ID":              func(m *Message) { m.ID = "" },
		"ID with newline":    func(m *Message) { m.ID = "ev\r\nX-Injected: 1" },
		"sub with newline":   func(m *Message) { m.SubscriptionID = "sub\nX: 1" },
		"http to a non-loop": func(m *Message) { m.URL = "http://example.com/" },
		"relative URL":       func(m *Message) { m.URL = "/hook" },
	} {
		m := good
		change(&m)
		err := testSender().Send(context.Background(), m)
		var e *Error
		if !errors.As(err, &e) || e.Category != "request_error" || e.Retryable {
			t.Errorf("%s: %v, want a non-retryable request_error", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "whsec") {
			t.Errorf("%s: the error %q names the secret", name, err)
		}
	}
	if n := rec.count(); n != 0 {
		t.Errorf("the endpoint got %d invalid requests", n)
	}
}

// challengeEndpoint answers the verification handshake by echo, after
// checking the request with the Standard Webhooks verifier.
func challengeEndpoint(t *testing.T, sec string, echo func(challenge string) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		wh, err := standardwebhooks.NewWebhook(sec)
		if err != nil {
			t.Error(err)
		}
		if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("the verification request does not verify: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if id := r.Header.Get("webhook-id"); !strings.HasPrefix(id, "msg_verification_") || len(id) != len("msg_verification_")+32 {
			t.Errorf("webhook-id %q", id)
		}
		if v := r.Header.Get("X-MCP-Subscription-Id"); v != "sub_v" {
			t.Errorf("X-MCP-Subscription-Id %q", v)
		}
		var env struct{ Type, Challenge string }
		if err := json.Unmarshal(body, &env); err != nil || env.Type != "verification" {
			t.Errorf("envelope %s: %v", body, err)
		}
		if raw, err := base64.RawURLEncoding.DecodeString(env.Challenge); err != nil || len(raw) != 32 {
			t.Errorf("challenge %q is not 32 bytes of base64url", env.Challenge)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, echo(env.Challenge))
	})
}

func TestVerify(t *testing.T) {
	sec := secret(32, 9, false)
	seen := map[string]bool{}
	for _, tc := range []struct {
		name     string
		echo     func(string) string
		category string
	}{
		{"echo", func(c string) string { return `{"challenge":"` + c + `"}` }, ""},
		{"echo with more", func(c string) string { return `{"ok":true, "challenge":"` + c + `"}` }, ""},
		{"wrong echo", func(c string) string { return `{"challenge":"` + c + `x"}` }, "challenge_failed"},
		{"another challenge", func(c string) string { return `{"challenge":"AAAA"}` }, "challenge_failed"},
		{"empty", func(c string) string { return "" }, "challenge_failed"},
		{"not JSON", func(c string) string { return c }, "challenge_failed"},
		{"too long", func(c string) string { return `{"pad":"` + strings.Repeat("x", 5000) + `","challenge":"` + c + `"}` }, "challenge_failed"},
	} {
		var mu sync.Mutex
		srv := httptest.NewServer(challengeEndpoint(t, sec, func(c string) string {
			mu.Lock()
			if seen[c] {
				t.Errorf("challenge %q used twice", c)
			}
			seen[c] = true
			mu.Unlock()
			return tc.echo(c)
		}))
		err := testSender().Verify(context.Background(), srv.URL, "sub_v", []string{sec})
		srv.Close()
		if tc.category == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		wantError(t, err, tc.category, 200, true)
	}
}

func TestVerifyStatus(t *testing.T) {
	var hits atomic.Int32
	for _, status := range []int{404, 500, 302, 413} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.Header().Set("Location", "/x")
			w.WriteHeader(status)
		}))
		err := testSender().Verify(context.Background(), srv.URL, "sub", []string{secret(32, 1, false)})
		srv.Close()
		wantError(t, err, "challenge_failed", status, true)
	}
	if hits.Load() != 4 {
		t.Errorf("%d requests, want 4", hits.Load())
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	err = testSender().Verify(context.Background(), "http://"+addr, "sub", []string{secret(32, 1, false)})
	wantError(t, err, "connection_refused", 0, true)
	err = testSender().Verify(context.Background(), "http://"+addr, "sub", nil)
	wantError(t, err, "request_error", 0, false)
}

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{Category: "timeout", Retryable: true}, "webhook delivery failed: timeout"},
		{Error{Category: "http_5xx", Status: 502, Retryable: true}, "webhook delivery failed: http_5xx (HTTP 502)"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}

func FuzzValidSecret(f *testing.F) {
	for _, s := range []string{"", "whsec_", secret(24, 1, false), secret(64, 2, true), "whsec_====", "whsec_\n\n", "whsec_A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidSecret(s)
		if err == nil {
			if _, err := Sign([]string{s}, "id", time.Unix(0, 0), []byte(s)); err != nil {
				t.Errorf("ValidSecret accepts %q, Sign refuses: %v", s, err)
			}
		}
	})
}

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"", "https://example.com/", "http://[::1]:80/", "http://localhost/", "https://u@h/#f", "https://%zz", "http://[fe80::1%25eth0]/"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, raw string, loopback bool) {
		u, err := CheckURL(raw, loopback)
		if err != nil {
			return
		}
		if u.Scheme != "https" && !(loopback && u.Scheme == "http") {
			t.Errorf("CheckURL(%q, %v) accepts scheme %q", raw, loopback, u.Scheme)
		}
		if u.Host == "" || u.User != nil || u.Fragment != "" || len(raw) > 2048 {
			t.Errorf("CheckURL(%q) accepts %#v", raw, u)
		}
	})
}
