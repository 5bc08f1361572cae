package server

import (
	"net/http"
	"strings"

	"github.com/toolserverd/toolserverd/internal/skills"
)

type skillJSON struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Version      string   `json:"version,omitempty"`
	AllowedTools []string `json:"allowed_tools"`
	Files        []string `json:"files"`
	// License, Compatibility and Metadata are the Agent Skills format's optional
	// fields, left out when the skill has none.
	License       string         `json:"license,omitempty"`
	Compatibility string         `json:"compatibility,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	// ManualOnly: the frontmatter's disable-model-invocation is true.
	ManualOnly bool   `json:"disable_model_invocation,omitempty"`
	Body       string `json:"body,omitempty"`
}

func toSkillJSON(sk skills.Skill, body bool) skillJSON {
	out := skillJSON{Name: sk.Name, Description: sk.Description, Version: sk.Version, AllowedTools: sk.AllowedTools, Files: sk.Files,
		License: sk.License, Compatibility: sk.Compatibility, Metadata: sk.Metadata, ManualOnly: sk.ManualOnly}
	if out.AllowedTools == nil {
		out.AllowedTools = []string{}
	}
	if out.Files == nil {
		out.Files = []string{}
	}
	if body {
		out.Body = sk.Body
	}
	return out
}

// listSkills lists the loaded skills and the folders that could not be loaded.
func (s *Server) listSkills(w http.ResponseWriter, r *http.Request) {
	type problem struct {
		Dir   string `json:"dir"`
		Error string `json:"error"`
	}
	list := []skillJSON{}
	problems := []problem{}
	if s.Skills != nil {
		for _, sk := range s.Skills.List() {
			list = append(list, toSkillJSON(sk, false))
		}
		for _, p := range s.Skills.Problems() {
			problems = append(problems, problem{Dir: p.Dir, Error: p.Error})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"skills": list, "problems": problems})
}

func (s *Server) getSkill(w http.ResponseWriter, r *http.Request) {
	if s.Skills == nil {
		s.writeError(w, r, errorf(CodeNotFound, "no skills are configured"))
		return
	}
	name := pathParam(r, "name")
	sk, ok := s.Skills.Get(name)
	if !ok {
		if why, broken := s.Skills.NotLoaded(name); broken {
			s.writeError(w, r, errorf(CodeNotFound, "skill "+name+" is not loaded: "+why))
			return
		}
		s.writeError(w, r, errorf(CodeNotFound, "skill not found"))
		return
	}
	writeJSON(w, http.StatusOK, toSkillJSON(sk, true))
}

// sessionPrompt returns the system-prompt fragment for a session: the prompt hints of
// its tools (in name order, so the prompt caches well) and its skills, the latter cut
// to skills.prompt_budget_tokens (skills.Listing), cached until the library or what
// the session sees of it changes (skills.ListingCache).
func (s *Server) sessionPrompt(w http.ResponseWriter, r *http.Request) {
	sess, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var b strings.Builder
	var hints []string
	for _, spec := range sess.Tools.Specs() {
		if spec.PromptHint != "" {
			hints = append(hints, "- "+spec.Name+": "+spec.PromptHint)
		}
	}
	if len(hints) > 0 {
		b.WriteString("## Tools\n" + strings.Join(hints, "\n") + "\n")
	}
	var listing skills.PromptListing
	// Skills are opened with the skill tool: a session without it has none to offer.
	if _, _, ok := sess.Tools.Resolve("skill"); ok && sess.Skills != nil {
		listing = s.listings.Listing(sess.Skills, s.cfg.SkillPromptBudgetTokens)
	}
	if listing.Text != "" {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(listing.Text)
	}
	names := append(append([]string{}, listing.Described...), listing.NamedOnly...)
	writeJSON(w, http.StatusOK, map[string]any{"prompt": b.String(), "skills": names,
		"skills_cut": listing.Cut(), "skills_described": len(listing.Described), "skills_left_out": listing.LeftOut,
		"skills_tokens": listing.Tokens, "skills_budget_tokens": s.cfg.SkillPromptBudgetTokens})
}
