// Command jobservice serves the test job API of package jobservice on
// loopback, as a process of its own, for the tests of mcptaskd's HTTP job
// tools:
//
//	jobservice -addr 127.0.0.1:0 -state jobs.json
//
// It prints "listening on http://HOST:PORT" once it serves. The bearer
// token the API requires, if any, is read from JOBSERVICE_TOKEN.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/mcptask/mcptask/internal/testkit/jobservice"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback `address` to listen on")
	state := flag.String("state", "jobs.json", "`file` keeping the jobs")
	flag.Parse()
	svc, err := jobservice.Open(*state, os.Getenv("JOBSERVICE_TOKEN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobservice:", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobservice:", err)
		os.Exit(1)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	fmt.Fprintln(os.Stderr, http.Serve(ln, svc.Handler()))
	os.Exit(1)
}
