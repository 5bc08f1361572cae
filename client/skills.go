package client

import (
	"context"
	"net/http"
	"net/url"
)

// Skill is an Agent Skill the daemon loaded.
type Skill struct {
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	Version      string         `json:"version,omitempty"`
	AllowedTools []string       `json:"allowed_tools"`
	Files        []string       `json:"files"`
	License      string         `json:"license,omitempty"`
	Compat       string         `json:"compatibility,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
	// DisableModelInvocation marks a skill a person asks for: the prompt fragment
	// does not list it.
	DisableModelInvocation bool `json:"disable_model_invocation,omitempty"`
	// Body is the SKILL.md instructions, in GetSkill's answer only.
	Body string `json:"body,omitempty"`
}

// SkillList is the loaded skills and the skill folders that did not load.
type SkillList struct {
	Skills   []Skill        `json:"skills"`
	Problems []SkillProblem `json:"problems"`
}

// SkillProblem is a skill folder that did not load, with why.
type SkillProblem struct {
	Dir   string `json:"dir"`
	Error string `json:"error"`
}

// Skills lists the loaded skills and the folders that did not load (GET /v1/skills).
func (c *Client) Skills(ctx context.Context) (*SkillList, error) {
	var l SkillList
	return &l, c.do(ctx, http.MethodGet, "/v1/skills", nil, &l)
}

// GetSkill reads one skill with its SKILL.md body (GET /v1/skills/{name}); a skill
// whose folder is there but did not load is a 404 Error saying why.
func (c *Client) GetSkill(ctx context.Context, name string) (*Skill, error) {
	var s Skill
	return &s, c.do(ctx, http.MethodGet, "/v1/skills/"+url.PathEscape(name), nil, &s)
}
