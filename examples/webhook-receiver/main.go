// Command webhook-receiver is a small receiver of mcptaskd's MCP Events
// webhooks, meant to be copied and adapted. It depends only on the
// standard library and the Standard Webhooks Go library, which checks the
// signatures.
//
// # Usage
//
// Make a secret (whsec_ followed by base64 of 24 to 64 random bytes) and
// start the receiver with it:
//
//	printf 'whsec_%s\n' "$(head -c 32 /dev/urandom | base64)" > secret.txt
//	go run ./examples/webhook-receiver -addr 127.0.0.1:8787 -secret-file secret.txt > events.jsonl
//
// (or give the secret in MCPTASK_WEBHOOK_SECRET instead of -secret-file).
// Then subscribe through mcptaskd with the MCP request events/subscribe,
// giving this receiver's URL and the same secret in its delivery, along
// these lines (mcptaskd's documentation has the exact parameters):
//
//	{"jsonrpc":"2.0","id":1,"method":"events/subscribe","params":{
//	  "name":"task.status","arguments":{},
//	  "delivery":{"mode":"webhook","url":"https://hooks.example.com/mcp-events",
//	              "secret":"whsec_..."}}}
//
// mcptaskd delivers only to https URLs of public addresses; a receiver on
// 127.0.0.1 needs a server whose operator allows plain-HTTP loopback
// callbacks (as tests do), or a TLS-terminating proxy in front of it.
// mcptaskd first POSTs a verification envelope, which this receiver
// answers, and then one POST per event.
//
// # What a delivery looks like
//
// Each POST carries the headers webhook-id (the same on every retry of an
// event), webhook-timestamp (Unix seconds), webhook-signature ("v1,<base64
// HMAC-SHA256>" per secret, space-separated while a secret is rotated) and
// X-MCP-Subscription-Id, and a JSON body: an event
//
//	{"eventId":"evt_1","name":"task.status","timestamp":"2026-01-02T03:04:05Z","data":{...},"cursor":"..."}
//
// or a control envelope with a "type": "verification" (answered by
// echoing {"challenge":...}), "gap" (events were lost: catch up from the
// cursor with a pull) or "terminated" (the server ended the subscription).
//
// # What the receiver does
//
// It verifies each request over its raw body before parsing anything,
// refuses timestamps more than 5 minutes off (both done by the library),
// answers verification challenges, drops repeated webhook-ids (a bounded
// in-memory set: deliveries are at least once), and prints every accepted
// event or envelope as one JSON line on stdout:
//
//	{"webhookId":"evt_1","subscriptionId":"sub_...","receivedAt":"...","body":{...}}
//
// It answers 2xx only once that line is written, so a failed write makes
// the server deliver again. Rejections go to stderr, never with the
// secret. A real receiver would store the event durably (and remember
// webhook-ids there) where this one prints.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const (
	// maxBody is the largest request body accepted.
	maxBody = 1 << 20
	// maxSeen is how many accepted webhook-ids are remembered for
	// deduplication; the oldest are forgotten first.
	maxSeen = 10000
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8787", "address to listen on")
	secretFile := flag.String("secret-file", "", "file holding the whsec_ secret (default: $MCPTASK_WEBHOOK_SECRET)")
	flag.Parse()
	log.SetFlags(log.LstdFlags)
	log.SetPrefix("webhook-receiver: ")

	secret := os.Getenv("MCPTASK_WEBHOOK_SECRET")
	if *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			log.Fatalf("reading the secret: %v", err)
		}
		secret = string(b)
	}
	h, err := newHandler(secret, os.Stdout)
	if err != nil {
		log.Fatal(err)
	}

	srv := &http.Server{
		Addr:              *addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Printf("listening on http://%s/", *addr)
	select {
	case err := <-errc:
		log.Fatal(err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		log.Fatal(err)
	}
}

// newHandler returns the receiver's handler: it verifies each POST with
// secret (a whsec_ secret, padded base64 or not) and writes each accepted
// delivery as one JSON line to out.
func newHandler(secret string, out io.Writer) (http.Handler, error) {
	wh, err := newWebhook(strings.TrimSpace(secret))
	if err != nil {
		return nil, err
	}
	return &receiver{wh: wh, out: out, seen: make(map[string]struct{}, maxSeen), order: make([]string, maxSeen)}, nil
}

// newWebhook makes the verifier of secret. The library's NewWebhook
// wants padded base64; mcptaskd also accepts secrets without the padding.
// The errors never repeat the secret.
func newWebhook(secret string) (*standardwebhooks.Webhook, error) {
	rest, ok := strings.CutPrefix(secret, "whsec_")
	if !ok || rest == "" {
		return nil, errors.New(`the secret must be "whsec_" followed by base64`)
	}
	if wh, err := standardwebhooks.NewWebhook(secret); err == nil {
		return wh, nil
	}
	key, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return nil, errors.New(`the secret after "whsec_" is not valid base64`)
	}
	return standardwebhooks.NewWebhookRaw(key)
}

