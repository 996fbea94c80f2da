package command

import (
	"bufio"
	"os"
	"strings"
	"sync"
	"unicode/utf8"
)

// taskLog is a command's output: the last bytes in memory (a ring of a
// fixed size, whatever the output's size), and optionally the whole
// stream in a file.
type taskLog struct {
	mu    sync.Mutex
	ring  []byte // len == cap once full
	next  int    // where the next byte goes once the ring is full
	full  bool
	total int64
	file  *os.File
	fw    *bufio.Writer
	ferr  error // the first write error of the file; it is then dropped
}

func newTaskLog(tail int, file *os.File) *taskLog {
	l := &taskLog{ring: make([]byte, 0, tail), file: file}
	if file != nil {
		l.fw = bufio.NewWriterSize(file, 32<<10)
	}
	return l
}

// Write adds p to the log; it never fails (the file's errors are kept
// for closeFile).
func (l *taskLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	written := len(p)
	l.total += int64(written)
	if l.fw != nil && l.ferr == nil {
		if _, err := l.fw.Write(p); err != nil {
			l.ferr = err
		}
	}
	n := cap(l.ring)
	if n == 0 {
		return len(p), nil
	}
	if len(p) >= n {
		l.ring = append(l.ring[:0], p[len(p)-n:]...)
		l.next, l.full = 0, true
		return len(p), nil
	}
	if !l.full {
		room := n - len(l.ring)
		if len(p) <= room {
			l.ring = append(l.ring, p...)
			return len(p), nil
		}
		l.ring = append(l.ring, p[:room]...)
		p = p[room:]
		l.full, l.next = true, 0
	}
	for len(p) > 0 {
		c := copy(l.ring[l.next:], p)
		p = p[c:]
		l.next = (l.next + c) % n
	}
	return written, nil
}

// tail returns the bytes kept and how many came before them; the text
// starts at a character boundary and is valid UTF-8.
func (l *taskLog) tail() (string, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b []byte
	if l.full {
		b = append(append(make([]byte, 0, len(l.ring)), l.ring[l.next:]...), l.ring[:l.next]...)
	} else {
		b = append([]byte(nil), l.ring...)
	}
	dropped := l.total - int64(len(b))
	if dropped > 0 {
		// Cut a character the ring split.
		for k := 0; k < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); k++ {
			b, dropped = b[1:], dropped+1
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), dropped
}

// closeFile flushes and closes the file, returning its first error.
func (l *taskLog) closeFile() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	if l.ferr == nil {
		l.ferr = l.fw.Flush()
	}
	if err := l.file.Close(); l.ferr == nil {
		l.ferr = err
	}
	l.file, l.fw = nil, nil
	return l.ferr
}
