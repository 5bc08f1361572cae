package client_test

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toolserverd/toolserverd/client"
)

// schemaProps reads the properties of every schema in api/openapi.yaml's components,
// an allOf's parts' included (local $refs followed), and of the 200 answer of every
// operation, under "GET /path".
func schemaProps(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]any `yaml:"paths"`
		Components struct {
			Schemas map[string]map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var props func(s map[string]any, depth int) []string
	props = func(s map[string]any, depth int) []string {
		if depth > 8 {
			return nil
		}
		var out []string
		if ref, ok := s["$ref"].(string); ok {
			if name, ok := strings.CutPrefix(ref, "#/components/schemas/"); ok {
				out = append(out, props(doc.Components.Schemas[name], depth+1)...)
			}
		}
		if p, ok := s["properties"].(map[string]any); ok {
			for k := range p {
				out = append(out, k)
			}
		}
		if all, ok := s["allOf"].([]any); ok {
			for _, part := range all {
				if m, ok := part.(map[string]any); ok {
					out = append(out, props(m, depth+1)...)
				}
			}
		}
		return out
	}
	out := map[string][]string{}
	for name, s := range doc.Components.Schemas {
		out[name] = props(s, 0)
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			m, _ := op.(map[string]any)
			resp, _ := m["responses"].(map[string]any)
			ok, _ := resp["200"].(map[string]any)
			content, _ := ok["content"].(map[string]any)
			js, _ := content["application/json"].(map[string]any)
			if schema, ok := js["schema"].(map[string]any); ok {
				out[strings.ToUpper(method)+" "+path] = props(schema, 0)
			}
		}
	}
	return out
}

// jsonFields lists the JSON names of a struct type's fields, those of embedded
// structs and of fields with a MarshalJSON of their own' included.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && tag == "":
			out = append(out, jsonFields(f.Type)...)
		case tag == "-" || !f.IsExported():
		case tag == "":
			out = append(out, f.Name)
		default:
			out = append(out, tag)
		}
	}
	return out
}

// TestTypesCoverTheContract: every property api/openapi.yaml gives a response (or
// request) schema the client decodes (or sends) is a field of the client's type, so
// that a field the API adds is not silently dropped by the Go client. A property a
// type leaves out on purpose is listed in skip with why.
func TestTypesCoverTheContract(t *testing.T) {
	props := schemaProps(t)
	for _, c := range []struct {
		schema string
		typ    any
		skip   []string
	}{
		{"Session", client.Session{}, nil},
		{"SessionSpec", client.SessionSpec{}, nil},
		{"ToolList", client.ToolList{}, nil},
		{"ToolCallsRequest", client.Batch{}, nil},
		{"NativeCall", client.Call{}, nil},
		{"ToolStartEvent", client.Event{}, nil},
		{"MessageEvent", client.Event{}, nil},
		{"ToolProgressEvent", client.Event{}, nil},
		{"ApprovalRequiredEvent", client.Event{}, nil},
		{"InputRequiredEvent", client.Event{}, nil},
		{"DoneEvent", client.Event{}, nil},
		{"KeepaliveEvent", client.Event{}, nil},
		{"ProgressValue", client.ProgressValue{}, nil},
		{"CallRecord", client.CallRecord{}, nil},
		{"Approval", client.Approval{}, nil},
		{"APIKey", client.APIKey{}, nil},
		{"MCPServerStatus", client.MCPServer{}, nil},
		{"AuditEntry", client.AuditEntry{}, nil},
		{"ProgressChunk", client.ProgressChunk{}, nil},
		{"GET /v1/sessions/{sessionID}/prompt", client.Prompt{}, nil},
		{"GET /v1/tool-calls", client.CallList{}, nil},
		{"GET /v1/sessions/{sessionID}/tool-calls", client.CallList{}, nil},
		{"GET /v1/approvals", client.ApprovalList{}, nil},
		{"GET /v1/whoami", client.Principal{}, nil},
		{"Skill", client.Skill{}, nil},
		{"GET /v1/skills", client.SkillList{}, nil},
	} {
		want, ok := props[c.schema]
		if !ok || len(want) == 0 {
			t.Errorf("api/openapi.yaml has no schema %s with properties", c.schema)
			continue
		}
		have := jsonFields(reflect.TypeOf(c.typ))
		var missing []string
		for _, p := range want {
			if !slices.Contains(have, p) && !slices.Contains(c.skip, p) && !slices.Contains(missing, p) {
				missing = append(missing, p)
			}
		}
		slices.Sort(missing)
		if len(missing) > 0 {
			t.Errorf("%T lacks %v of schema %s", c.typ, missing, c.schema)
		}
	}
}

