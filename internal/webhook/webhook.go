// Package webhook is the sending side of MCP Events webhooks: it checks
// the URL and secrets of a subscription, signs each delivery as Standard
// Webhooks prescribe (webhook-id, webhook-timestamp and webhook-signature
// headers, HMAC-SHA256 with whsec_ secrets), POSTs it with a client that
// refuses private destinations at connect time, and runs the endpoint
// verification handshake.
package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/mcptask/mcptask/internal/httpguard"
)

// DefaultTimeout is the time an attempt may take when [Options.Timeout]
// is zero.
const DefaultTimeout = 10 * time.Second

const (
	secretPrefix   = "whsec_"
	minSecretBytes = 24
	maxSecretBytes = 64
	maxURLBytes    = 2048
	defaultMaxBody = 4096
	userAgent      = "mcptask-webhooks/1"
	subscriptionID = "X-MCP-Subscription-Id"
)

// The categories of an [Error].
const (
	catConnectionRefused = "connection_refused"
	catTimeout           = "timeout"
	catTLS               = "tls_error"
	cat4xx               = "http_4xx"
	cat5xx               = "http_5xx"
	catRedirect          = "redirect"
	catBlocked           = "blocked_address"
	catChallenge         = "challenge_failed"
	catRequest           = "request_error"
)

// ValidSecret reports whether s is a Standard Webhooks symmetric secret:
// the prefix "whsec_" followed by standard base64 (padded or not) of 24
// to 64 bytes. The error says what is wrong without repeating s.
func ValidSecret(s string) error {
	_, err := decodeSecret(s)
	return err
}

// decodeSecret is the key of the secret s, checked as [ValidSecret] says.
func decodeSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, errors.New(`webhook secret must start with "whsec_"`)
	}
	if rest == "" {
		return nil, errors.New(`webhook secret has nothing after "whsec_"`)
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return nil, errors.New(`webhook secret after "whsec_" must be standard base64 (A-Z, a-z, 0-9, "+", "/", "=" padding)`)
		}
	}
	enc := base64.RawStdEncoding
	if strings.HasSuffix(rest, "=") {
		enc = base64.StdEncoding
	}
	key, err := enc.DecodeString(rest)
	if err != nil {
		return nil, errors.New(`webhook secret after "whsec_" is not valid base64`)
	}
	if len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return nil, fmt.Errorf(`webhook secret after "whsec_" decodes to %d bytes; it must decode to %d to %d bytes`, len(key), minSecretBytes, maxSecretBytes)
	}
	return key, nil
}

