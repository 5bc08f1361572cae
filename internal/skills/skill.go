// Package skills loads skill packages from disk, keeps them current while the daemon
// runs, scopes them per session and projects them into session sandboxes.
//
// A skill is a folder:
//
//	my-skill/
//	├── SKILL.md     required: YAML frontmatter between "---" lines, then markdown
//	├── skill.yaml   optional: id, name, description, version, activation, allowed_tools …
//	├── scripts/     optional: scripts meant to run inside the sandbox
//	└── assets/      optional: anything else (templates, reference files …)
//
// SKILL.md frontmatter follows the public Agent Skills format: name, description,
// license, compatibility, metadata (a mapping) and allowed-tools (a space- or
// comma-separated string, or a YAML list); allowed_tools and a top-level version are
// accepted too, and Claude Code's disable-model-invocation (Skill.ManualOnly). The description is made one line (whitespace runs and control
// characters become one space) and should have at most MaxDescriptionChars characters:
// it is what every session's prompt fragment lists. A longer one loads (cut past
// KeptDescriptionChars) and the Manager logs it. A SKILL.md without frontmatter is all body; its name and description
// must then come from skill.yaml. When both files set a field, the frontmatter wins:
// it is the file the public format defines and the one authors edit. In skill.yaml,
// id names the skill and name is a display name when both are given.
//
// skill.yml is accepted for skill.yaml. Unknown keys in either file are ignored, so
// skills written for other agents (Claude Code's model, argument-hint …) load as they
// are; the public metadata mapping is kept in Skill.Metadata.
//
// A Manager scans its directories (each child folder is a skill, folders whose names
// start with a dot are skipped, loose files are ignored; a directory that itself
// holds a SKILL.md is one skill), reports broken skills as Problems while the others
// load, and with Config.Watch follows changes through fsnotify. Read serves a skill's
// files confined to its folder; Project copies a skill into a sandbox; a Proxy is one
// session's filtered view.
package skills

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"time"
)

// Skill is one loaded skill. Values returned by Manager and Proxy are copies.
type Skill struct {
	// Name is the skill's identifier: [a-z0-9-]{1,64}, unique across the Manager.
	Name        string
	Description string
	// descriptionChars is the description's length as written, before a cut past
	// KeptDescriptionChars (for the log).
	descriptionChars int
	Version          string
	// AllowedTools lists the tools the skill expects to use (public format
	// "allowed-tools"), in the order written, without duplicates. Entries are kept as
	// written, patterns such as "Bash(git:*)" included.
	AllowedTools []string
	// License and Compatibility are the public format's optional fields.
	License       string
	Compatibility string
	// ManualOnly is Claude Code's disable-model-invocation: true. The skill is for a
	// person to ask for: it is left out of the prompt fragment that offers skills to
	// the model, and still opens when asked for by name.
	ManualOnly bool
	// Activation lists skill.yaml's activation scenarios (when to use the skill).
	Activation []string
	// Dir is the absolute path of the skill's folder (symlinks resolved).
	Dir string
	// PluginRoot is the root folder of the Claude Code plugin the skill comes from:
	// the closest of the three folders above Dir that holds .claude-plugin/plugin.json
	// (a plugin's skills lie in <root>/skills/<name>/, or where its plugin.json
	// says). "" for a skill of no plugin.
	PluginRoot string
	// Body is SKILL.md without its frontmatter.
	Body string
	// Files lists every file of the skill, slash-separated and relative to Dir, sorted.
	// Version-control folders (.git, .hg, .svn), __pycache__, symlinks that leave the
	// folder or point at directories, special files and a projection marker
	// (legacyMarker) are not part of a skill.
	Files []string
	// Scripts is the subset of Files under scripts/.
	Scripts []string
	// Hash is a SHA-256 over Files: their paths, executable bits and contents.
	Hash string
	// Metadata is the frontmatter's metadata mapping merged over skill.yaml's
	// (frontmatter keys win). A skill.yaml display name is kept as "display_name".
	// Values are ones encoding/json can write: mappings have string keys, and an
	// infinite number or NaN is kept as its text.
	Metadata map[string]any
}

