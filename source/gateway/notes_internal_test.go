package gateway

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// sseStream is an event stream of a log notification and an answer of
// size bytes.
func sseStream(size int) []byte {
	return []byte(`event: message` + "\n" + `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}` + "\n\n" +
		`event: message` + "\n" + `data: {"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"` + strings.Repeat("a", size) + `"}]}}` + "\n\n")
}

func TestCountingBody(t *testing.T) {
	var n notes
	b := &countingBody{ReadCloser: io.NopCloser(bytes.NewReader(sseStream(100))), n: &n}
	// Small reads: lines and events split across them.
	buf := make([]byte, 7)
	for {
		if _, err := b.Read(buf); err != nil {
			break
		}
	}
	if n.read != 1 {
		t.Errorf("counted %d notifications, want 1", n.read)
	}
	// An event too long to count, of several data lines, the last of
	// which alone would parse as a notification: nothing counted.
	long := "data: {\"x\":\"" + strings.Repeat("a", maxNoteEvent) + "\",\n" +
		`data: {"jsonrpc":"2.0","method":"notifications/message","params":{}}` + "\n\n"
	n = notes{}
	b = &countingBody{ReadCloser: io.NopCloser(strings.NewReader(long)), n: &n}
	// In one read, as in small ones.
	if _, err := b.Read(make([]byte, len(long))); err != nil || n.read != 0 {
		t.Errorf("an event too long: counted %d, %v", n.read, err)
	}
}

// BenchmarkCountingBody reads an answer of 1 MiB through countingBody.
func BenchmarkCountingBody(b *testing.B) {
	stream := sseStream(1 << 20)
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		var n notes
		cb := &countingBody{ReadCloser: io.NopCloser(bytes.NewReader(stream)), n: &n}
		for {
			if _, err := cb.Read(buf); err != nil {
				break
			}
		}
	}
}
