// Package jobservice is an HTTP job API for tests: it keeps its jobs in a
// JSON file (so they survive its own restarts) and honours the
// Idempotency-Key header of a start (same key, same job):
//
//	svc, err := jobservice.Open(filepath.Join(dir, "jobs.json"), "s3cret")
//	...
//	hs := httptest.NewServer(svc.Handler())
//
// The API, as the HTTP job tools of package source/httpjob see it:
//
//	POST /jobs                  start a job; the body is kept as its params;
//	                            201 {"id","state":"running",...}, or 200 with
//	                            the same job for a key already seen; a body
//	                            {"reject":"why"} is refused: 422 {"error":{"message":"why"}}
//	GET  /jobs/{id}             {"id","state","progress","error":{"message"},"output"}
//	GET  /jobs/{id}/result      {"data": output} once succeeded, else 409
//	POST /jobs/{id}/cancel      cancels a running job
//	POST /rpc                   JSON-RPC 2.0, as CI servers speak it:
//	                            {"method":"cancel","params":{"id":ID}} cancels
//	                            a running job; a body that is not such a
//	                            request is refused with 400
//
// It also speaks a CI server's API (modelled on a real one's REST and
// JSON-RPC API: numbered build requests, a build found by a second
// request, a plain-text log, numeric results, a cancel that needs a
// JSON-RPC body):
//
//	POST /ci/forceschedulers/{name}   JSON-RPC {"method":"force","params":{...}}:
//	                                  {"result":[BRID,{...}]}; no idempotency keys
//	GET  /ci/buildrequests/{brid}     {"buildrequests":[{"buildrequestid","complete","results"}]}:
//	                                  results null while running, then 0 (success),
//	                                  2 (failure) or 6 (cancelled)
//	GET  /ci/buildrequests/{brid}/builds  {"builds":[]} until the build started (the
//	                                  second status request), then [{"buildid","number"}]
//	GET  /ci/builds/{buildid}         {"builds":[{"buildid","state_string"}]}: why it failed
//	GET  /ci/builds/{buildid}/steps/work/logs/stdio/raw  the log, text/plain (Range honoured)
//	POST /ci/buildrequests/{brid}     JSON-RPC {"method":"cancel"}; anything else 400
//
// and a test hook: POST /test/jobs/{id}/log (body: text appended to the log).
//
// With a token, every /jobs request needs "Authorization: Bearer TOKEN"
// (else 401). The test hooks, without a token: POST
// /test/jobs/{id}/finish (body: the output), /fail ({"error"}), /progress
// ({"progress"}), /state ({"state"}: any value, for a status that maps to
// nothing), POST /test/hold ({"on":true}: the next start requests create
// their job, then wait without answering until the client goes away or
// the hold is lifted), GET /test/stats (the whole state).
//
// The program in cmd/jobservice serves it on loopback as a process of its
// own.
package jobservice

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Job is one job of the service.
type Job struct {
	ID       string          `json:"id"`
	Key      string          `json:"key,omitempty"`
	Params   json.RawMessage `json:"params,omitempty"`
	State    string          `json:"state"`
	Progress string          `json:"progress,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	Error    string          `json:"error,omitempty"`
	// Num numbers the job (its build request's ID on the CI API); Log is
	// its text log; Polls counts its status requests on the CI API.
	Num   int    `json:"num,omitempty"`
	Log   string `json:"log,omitempty"`
	Polls int    `json:"polls,omitempty"`
}

// State is everything the service keeps in its file.
type State struct {
	// Next numbers the jobs.
	Next int `json:"next"`
	// Jobs by ID; Keys maps an idempotency key to its job's ID.
	Jobs map[string]*Job   `json:"jobs"`
	Keys map[string]string `json:"keys"`
	// StartRequests counts the start requests received (a retry with a
	// known key too); Created counts the jobs created; Cancels the
	// cancel requests received.
	StartRequests int `json:"startRequests"`
	Created       int `json:"created"`
	Cancels       int `json:"cancels"`
	// Held counts the start requests held by /test/hold so far.
	Held int `json:"held"`
	// StatusRequests counts the status requests of known jobs.
	StatusRequests int `json:"statusRequests"`
	// RPCContentType is the Content-Type of the last JSON-RPC request.
	RPCContentType string `json:"rpcContentType,omitempty"`
}

// Service is the job API.
type Service struct {
	file  string
	token string

	mu      sync.Mutex
	st      State
	hold    bool
	release chan struct{} // closed when the hold is lifted
}

// Open opens the service on the state file (created if missing). With a
// token, the API's requests must carry it as a bearer token.
func Open(file, token string) (*Service, error) {
	s := &Service{file: file, token: token, release: make(chan struct{})}
	s.st = State{Jobs: map[string]*Job{}, Keys: map[string]string{}}
	b, err := os.ReadFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &s.st); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	return s, nil
}

// saveLocked writes the state to its file, atomically.
func (s *Service) saveLocked() error {
	b, err := json.MarshalIndent(&s.st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(s.file), "."+filepath.Base(s.file)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.file)
}

// Handler serves the API and the test hooks.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs", s.authed(s.start))
	mux.HandleFunc("GET /jobs/{id}", s.authed(s.status))
	mux.HandleFunc("GET /jobs/{id}/result", s.authed(s.result))
	mux.HandleFunc("POST /jobs/{id}/cancel", s.authed(s.cancel))
	mux.HandleFunc("POST /rpc", s.authed(s.rpc))
	mux.HandleFunc("POST /ci/forceschedulers/{name}", s.authed(s.ciForce))
	mux.HandleFunc("GET /ci/buildrequests/{brid}", s.authed(s.ciBuildRequest))
	mux.HandleFunc("POST /ci/buildrequests/{brid}", s.authed(s.ciCancel))
	mux.HandleFunc("GET /ci/buildrequests/{brid}/builds", s.authed(s.ciBuilds))
	mux.HandleFunc("GET /ci/builds/{buildid}", s.authed(s.ciBuild))
	mux.HandleFunc("GET /ci/builds/{buildid}/steps/work/logs/stdio/raw", s.authed(s.ciLog))
	mux.HandleFunc("POST /test/jobs/{id}/{op}", s.hook)
	mux.HandleFunc("POST /test/hold", s.setHold)
	mux.HandleFunc("GET /test/stats", s.stats)
	return mux
}

func (s *Service) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"message": "missing or wrong bearer token"}})
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// view is a job as the API shows it.
func view(j *Job) map[string]any {
	v := map[string]any{"id": j.ID, "state": j.State, "progress": j.Progress}
	if j.Error != "" {
		v["error"] = map[string]any{"message": j.Error}
	}
	if len(j.Output) > 0 {
		v["output"] = j.Output
	}
	return v
}

func (s *Service) start(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	var params map[string]any
	if err := json.Unmarshal(body, &params); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "the body is not a JSON object"}})
		return
	}
	if why, ok := params["reject"].(string); ok {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": map[string]any{"message": why}})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	s.st.StartRequests++
	code := http.StatusCreated
	var j *Job
	if id, ok := s.st.Keys[key]; ok && key != "" {
		j, code = s.st.Jobs[id], http.StatusOK
	} else {
		s.st.Next++
		s.st.Created++
		j = &Job{ID: fmt.Sprintf("job-%d", s.st.Next), Num: s.st.Next, Key: key, Params: body, State: "running", Progress: "queued"}
		s.st.Jobs[j.ID] = j
		if key != "" {
			s.st.Keys[key] = j.ID
		}
	}
	hold, release := s.hold, s.release
	if hold {
		s.st.Held++
	}
	err = s.saveLocked()
	v := view(j)
	s.mu.Unlock()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{"message": err.Error()}})
		return
	}
	if hold {
		// The job exists; the answer waits (the client may die meanwhile).
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	writeJSON(w, code, v)
}

func (s *Service) job(w http.ResponseWriter, r *http.Request) *Job {
	j := s.st.Jobs[r.PathValue("id")]
	if j == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "no such job"}})
	}
	return j
}

func (s *Service) status(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.job(w, r); j != nil {
		s.st.StatusRequests++
		writeJSON(w, http.StatusOK, view(j))
	}
}

func (s *Service) result(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.job(w, r)
	switch {
	case j == nil:
	case j.State != "succeeded":
		writeJSON(w, http.StatusConflict, map[string]any{"error": map[string]any{"message": "the job has not succeeded"}})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"data": j.Output})
	}
}

func (s *Service) cancel(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.job(w, r)
	if j == nil {
		return
	}
	s.st.Cancels++
	if j.State == "running" {
		j.State, j.Progress = "cancelled", "cancelled on request"
	}
	if err := s.saveLocked(); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{"message": err.Error()}})
		return
	}
	writeJSON(w, http.StatusOK, view(j))
}

// rpc serves the JSON-RPC endpoint: the method cancel.
// rpcRequest is a JSON-RPC 2.0 request to the service.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// readRPC reads a JSON-RPC 2.0 request (of method, unless ""), or answers
// 400 and returns false.
func readRPC(w http.ResponseWriter, r *http.Request, method string) (rpcRequest, bool) {
	var in rpcRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in.JSONRPC != "2.0" || (method != "" && in.Method != method) {
		what := "a JSON-RPC 2.0 request"
		if method != "" {
			what = "a JSON-RPC 2.0 " + method + " request"
		}
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "not " + what}})
		return in, false
	}
	return in, true
}

func (s *Service) rpc(w http.ResponseWriter, r *http.Request) {
	in, ok := readRPC(w, r, "")
	if !ok {
		return
	}
	var params struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(in.Params, &params)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.RPCContentType = r.Header.Get("Content-Type")
	j := s.st.Jobs[params.ID]
	if in.Method != "cancel" || j == nil {
		writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": in.ID,
			"error": map[string]any{"code": -32602, "message": "unknown method or job"}})
		return
	}
	s.st.Cancels++
	if j.State == "running" {
		j.State, j.Progress = "cancelled", "cancelled on request"
	}
	if err := s.saveLocked(); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{"message": err.Error()}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": in.ID, "result": view(j)})
}

func (s *Service) hook(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var in struct {
		Error, Progress, State string
	}
	_ = json.Unmarshal(body, &in)
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.job(w, r)
	if j == nil {
		return
	}
	switch r.PathValue("op") {
	case "finish":
		if !json.Valid(body) {
			http.Error(w, "the output is not JSON", http.StatusBadRequest)
			return
		}
		j.State, j.Output, j.Progress = "succeeded", body, "done"
	case "fail":
		j.State, j.Error, j.Progress = "failed", in.Error, "failed"
	case "progress":
		j.Progress = in.Progress
	case "state":
		j.State = in.State
	case "log":
		j.Log += string(body)
	default:
		http.NotFound(w, r)
		return
	}
	if err := s.saveLocked(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, view(j))
}

func (s *Service) setHold(w http.ResponseWriter, r *http.Request) {
	var in struct{ On bool }
	_ = json.NewDecoder(r.Body).Decode(&in)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold && !in.On {
		close(s.release)
		s.release = make(chan struct{})
	}
	s.hold = in.On
	w.WriteHeader(http.StatusNoContent)
}

func (s *Service) stats(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, &s.st)
}

// Stats returns a copy of the service's state.
func (s *Service) Stats() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(&s.st)
	var st State
	_ = json.Unmarshal(b, &st)
	return st
}

// JobOf returns the job ID of key, "" if the service has not seen it.
func (st State) JobOf(key string) string { return st.Keys[strings.TrimSpace(key)] }

// ciResults are the CI API's numeric results of the job states.
var ciResults = map[string]int{"succeeded": 0, "failed": 2, "cancelled": 6}

// ciJob returns the job of the build request (or build, from) in the
// path value name, writing a 404 when there is none.
func (s *Service) ciJob(w http.ResponseWriter, r *http.Request, name string, build bool) *Job {
	n := 0
	_, _ = fmt.Sscanf(r.PathValue(name), "%d", &n)
	if build {
		n -= ciBuildBase
	}
	j := s.st.Jobs[fmt.Sprintf("job-%d", n)]
	if j == nil || (build && j.Polls < 2) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such build request or build"})
		return nil
	}
	return j
}

// ciBuildBase numbers a job's build: ciBuildBase + its build request's.
const ciBuildBase = 100

func (s *Service) ciForce(w http.ResponseWriter, r *http.Request) {
	in, ok := readRPC(w, r, "force")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.StartRequests++
	s.st.Next++
	s.st.Created++
	j := &Job{ID: fmt.Sprintf("job-%d", s.st.Next), Num: s.st.Next, Params: in.Params, State: "running"}
	s.st.Jobs[j.ID] = j
	if err := s.saveLocked(); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": in.ID,
		"result": []any{j.Num, map[string]any{"builder": r.PathValue("name")}}})
}

func (s *Service) ciBuildRequest(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.ciJob(w, r, "brid", false)
	if j == nil {
		return
	}
	j.Polls++
	s.st.StatusRequests++
	br := map[string]any{"buildrequestid": j.Num, "complete": false, "results": nil}
	if res, ok := ciResults[j.State]; ok {
		br["complete"], br["results"] = true, res
	}
	writeJSON(w, http.StatusOK, map[string]any{"buildrequests": []any{br}})
}

func (s *Service) ciBuilds(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.ciJob(w, r, "brid", false)
	if j == nil {
		return
	}
	builds := []any{}
	if j.Polls >= 2 { // the build starts a while after its request
		builds = append(builds, map[string]any{"buildid": ciBuildBase + j.Num, "number": j.Num})
	}
	writeJSON(w, http.StatusOK, map[string]any{"builds": builds})
}

func (s *Service) ciBuild(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.ciJob(w, r, "buildid", true); j != nil {
		state := "building"
		switch j.State {
		case "failed":
			state = "failed " + j.Error
		case "cancelled":
			state = "cancelled by request"
		case "succeeded":
			state = "build successful"
		}
		writeJSON(w, http.StatusOK, map[string]any{"builds": []any{map[string]any{"buildid": ciBuildBase + j.Num, "state_string": state}}})
	}
}

func (s *Service) ciLog(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	j := s.ciJob(w, r, "buildid", true)
	var log string
	if j != nil {
		log = j.Log
	}
	s.mu.Unlock()
	if j == nil {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var from int
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &from); err == nil {
		if from >= len(log) {
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(log)-1, len(log)))
		w.WriteHeader(http.StatusPartialContent)
		_, _ = io.WriteString(w, log[from:])
		return
	}
	_, _ = io.WriteString(w, log)
}

func (s *Service) ciCancel(w http.ResponseWriter, r *http.Request) {
	in, ok := readRPC(w, r, "cancel")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.ciJob(w, r, "brid", false)
	if j == nil {
		return
	}
	s.st.Cancels++
	if j.State == "running" {
		j.State = "cancelled"
	}
	if err := s.saveLocked(); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": in.ID, "result": true})
}