// receiver is the handler of newHandler.
type receiver struct {
	wh *standardwebhooks.Webhook

	mu    sync.Mutex // guards out, seen, order and next
	out   io.Writer
	seen  map[string]struct{}
	order []string // a ring of the webhook-ids in seen
	next  int      // where the next webhook-id goes in order
}

// envelope is the part of a body the receiver looks at.
type envelope struct {
	Type      string          `json:"type"`
	Challenge string          `json:"challenge"`
	Cursor    string          `json:"cursor"`
	Error     json.RawMessage `json:"error"`
}

// line is what is printed for each accepted delivery.
type line struct {
	WebhookID      string          `json:"webhookId"`
	SubscriptionID string          `json:"subscriptionId,omitempty"`
	ReceivedAt     time.Time       `json:"receivedAt"`
	Body           json.RawMessage `json:"body"`
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	id := r.Header.Get(standardwebhooks.HeaderWebhookID)
	sub := r.Header.Get("X-MCP-Subscription-Id")

	// 1. The raw body, as sent: the signature covers these exact bytes.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			rc.reject(w, r, id, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		rc.reject(w, r, id, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}

	// 2. Authenticity and freshness, before parsing anything: the library
	// checks the signature(s) and that webhook-timestamp is within 5
	// minutes of now.
	if err := rc.wh.Verify(body, r.Header); err != nil {
		rc.reject(w, r, id, http.StatusUnauthorized, err.Error())
		return
	}

	// 3. Only now parse.
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		rc.reject(w, r, id, http.StatusBadRequest, "body is not a JSON object")
		return
	}
	if env.Type == "verification" {
		// The handshake of events/subscribe: echo the challenge.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Challenge string `json:"challenge"`
		}{env.Challenge})
		log.Printf("answered the verification of subscription %q", sub)
		return
	}

	// 4. Record it (once per webhook-id), then answer 2xx.
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if _, dup := rc.seen[id]; dup {
		log.Printf("duplicate webhook-id %q (already recorded)", id)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// (Marshal compacts the body onto one line.)
	b, err := json.Marshal(line{WebhookID: id, SubscriptionID: sub, ReceivedAt: time.Now().UTC(), Body: body})
	if err == nil {
		b = append(b, '\n')
		_, err = rc.out.Write(b)
	}
	if err != nil {
		// Not recorded: a non-2xx answer makes the server try again.
		log.Printf("could not record webhook-id %q: %v", id, err)
		http.Error(w, "could not record the event", http.StatusInternalServerError)
		return
	}
	rc.remember(id)
	switch env.Type {
	case "gap":
		log.Printf("subscription %q: events were lost before cursor %q; catch up with a pull from there", sub, env.Cursor)
	case "terminated":
		log.Printf("subscription %q was terminated by the server: %s", sub, env.Error)
	}
	w.WriteHeader(http.StatusNoContent)
}

// remember adds id to the set of seen webhook-ids, forgetting the oldest
// past maxSeen. rc.mu is held.
func (rc *receiver) remember(id string) {
	if len(rc.seen) == len(rc.order) {
		delete(rc.seen, rc.order[rc.next])
	}
	rc.seen[id] = struct{}{}
	rc.order[rc.next] = id
	rc.next = (rc.next + 1) % len(rc.order)
}

// reject answers status and logs why, with the webhook-id and the peer
// (never the secret nor the body).
func (rc *receiver) reject(w http.ResponseWriter, r *http.Request, id string, status int, why string) {
	log.Printf("rejected webhook-id %q from %s: %d %s", id, r.RemoteAddr, status, why)
	http.Error(w, http.StatusText(status), status)
}

// The flag package's usage line, with a pointer to the doc above.
func init() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: webhook-receiver [-addr HOST:PORT] [-secret-file FILE]\n"+
			"Receives mcptaskd's MCP Events webhooks and prints each event as a JSON line (see go doc).\n")
		flag.PrintDefaults()
	}
}
