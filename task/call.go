package task

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// CallDigest returns a digest of a tool call: the tool's name and the
// arguments of its params (the JSON of a tools/call's params; its _meta
// and other fields do not count), compared by value (object keys in any
// order, insignificant white space ignored). Two calls with the same digest
// are the same call: an idempotency key reused with another digest is a
// conflict, not a retry. Params that are not valid JSON digest as they are.
func CallDigest(tool string, params json.RawMessage) string {
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	args := []byte("null")
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			args = params
		} else if len(p.Arguments) > 0 {
			args = canonical(p.Arguments)
		}
	}
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(args)
	return hex.EncodeToString(h.Sum(nil))
}

// canonical re-encodes JSON with sorted object keys and no white space;
// numbers keep their spelling.
func canonical(raw json.RawMessage) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}
