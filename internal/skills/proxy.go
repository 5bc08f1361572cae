package skills

import (
	"fmt"
	"path"
	"strings"

	"github.com/toolserverd/toolserverd/internal/globset"
)

// Proxy is one session's view of a Manager: only the skills its whitelist covers.
// It reads the Manager's current snapshot on every call, so a skill that is edited,
// added or removed on disk shows up (or disappears) in existing sessions too.
type Proxy struct {
	m     *Manager
	all   bool
	exact map[string]bool
	// matcher answers for patterns: a whitelist of 2,000 patterns checked each
	// against each of 2,000 skills cost 0.2 s and more every time a session's skills
	// were listed (its prompt fragment included) and when the session was made.
	matcher globset.Set
	// gate, when set, hides skills further (tool groups that are switched off).
	gate func(name string) bool
}

// SetGate hides the skills gate refuses (set before the proxy is shared).
func (p *Proxy) SetGate(gate func(name string) bool) { p.gate = gate }

// SessionStateKey is where a session keeps its *Proxy in its tool.State, for the
// skill tool.
const SessionStateKey = "skills.proxy"

// NewProxy builds a Proxy over m. A nil available list shows every skill; an empty one
// shows none. Entries are exact names or path.Match patterns ("pdf-*"). Names the
// Manager does not know are kept (a skill installed later appears) and reported as
// warnings, as are patterns that match nothing yet and invalid patterns (dropped).
func NewProxy(m *Manager, available []string) (*Proxy, []string) {
	p := &Proxy{m: m, all: available == nil, exact: map[string]bool{}}
	var warnings, patterns []string
	for _, raw := range available {
		name := strings.TrimSpace(raw)
		if name == "" || p.exact[name] {
			continue
		}
		if globset.IsPattern(name) {
			if _, err := path.Match(name, ""); err != nil {
				warnings = append(warnings, "invalid skill pattern: "+name)
				continue
			}
			patterns = append(patterns, name)
			if !globset.AnyMatch(m.snap.Load().names, name) {
				warnings = append(warnings, "skill pattern matches no skill yet: "+name)
			}
			continue
		}
		p.exact[name] = true
		snap := m.snap.Load()
		if _, ok := snap.byName[name]; !ok {
			warnings = append(warnings, unknownSkill(snap, name))
		}
	}
	p.matcher = globset.New(patterns)
	return p, warnings
}

// unknownSkill says why the session cannot have the skill called name: its folder is
// there but does not load (the reason, as GET /v1/skills reports it), or there is no
// such skill.
func unknownSkill(snap *snapshot, name string) string {
	if why, ok := snap.notLoaded(name); ok {
		return "skill " + name + " is not loaded: " + why
	}
	if lower := strings.ToLower(name); lower != name {
		if _, ok := snap.byName[lower]; ok {
			// The skill tool opens PDF as pdf; a whitelist entry is matched as written.
			return "unknown skill: " + name + " (skill names are lowercase: write " + lower + ")"
		}
	}
	return "unknown skill: " + name
}

// Allows reports whether the whitelist covers name, whether or not such a skill exists.
func (p *Proxy) Allows(name string) bool {
	if p.gate != nil && !p.gate(name) {
		return false
	}
	return p.all || p.exact[name] || p.matcher.Match(name)
}

// List returns the visible skills, sorted by name.
func (p *Proxy) List() []Skill {
	var out []Skill
	for _, sk := range p.m.snap.Load().list {
		if p.Allows(sk.Name) {
			out = append(out, sk.clone())
		}
	}
	return out
}

// Get returns the skill called name if the session may see it.
func (p *Proxy) Get(name string) (Skill, bool) {
	if !p.Allows(name) {
		return Skill{}, false
	}
	return p.m.Get(name)
}

// NotLoaded is Manager.NotLoaded for skills the session may see; for others it
// returns false, so a session learns nothing of skills outside its whitelist.
func (p *Proxy) NotLoaded(name string) (string, bool) {
	if !p.Allows(name) {
		return "", false
	}
	return p.m.NotLoaded(name)
}

// Read is Manager.Read for visible skills; others are ErrNotFound.
func (p *Proxy) Read(name, relPath string) ([]byte, error) {
	if !p.Allows(name) {
		return nil, fmt.Errorf("skill %q: %w", name, ErrNotFound)
	}
	return p.m.Read(name, relPath)
}

// Projection is where one skill was projected.
type Projection struct {
	Name string
	Path string
}

// ProjectAll projects every visible skill into sandboxRoot (see Project). It goes on
// after a failure and returns what it projected with the first error.
func (p *Proxy) ProjectAll(sandboxRoot string) ([]Projection, error) {
	var out []Projection
	var first error
	for _, sk := range p.List() {
		dir, err := Project(sk, sandboxRoot)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		out = append(out, Projection{Name: sk.Name, Path: dir})
	}
	return out, first
}
