package adapter

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptask/mcptask/wire"
)

// CheckAnswer checks a client's answer to one input request of a task
// (request as the task holds it: {"method": ..., "params": ...}) before it
// is stored: it must have the shape of the method's result, and the
// content of an accepted form elicitation must match the requested
// schema. A bad answer is refused, and the task goes on waiting for a good
// one, instead of being stored and failing the tool on it.
func CheckAnswer(request, answer json.RawMessage) error {
	var req struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(request, &req); err != nil {
		return nil // not a request of ours: nothing to check it against
	}
	switch req.Method {
	case wire.MethodElicit:
		return checkElicitAnswer(req.Params, answer)
	case wire.MethodSample:
		return checkSampleAnswer(answer)
	}
	return nil
}

func checkElicitAnswer(params, answer json.RawMessage) error {
	var res struct {
		Action  *string        `json:"action"`
		Content map[string]any `json:"content"`
	}
	if err := json.Unmarshal(answer, &res); err != nil {
		return fmt.Errorf("an elicitation answer must be an object {\"action\": \"accept\"|\"decline\"|\"cancel\", \"content\": {...}}: %v", err)
	}
	if res.Action == nil {
		return errors.New("an elicitation answer needs an action: accept, decline or cancel")
	}
	switch *res.Action {
	case "decline", "cancel":
		return nil
	case "accept":
	default:
		return fmt.Errorf("the action %q is none of accept, decline, cancel", *res.Action)
	}
	var p struct {
		Mode            string             `json:"mode"`
		RequestedSchema *jsonschema.Schema `json:"requestedSchema"`
	}
	if json.Unmarshal(params, &p) != nil || p.Mode == "url" || p.RequestedSchema == nil {
		return nil
	}
	if res.Content == nil {
		return errors.New("an accepted form elicitation needs its content")
	}
	resolved, err := p.RequestedSchema.Resolve(nil)
	if err != nil {
		return nil // the server's own schema; the tool checks what it gets
	}
	if err := resolved.Validate(res.Content); err != nil {
		return fmt.Errorf("the content does not match the requested schema: %v", err)
	}
	return nil
}

func checkSampleAnswer(answer json.RawMessage) error {
	var res struct {
		Role    *string         `json:"role"`
		Content json.RawMessage `json:"content"`
		Model   *string         `json:"model"`
	}
	if err := json.Unmarshal(answer, &res); err != nil {
		return fmt.Errorf("a sampling answer must be an object {\"role\", \"content\", \"model\"}: %v", err)
	}
	switch {
	case res.Role == nil || (*res.Role != "assistant" && *res.Role != "user"):
		return errors.New(`a sampling answer needs the role "assistant" (or "user")`)
	case len(res.Content) == 0 || string(res.Content) == "null":
		return errors.New("a sampling answer needs its content")
	case res.Model == nil:
		return errors.New("a sampling answer needs the model that produced it")
	}
	return nil
}
