package httpedge

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// The go-sdk's JSON, as the fast lanes read and write it.

// plainObject reports whether body is a JSON object (never a batch)
// whose nesting is well within the go-sdk's bound of 1000, as the lanes
// require before they decode it.
func plainObject(body []byte) bool {
	i := bytes.IndexFunc(body, func(r rune) bool { return !strings.ContainsRune(" \t\r\n", r) })
	return i >= 0 && body[i] == '{' && bytes.Count(body, []byte("{"))+bytes.Count(body, []byte("[")) <= 1000
}

// wireDecode is the shape jsonrpc.DecodeMessage decodes a message into.
type wireDecode struct {
	VersionTag string          `json:"jsonrpc"`
	ID         any             `json:"id,omitempty"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *jsonrpc.Error  `json:"error,omitempty"`
}

// decodeRequest decodes body, one valid JSON value, as
// jsonrpc.DecodeMessage does, and returns it if it is a request. It is
// jsonrpc.DecodeMessage step by step, with the same decoder, less the
// 32 KiB buffer the go-sdk's decoder allocates per call before it parses
// (body is one value already): the heaviest allocation of a tasks/get.
func decodeRequest(body []byte) (*jsonrpc.Request, bool) {
	if !json.Valid(body) {
		return nil, false
	}
	var msg wireDecode
	if sdkUnmarshal(body, &msg) != nil || msg.VersionTag != "2.0" || len(msg.Method) == 0 {
		return nil, false
	}
	id, err := jsonrpc.MakeID(msg.ID)
	if err != nil {
		return nil, false
	}
	var method string
	if sdkUnmarshal(msg.Method, &method) != nil {
		return nil, false
	}
	return &jsonrpc.Request{Method: method, ID: id, Params: msg.Params}, true
}

// laneDecoder decodes the params of a fast-lane method into the shape the
// go-sdk decodes them into (the server registers each tasks/* method with
// the params of both wires' shapes), and returns the request the go-sdk
// would hand the middleware, of session ss (nil on 2026-07-28: the
// default requester of a stateless request does not depend on its
// temporary session). ok is false when the params do not decode, or are
// null.
type laneDecoder func(raw json.RawMessage, extra *mcp.RequestExtra, ss *mcp.ServerSession) (p mcp.Params, req mcp.Request, ok bool)

func laneParams[T any, P interface {
	*T
	mcp.Params
}](raw json.RawMessage, extra *mcp.RequestExtra, ss *mcp.ServerSession) (mcp.Params, mcp.Request, bool) {
	var p P
	if sdkUnmarshal(raw, &p) != nil || p == nil {
		return nil, nil, false
	}
	return p, &mcp.ServerRequest[P]{Session: ss, Params: p, Extra: extra}, true
}

// marshalNoEscape marshals v as the go-sdk's jsonrpc2 codec does: without
// HTML escaping.
func marshalNoEscape(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// sdkUnmarshal decodes data, one JSON value, into v as the go-sdk
// decodes params: case-sensitively, with the decoder the go-sdk uses.
// The go-sdk's decoder reads the value into a buffer of its own (32 KiB
// at least, per call) before it parses it; data being one value already,
// it is parsed as it is.
func sdkUnmarshal(data []byte, v any) error {
	_, err := segjson.Parse(data, v, segjson.DontMatchCaseInsensitiveStructFields)
	return err
}

// remarshal is the go-sdk's: from through its JSON into to.
func remarshal(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return sdkUnmarshal(data, to)
}