// CheckURL checks the webhook URL raw when a subscription is made: an
// absolute https URL with a host, without userinfo or fragment, of at
// most 2048 bytes. Plain http is allowed only when allowPlainLoopback is
// true and the host is localhost or a loopback IP literal. CheckURL does
// not resolve the host: the addresses a delivery may connect to are
// checked when it connects (see [New]). The error says, in words, what is
// wrong.
func CheckURL(raw string, allowPlainLoopback bool) (*url.URL, error) {
	if len(raw) > maxURLBytes {
		return nil, fmt.Errorf("webhook URL is %d bytes long; at most %d are allowed", len(raw), maxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("webhook URL is not a valid URL: %v", err)
	}
	if !u.IsAbs() {
		return nil, errors.New("webhook URL must be absolute (https://host/path)")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("webhook URL has no host")
	}
	if u.User != nil {
		return nil, errors.New("webhook URL must not contain a user name or password")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, errors.New("webhook URL must not contain a fragment (#...)")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !allowPlainLoopback {
			return nil, errors.New("webhook URL must use https")
		}
		if !httpguard.IsLoopbackHost(u.Hostname()) {
			return nil, errors.New("webhook URL must use https; plain http is allowed only for localhost and loopback addresses")
		}
	default:
		return nil, fmt.Errorf("webhook URL must use https, not %q", u.Scheme)
	}
	return u, nil
}

// Options configure a [Sender].
type Options struct {
	// Timeout bounds each attempt: connecting, the TLS handshake, sending
	// and reading the answer. Zero means DefaultTimeout.
	Timeout time.Duration
	// AllowPrivate lets deliveries connect to loopback, private and other
	// addresses that are not globally routable. It is meant for tests.
	AllowPrivate bool
	// MaxBody is the most bytes of an answer that are read. Zero means
	// 4096.
	MaxBody int
}

// A Sender delivers signed webhook requests. Its methods may be called
// concurrently; it reuses connections between deliveries.
type Sender struct {
	client  *http.Client
	maxBody int
}

// New returns a Sender configured by o. Unless o.AllowPrivate is set, the
// Sender connects only to globally routable addresses: the check is made
// on the address being connected to, after DNS resolution, so a name that
// resolves (or re-resolves) to a private address is refused. The Sender
// follows no redirects, uses no proxy and requires TLS 1.2 or later.
func New(o Options) *Sender {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxBody := o.MaxBody
	if maxBody <= 0 {
		maxBody = defaultMaxBody
	}
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !o.AllowPrivate {
		dialer.Control = controlDial
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &Sender{
		client: &http.Client{
			Transport: transport,
			Timeout:   timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		maxBody: maxBody,
	}
}

// Message is one delivery.
type Message struct {
	// URL is the endpoint, checked by CheckURL when subscribing.
	URL string
	// ID is the webhook-id: the same for every attempt of an event.
	ID string
	// SubscriptionID is sent as the X-MCP-Subscription-Id header.
	SubscriptionID string
	// Secrets are the whsec_ secrets of the subscription. Each one signs,
	// so that an endpoint rotating its secret accepts either.
	Secrets []string
	// Body is the JSON payload.
	Body []byte
	// Now gives the time of the attempt (the webhook-timestamp); nil
	// means time.Now.
	Now func() time.Time
}

// Error is the failure of a delivery or a verification. Its text holds
// only the category and the HTTP status, never a secret nor anything the
// endpoint answered.
type Error struct {
	// Category is one of connection_refused (the endpoint could not be
	// reached: refused, unresolvable, unroutable), timeout, tls_error,
	// http_4xx, http_5xx, redirect (a 3xx answer, never followed),
	// blocked_address (the destination is not globally routable),
	// challenge_failed (the endpoint answered the verification but did not
	// echo its challenge) or request_error (anything else, such as an
	// invalid Message).
	Category string
	// Status is the HTTP status of the answer, or zero when there was
	// none.
	Status int
	// Retryable reports whether a later attempt may succeed. It is false
	// for 413 (the event is too large for the endpoint) and for an invalid
	// Message; true otherwise.
	Retryable bool
}

// Error says the category and the status.
func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("webhook delivery failed: %s (HTTP %d)", e.Category, e.Status)
	}
	return "webhook delivery failed: " + e.Category
}

// Sign returns the webhook-signature header of the message id sent at ts
// with body: "v1,<base64 HMAC-SHA256>" for each of secrets, separated by
// spaces. It fails when secrets is empty or one of them is not valid (see
// [ValidSecret]).
func Sign(secrets []string, id string, ts time.Time, body []byte) (string, error) {
	if len(secrets) == 0 {
		return "", errors.New("no webhook secret to sign with")
	}
	sigs := make([]string, 0, len(secrets))
	for i, s := range secrets {
		key, err := decodeSecret(s)
		if err != nil {
			return "", fmt.Errorf("webhook secret %d: %w", i+1, err)
		}
		wh, err := standardwebhooks.NewWebhookRaw(key)
		if err != nil {
			return "", fmt.Errorf("webhook secret %d: %w", i+1, err)
		}
		sig, err := wh.Sign(id, ts, body)
		if err != nil {
			return "", fmt.Errorf("webhook secret %d: %w", i+1, err)
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// Send delivers m once: it POSTs m.Body, signed with every secret of
// m.Secrets, to m.URL. It returns nil for a 2xx answer and an *[Error]
// otherwise. At most MaxBody bytes of the answer are read.
func (s *Sender) Send(ctx context.Context, m Message) error {
	status, _, err := s.post(ctx, m, false)
	if err != nil {
		return err
	}
	if status >= 200 && status <= 299 {
		return nil
	}
	return statusError(status)
}

// Verify runs the endpoint verification handshake of a subscription: it
// POSTs a signed control envelope {"type":"verification","challenge":N},
// N being 32 random bytes in base64url, and the endpoint must answer 2xx
// with the JSON {"challenge":N}. An endpoint that could not be reached
// fails with the category of the connection failure (blocked_address,
// connection_refused, timeout, tls_error, ...); an endpoint that answered
// anything else, including a status other than 2xx (kept in
// [Error.Status]), fails with challenge_failed.
func (s *Sender) Verify(ctx context.Context, rawURL, subscriptionID string, secrets []string) error {
	var nonce [32]byte
	var idBytes [16]byte
	_, _ = rand.Read(nonce[:])
	_, _ = rand.Read(idBytes[:])
	challenge := base64.RawURLEncoding.EncodeToString(nonce[:])
	body, err := json.Marshal(struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}{"verification", challenge})
	if err != nil {
		return &Error{Category: catRequest}
	}
	status, answer, err := s.post(ctx, Message{
		URL:            rawURL,
		ID:             "msg_verification_" + hex.EncodeToString(idBytes[:]),
		SubscriptionID: subscriptionID,
		Secrets:        secrets,
		Body:           body,
	}, true)
	if err != nil {
		return err
	}
	failed := &Error{Category: catChallenge, Status: status, Retryable: true}
	if status < 200 || status > 299 {
		return failed
	}
	var echo struct {
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(answer, &echo) != nil {
		return failed
	}
	if subtle.ConstantTimeCompare([]byte(echo.Challenge), []byte(challenge)) != 1 {
		return failed
	}
	return nil
}

// post sends m once and returns the status of the answer and, when
// keep is set, at most maxBody bytes of it.
func (s *Sender) post(ctx context.Context, m Message, keep bool) (int, []byte, error) {
	invalid := &Error{Category: catRequest}
	// Plain http passes here only for a loopback host, which the dialer
	// refuses unless AllowPrivate.
	u, err := CheckURL(m.URL, true)
	if err != nil {
		return 0, nil, invalid
	}
	if m.ID == "" || !validHeaderValue(m.ID) || !validHeaderValue(m.SubscriptionID) {
		return 0, nil, invalid
	}
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	ts := now()
	sig, err := Sign(m.Secrets, m.ID, ts, m.Body)
	if err != nil {
		return 0, nil, invalid
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(m.Body))
	if err != nil {
		return 0, nil, invalid
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(standardwebhooks.HeaderWebhookID, m.ID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	if m.SubscriptionID != "" {
		req.Header.Set(subscriptionID, m.SubscriptionID)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, classify(err)
	}
	defer resp.Body.Close()
	limited := io.LimitReader(resp.Body, int64(s.maxBody))
	if !keep {
		_, _ = io.Copy(io.Discard, limited)
		return resp.StatusCode, nil, nil
	}
	answer, err := io.ReadAll(limited)
	if err != nil {
		// The status arrived but the answer did not: the handshake failed
		// for the reason the answer was cut.
		return 0, nil, classify(err)
	}
	return resp.StatusCode, answer, nil
}

// validHeaderValue reports whether v may be sent as a header value: no
// control characters but tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// statusError is the failure of a non-2xx answer.
func statusError(status int) *Error {
	switch {
	case status >= 300 && status <= 399:
		return &Error{Category: catRedirect, Status: status, Retryable: true}
	case status == http.StatusRequestEntityTooLarge || status == http.StatusGone:
		// Final for this event (the Events design): 413 will not fit
		// next time, 410 says the endpoint wants no more.
		return &Error{Category: cat4xx, Status: status, Retryable: false}
	case status >= 400 && status <= 499:
		return &Error{Category: cat4xx, Status: status, Retryable: true}
	case status >= 500 && status <= 599:
		return &Error{Category: cat5xx, Status: status, Retryable: true}
	default:
		return &Error{Category: catRequest, Status: status, Retryable: true}
	}
}

// classify is the failure of an attempt that got no answer.
func classify(err error) *Error {
	cat := catRequest
	var blocked *blockedError
	var opErr *net.OpError
	var netErr net.Error
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var alertErr tls.AlertError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	switch {
	case errors.As(err, &blocked):
		cat = catBlocked
	case errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		cat = catTimeout
	case errors.As(err, &certErr), errors.As(err, &recordErr), errors.As(err, &alertErr),
		errors.As(err, &unknownAuth), errors.As(err, &hostErr), errors.As(err, &invalidCert),
		strings.Contains(err.Error(), "tls: "):
		cat = catTLS
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &dnsErr),
		errors.As(err, &opErr) && opErr.Op == "dial":
		cat = catConnectionRefused
	}
	return &Error{Category: cat, Retryable: true}
}
