package builtin

import (
	"encoding/json"
	"fmt"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// externalTool is completed by someone outside the daemon: its call waits, durably,
// for an answer posted to POST /v1/tool-calls/{id}/result. The executor never runs it.
type externalTool struct{ spec tool.Spec }

func (t externalTool) Spec() tool.Spec { return t.spec }

func (t externalTool) Run(*tool.Context, json.RawMessage) (*tool.Result, error) {
	return nil, tool.Errorf(tool.KindUnavailable, "%s is answered from outside the daemon and cannot run here", t.spec.Name)
}

// ExternalTool declares an operator's external tool (config external_tools).
func ExternalTool(name, description string, parameters json.RawMessage) tool.Tool {
	if len(parameters) == 0 {
		parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return externalTool{spec: tool.Spec{
		Name: name, Description: description, Parameters: parameters, Flags: tool.Flags{External: true, ConcurrencySafe: true},
		Risk: tool.RiskLow, Timeout: 24 * 60 * 60 * 1e9,
		Documentation: fmt.Sprintf("%s\n\nThis tool is answered by a person or system outside the daemon; the call waits (it survives restarts) until the answer arrives.", description),
	}}
}

// AskUserTool asks the human user a question and returns the answer.
func AskUserTool() tool.Tool {
	t := ExternalTool("ask_user",
		"Ask the human user a question and wait for the answer. Use it when you need a decision, a preference or "+
			"information only the user has; offer options when the choice is between known alternatives.",
		json.RawMessage(`{"type":"object","additionalProperties":false,"required":["question"],"properties":{
  "question":{"type":"string","minLength":1,"maxLength":4000,"description":"The question, self-contained."},
  "options":{"type":"array","maxItems":20,"items":{"type":"string","minLength":1},"description":"Choices to offer, if any."},
  "multi_select":{"type":"boolean","description":"Whether several options may be chosen."},
  "allow_free_text":{"type":"boolean","description":"Whether the user may answer in their own words (default true)."}}}`))
	spec := t.Spec()
	spec.Label = "Ask the user"
	spec.PromptHint = "When you are unsure what the user wants, ask_user instead of guessing; one clear question at a time."
	spec.Documentation = "ask_user {question, options?, multi_select?, allow_free_text?}: shows the question to the user (the " +
		"agent's UI receives an input_required event and the call's arguments) and waits until an answer is posted to " +
		"POST /v1/tool-calls/{id}/result. The answer is the result text (and structured content, if the UI sends it). " +
		"The wait survives daemon restarts; a user who declines answers with an error result."
	return externalTool{spec: spec}
}