// TestRoutesHaveAMethod: every operation of api/openapi.yaml is either called by a
// method of the client or left out for a reason said here, so that a route the API
// adds gets a decision for the Go client.
func TestRoutesHaveAMethod(t *testing.T) {
	b, err := os.ReadFile("../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	methods := map[string]string{
		"GET /healthz":                                         "Health",
		"GET /readyz":                                          "Health",
		"GET /v1/tools":                                        "ListTools",
		"POST /v1/sessions":                                    "CreateSession",
		"GET /v1/sessions/{sessionID}":                         "GetSession",
		"DELETE /v1/sessions/{sessionID}":                      "DeleteSession",
		"GET /v1/sessions/{sessionID}/tools":                   "SessionTools",
		"POST /v1/sessions/{sessionID}/tool-calls":             "Run",
		"GET /v1/sessions/{sessionID}/tool-calls":              "ListSessionCalls",
		"GET /v1/sessions/{sessionID}/tool-calls/{toolCallID}": "GetSessionCall",
		"POST /v1/sessions/{sessionID}/interrupt":              "Interrupt",
		"GET /v1/sessions/{sessionID}/events":                  "SessionEvents",
		"GET /v1/sessions/{sessionID}/prompt":                  "Prompt",
		"GET /v1/skills":                                       "Skills",
		"GET /v1/skills/{name}":                                "GetSkill",
		"GET /v1/whoami":                                       "Whoami",
		"GET /v1/keys":                                         "Keys",
		"POST /v1/keys":                                        "CreateKey",
		"POST /v1/keys/{keyID}/revoke":                         "RevokeKey",
		"GET /v1/mcp/servers":                                  "MCPServers",
		"POST /v1/mcp/servers":                                 "AddMCPServer",
		"DELETE /v1/mcp/servers/{name}":                        "RemoveMCPServer",
		"POST /v1/mcp/servers/{name}/restart":                  "RestartMCPServer",
		"GET /v1/approvals":                                    "ListApprovals",
		"GET /v1/approvals/{approvalID}":                       "GetApproval",
		"POST /v1/approvals/{approvalID}/decision":             "Decide",
		"GET /v1/audit":                                        "Audit",
		"POST /v1/tool-calls":                                  "Run",
		"GET /v1/tool-calls":                                   "ListCalls",
		"GET /v1/tool-calls/{callID}":                          "GetCall",
		"POST /v1/tool-calls/{callID}/cancel":                  "CancelCall",
		"GET /v1/tool-calls/{callID}/events":                   "FollowCall",
		"POST /v1/tool-calls/{callID}/input":                   "ProvideInput",
		"POST /v1/tool-calls/{callID}/result":                  "AnswerCall",
		"GET /v1/tool-calls/{callID}/progress":                 "Progress",
	}
	left := map[string]string{
		"GET /openapi.yaml": "the contract itself",
		"GET /metrics":      "Prometheus scrapes it",
		"POST /mcp":         "MCP clients speak MCP there",
		"GET /mcp":          "MCP clients speak MCP there",
		"DELETE /mcp":       "MCP clients speak MCP there",
		"GET /ui":           "the web console",
		"GET /ui/{path}":    "the web console",
		"POST /v1/sessions/{sessionID}/job-calls":     "replica to replica; clients do not call it",
		"GET /v1/tool-calls/{callID}/progress/stream": "SSE for browsers; Progress polls the same bytes by offset and FollowCall streams them",
	}
	for _, p := range []string{"/v1/sessions/{sessionID}/mcp"} {
		for _, m := range []string{"GET", "POST", "DELETE"} {
			left[m+" "+p] = "MCP clients speak MCP there"
		}
	}
	typ := reflect.TypeFor[*client.Client]()
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
			default:
				continue // parameters, summary, description of the path
			}
			op := strings.ToUpper(method) + " " + path
			name, ok := methods[op]
			if _, skip := left[op]; skip {
				continue
			}
			if !ok {
				t.Errorf("%s has no method of the Go client (add one, or say in left why not)", op)
				continue
			}
			if _, ok := typ.MethodByName(name); !ok {
				t.Errorf("%s: the client has no method %s", op, name)
			}
		}
	}
}
