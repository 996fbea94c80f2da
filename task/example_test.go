package task_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/task"
)

func ExampleNewID() {
	id := task.NewID()
	parsed, err := task.ParseID(string(id))
	fmt.Println(len(id), parsed == id, err)

	_, err = task.ParseID("no spaces allowed")
	fmt.Println(errors.Is(err, task.ErrMalformedID))
	// Output:
	// 32 true <nil>
	// true
}

func ExamplePolicy_TTL() {
	p := task.Policy{DefaultTTL: 30 * time.Minute, MaxTTL: 2 * time.Hour}

	fmt.Println(p.TTL(nil)) // the client asked for nothing

	asked := 90 * time.Minute
	fmt.Println(p.TTL(&asked))

	asked = 7 * 24 * time.Hour // never trusted beyond the maximum
	fmt.Println(p.TTL(&asked))
	// Output:
	// 30m0s
	// 1h30m0s
	// 2h0m0s
}