func (s Skill) clone() Skill {
	s.AllowedTools = slices.Clone(s.AllowedTools)
	s.Activation = slices.Clone(s.Activation)
	s.Files = slices.Clone(s.Files)
	s.Scripts = slices.Clone(s.Scripts)
	s.Metadata = maps.Clone(s.Metadata)
	return s
}

// Problem is a skill folder (or configured directory) that could not be loaded.
type Problem struct {
	Dir   string
	Error string
}

// ErrNotFound is returned for a skill the Manager or Proxy does not have (or does not
// show) and for a file that is not part of a skill.
var ErrNotFound = errors.New("not found")

// nameRE: lowercase letters, digits and hyphens, neither first, last nor two in a
// row, as the Agent Skills format says.
var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ValidName reports whether s may name a skill: 1 to 64 of a-z, 0-9 and single
// hyphens between them.
func ValidName(s string) bool { return len(s) <= 64 && nameRE.MatchString(s) }

// Config configures a Manager. Zero fields take defaults (WithDefaults).
type Config struct {
	// Dirs are the directories scanned, in priority order: when two hold a skill of
	// the same name, the first one's wins and the other is reported as a Problem.
	// Within one directory names cannot repeat: a skill's name must be its folder's
	// name (see loadFolder).
	Dirs []string
	// Watch follows changes to Dirs after Start.
	Watch bool
	// MaxSkillBytes bounds the total size of one skill's files. Default 32 MiB.
	MaxSkillBytes int64
	// MaxFiles bounds the number of files of one skill. Default 1000.
	MaxFiles int
	// Debounce is how long the watcher waits after the last change before it rescans.
	// Default 200 ms.
	Debounce time.Duration
	// PollInterval, when positive, rescans on that period besides (or, when fsnotify is
	// unavailable, instead of) the watcher. When Watch is set and the watcher cannot be
	// created, polling starts with 2 s. Default 0.
	PollInterval time.Duration
}

// Defaults.
const (
	DefaultMaxSkillBytes int64 = 32 << 20
	DefaultMaxFiles            = 1000
	DefaultDebounce            = 200 * time.Millisecond
	fallbackPollInterval       = 2 * time.Second
)

// WithDefaults returns c with zero fields set to their defaults and Dirs made absolute.
func (c Config) WithDefaults() Config {
	if c.MaxSkillBytes == 0 {
		c.MaxSkillBytes = DefaultMaxSkillBytes
	}
	if c.MaxFiles == 0 {
		c.MaxFiles = DefaultMaxFiles
	}
	if c.Debounce == 0 {
		c.Debounce = DefaultDebounce
	}
	dirs := make([]string, 0, len(c.Dirs))
	for _, d := range c.Dirs {
		if abs, err := filepath.Abs(d); err == nil && d != "" {
			d = abs
		}
		dirs = append(dirs, d)
	}
	c.Dirs = dirs
	return c
}

// Validate reports every invalid field of c (after WithDefaults) in one error.
func (c Config) Validate() error {
	var errs []error
	for i, d := range c.Dirs {
		if d == "" {
			errs = append(errs, fmt.Errorf("skills dir %d: empty path", i))
		}
	}
	if c.MaxSkillBytes < 0 {
		errs = append(errs, fmt.Errorf("skills max skill bytes %d: must be positive", c.MaxSkillBytes))
	}
	if c.MaxFiles < 0 {
		errs = append(errs, fmt.Errorf("skills max files %d: must be positive", c.MaxFiles))
	}
	if c.Debounce < 0 {
		errs = append(errs, fmt.Errorf("skills debounce %s: must not be negative", c.Debounce))
	}
	if c.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("skills poll interval %s: must not be negative", c.PollInterval))
	}
	return errors.Join(errs...)
}
