package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The browser tests drive a headless Chromium (Debian's chromium package)
// through the DevTools protocol. Without a browser they skip, loudly,
// unless MCPTASK_REQUIRE_BROWSER=1 (CI sets it): then they fail.

// browserWait is how long a browser test waits for a condition: long, as
// the machine may be slow under the race detector; a condition that holds
// ends the wait at once.
const browserWait = 60 * time.Second

// browser is a headless Chromium tab driven by a test.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu sync.Mutex
	// problems are the page's uncaught exceptions, console errors and
	// log entries of level error (CSP violations among them).
	problems []string
}

// chromiumPath returns the Chromium binary, or skips (fails with
// MCPTASK_REQUIRE_BROWSER=1) when there is none.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "!!! NO BROWSER: chromium is not installed (apt-get install chromium); the dashboard's browser tests did NOT run !!!"
	if os.Getenv("MCPTASK_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + " (MCPTASK_REQUIRE_BROWSER=1)")
	}
	t.Skip(msg)
	return ""
}

// newBrowser starts a headless Chromium with a 1280x800 window, stopped
// when the test ends, and returns its tab.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,AutofillServerCommunication"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(1280, 800),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx}
	// The browser lives as long as the context of its first action: ctx,
	// not one with a timeout.
	if err := chromedp.Do(ctx); err != nil { // starts the browser, opens the tab
		t.Fatalf("starting %s: %v", path, err)
	}
	if err := chromedp.Listen(ctx, b.record); err != nil {
		t.Fatal(err)
	}
	enableLog := func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{})
		return chromedp.Void{}, err
	}
	b.do("enabling the log domain", enableLog)
	return b
}

// record keeps the page's problems. It runs in chromedp's event loop:
// it only appends.
func (b *browser) record(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		p = "uncaught exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil && ev.ExceptionDetails.Exception.Description != "" {
			p += ": " + ev.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError {
			return
		}
		var parts []string
		for _, a := range ev.Args {
			parts = append(parts, string(a.Value)+a.Description)
		}
		p = "console.error: " + strings.Join(parts, " ")
	case *cdplog.EventEntryAdded:
		if ev.Entry == nil || ev.Entry.Level != cdplog.EntryLevelError {
			return
		}
		if strings.HasSuffix(ev.Entry.URL, "/favicon.ico") {
			return // the browser asks for it; mcptaskd has none
		}
		p = fmt.Sprintf("log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
	default:
		return
	}
	b.mu.Lock()
	b.problems = append(b.problems, p)
	b.mu.Unlock()
}

// noProblems fails the test if the page threw, logged an error or broke
// its Content-Security-Policy since the last call.
func (b *browser) noProblems() {
	b.t.Helper()
	b.mu.Lock()
	ps := b.problems
	b.problems = nil
	b.mu.Unlock()
	for _, p := range ps {
		b.t.Errorf("browser: %s", p)
	}
}

// do runs actions, failing the test on an error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// navigate loads url and waits for its load event.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.do("loading "+url, chromedp.Navigate(url))
}

// click clicks the first element matching the CSS selector sel, once it
// is visible. The click is the element's click() (which submits its form
// or follows its link as a user's click does), not a mouse event at the
// element's position: a live update re-rendering the page between
// chromedp's measuring the element and its mouse event could move it, and
// the click would land elsewhere.
func (b *browser) click(sel string) {
	b.t.Helper()
	el := fmt.Sprintf(`document.querySelector(%s)`, jsString(sel))
	b.waitJS(sel+" visible", el+` && `+el+`.checkVisibility()`)
	if !js[bool](b, `(() => { const e = `+el+`; e.scrollIntoView({block: "center"}); e.click(); return true; })()`) {
		b.t.Fatalf("browser: clicking %s failed", sel)
	}
}

// eval evaluates the JavaScript expression expr and decodes its value.
func eval[T any](b *browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// js evaluates expr, failing the test on an error.
func js[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := eval[T](b, expr)
	if err != nil {
		b.t.Fatalf("browser: evaluating %s: %v", expr, err)
	}
	return v
}

// waitJS waits until the JavaScript expression cond is true on the page
// (evaluated every 50ms; an error, as during a navigation, counts as
// false), failing the test after browserWait.
func (b *browser) waitJS(what, cond string) {
	b.t.Helper()
	deadline := time.Now().Add(browserWait)
	var last error
	for {
		ok, err := eval[bool](b, "!!("+cond+")")
		if err == nil && ok {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			url, _ := eval[string](b, "location.href")
			page, _ := eval[string](b, "document.body.innerText.slice(0, 2000)")
			b.t.Fatalf("browser: timed out after %v waiting for %s (%s) on %s; last error: %v; the page says:\n%s",
				browserWait, what, cond, url, last, page)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not synchronization
	}
}

// text returns the textContent of the first element matching sel ("" if
// there is none).
func (b *browser) text(sel string) string {
	b.t.Helper()
	return js[string](b, fmt.Sprintf(`(document.querySelector(%s) || {textContent: ""}).textContent`, jsString(sel)))
}

// screenshot saves a full-page PNG of the page as name under the test's
// artifact directory and, with MCPTASK_UPDATE_SCREENSHOTS=1, as
// docs/name in the repository.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	b.waitJS("the page loaded", `document.readyState === "complete" && document.documentElement.scrollWidth > 0`)
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		b.t.Fatalf("browser: screenshot %s: %v", name, err)
	}
	dir := b.t.ArtifactDir()
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s (%d bytes) in %s", name, len(png), dir)
	if os.Getenv("MCPTASK_UPDATE_SCREENSHOTS") == "1" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", name), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
		b.t.Logf("docs/%s updated", name)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// setValue sets the value of the first input matching sel.
func (b *browser) setValue(sel, value string) {
	b.t.Helper()
	b.do("setting "+sel, chromedp.SetValue(chromedp.CSS(sel), value))
}

// forgetProblems drops the problems recorded so far, expected ones (such
// as the 401 of a refused sign-in, which the browser logs as an error).
func (b *browser) forgetProblems() {
	b.mu.Lock()
	b.problems = nil
	b.mu.Unlock()
}
