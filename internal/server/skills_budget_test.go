package server_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// skillLibrary writes n skill folders shaped like a large public library (K-Dense's
// scientific skills: a name per tool or database, a description of one to four
// sentences saying what it does and when to use it, often allowed-tools, a license
// and metadata, a script) and returns the directory and the skills' names. Every
// 97th skill is for a person to ask for (disable-model-invocation). Skill i's
// description holds the word "marker<i>x", which no other skill has.
func skillLibrary(t *testing.T, n int) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 11))
	fields := []string{"genomics", "proteomics", "cheminformatics", "astronomy", "microscopy", "epidemiology", "climate", "neuroscience", "materials", "metabolomics"}
	tools := []string{"blast", "rdkit", "astropy", "scanpy", "pymatgen", "biopython", "deeptools", "mdanalysis", "xarray", "nilearn", "pubchem", "uniprot", "ensembl", "alphafold"}
	verbs := []string{"Query", "Analyze", "Visualize", "Convert", "Annotate", "Cluster", "Simulate", "Fetch"}
	objects := []string{"sequence alignments", "molecular fingerprints", "FITS images", "single-cell expression matrices", "crystal structures", "time series of sensor data", "variant call files", "spectra"}
	var names []string
	files := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("%s-%s-%03d", fields[i%len(fields)], tools[(i/len(fields))%len(tools)], i)
		names = append(names, name)
		var d strings.Builder
		fmt.Fprintf(&d, "%s %s with %s for %s research (marker%dx).", verbs[rng.IntN(len(verbs))], objects[rng.IntN(len(objects))],
			tools[rng.IntN(len(tools))], fields[rng.IntN(len(fields))], i)
		for range rng.IntN(4) {
			fmt.Fprintf(&d, " Use when the task involves %s, %s or %s; it handles batch input, reports provenance and writes results as CSV or JSON.",
				objects[rng.IntN(len(objects))], objects[rng.IntN(len(objects))], tools[rng.IntN(len(tools))])
		}
		front := fmt.Sprintf("---\nname: %s\ndescription: %q\nlicense: MIT\nallowed-tools: Read Write Bash\nmetadata:\n  skill-author: K-Dense Inc.\n", name, d.String())
		if i%97 == 5 {
			front += "disable-model-invocation: true\n"
		}
		files[name+"/SKILL.md"] = front + "---\n\n# " + name + "\n\n## Overview\n\nRun `python scripts/run.py --input data.csv`.\n"
		files[name+"/scripts/run.py"] = "print('" + name + "')\n"
	}
	writeSkillFiles(t, dir, files)
	slices.Sort(names)
	return dir, names
}

type promptAnswer struct {
	Prompt       string   `json:"prompt"`
	Skills       []string `json:"skills"`
	Cut          bool     `json:"skills_cut"`
	Described    int      `json:"skills_described"`
	LeftOut      int      `json:"skills_left_out"`
	Tokens       int      `json:"skills_tokens"`
	BudgetTokens int      `json:"skills_budget_tokens"`
}

// TestSkillPromptBudget: the prompt fragment listed every skill with its whole
// description: 162 KB for a real library of 964. Loaded through the real skill
// manager and served by the real route, a library of 1,000 now gets a skills part
// within the budget (cl100k tokens counted here from the text), the first skills in
// name order with their descriptions (cut with "…" past 250 characters), then names,
// then a line counting the rest; the JSON says it was cut and by how much; the same
// skills give the same text; every skill still opens with the skill tool, one left
// out of the prompt is found by its query, and an unknown name is answered with the
// nearest names rather than all. A large budget lists them all.
func TestSkillPromptBudget(t *testing.T) {
	t.Parallel()
	dir, names := skillLibrary(t, 1000)
	var pickable []string // what the model may pick: not the manual-only ones
	for _, n := range names {
		var i int
		fmt.Sscanf(n[strings.LastIndexByte(n, '-')+1:], "%d", &i)
		if i%97 != 5 {
			pickable = append(pickable, n)
		}
	}
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Skills.Dirs = []string{dir} }})
	if code, _, body := d.do("GET", "/v1/skills", nil); code != 200 || strings.Count(string(body), `"name":`) != 1000 {
		t.Fatalf("skills: %d, %d named", code, strings.Count(string(body), `"name":`))
	}
	id := d.createSession(map[string]any{"available_tools": []string{"skill", "read_file"}})["id"].(string)
	get := func() (promptAnswer, []byte) {
		code, _, body := d.do("GET", "/v1/sessions/"+id+"/prompt", nil)
		var p promptAnswer
		if err := json.Unmarshal(body, &p); code != 200 || err != nil {
			t.Fatalf("prompt: %d %v %.300s", code, err, body)
		}
		return p, body
	}
	p, body := get()
	validateResponse(t, "GET", "/v1/sessions/{sessionID}/prompt", "200", "application/json", body)
	i := strings.Index(p.Prompt, "## Skills\n")
	if i < 0 {
		t.Fatalf("no skills in %q", p.Prompt)
	}
	part := p.Prompt[i:]
	tokens := toolmgr.CountTokens(part)
	t.Logf("skills part: %d bytes, %d tokens (budget %d): %d described, %d by name, %d left out",
		len(part), tokens, p.BudgetTokens, p.Described, len(p.Skills)-p.Described, p.LeftOut)
	if !p.Cut || p.BudgetTokens != 4000 || tokens > 4000 || tokens != p.Tokens || len(part) > 24000 {
		t.Errorf("cut %v, %d tokens (answer says %d) of budget %d, %d bytes", p.Cut, tokens, p.Tokens, p.BudgetTokens, len(part))
	}
	if p.Described < 10 || len(p.Skills) <= p.Described || p.LeftOut == 0 || len(p.Skills)+p.LeftOut != len(pickable) {
		t.Errorf("%d described, %d named, %d left out, of %d", p.Described, len(p.Skills), p.LeftOut, len(pickable))
	}
	// Name order: the prompt's skills are the first of the pickable ones.
	if !slices.Equal(p.Skills, pickable[:len(p.Skills)]) {
		t.Errorf("skills listed are not the first in name order: %v…", p.Skills[:5])
	}
	for j, n := range p.Skills {
		line := regexp.MustCompile(`(?m)^- ` + n + `: (.*)$`).FindStringSubmatch(part)
		switch {
		case j < p.Described && line == nil:
			t.Errorf("%s: no description line", n)
		case j < p.Described && (utf8.RuneCountInString(line[1]) > 250 || strings.HasSuffix(line[1], "…") != (utf8.RuneCountInString(descriptionOf(t, dir, n)) > 250)):
			t.Errorf("%s: %d characters shown of %d: %q", n, utf8.RuneCountInString(line[1]), utf8.RuneCountInString(descriptionOf(t, dir, n)), line[1])
		case j >= p.Described && (line != nil || !strings.Contains(part, " "+n)):
			t.Errorf("%s: not named without description", n)
		}
	}
	if !strings.Contains(part, fmt.Sprintf("%d more skills are not named here", p.LeftOut)) || !strings.Contains(part, "query") {
		t.Errorf("no closing line counting %d: %q", p.LeftOut, part[max(0, len(part)-400):])
	}
	if again, _ := get(); again.Prompt != p.Prompt {
		t.Errorf("the same skills gave another prompt")
	}

	// Every skill opens, those left out of the prompt and the manual-only ones too.
	for start := 0; start < len(names); start += 250 {
		var calls []map[string]any
		for _, n := range names[start:min(start+250, len(names))] {
			calls = append(calls, map[string]any{"id": n, "name": "skill", "arguments": map[string]any{"name": n}})
		}
		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": calls})
		msgs := messages(t, evs)
		for _, n := range names[start:min(start+250, len(names))] {
			if m := msgs[n]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "# Skill: "+n) {
				t.Fatalf("open %s: %.300s", n, m.raw)
			}
		}
	}
	// One left out of the prompt is found by what its description says.
	last := pickable[len(pickable)-1]
	var k int
	fmt.Sscanf(last[strings.LastIndexByte(last, '-')+1:], "%d", &k)
	_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": []map[string]any{
		{"id": "q", "name": "skill", "arguments": map[string]any{"query": fmt.Sprintf("marker%dx", k)}}}})
	if m := messages(t, evs)["q"]; m.m["is_error"] != false || !strings.Contains(string(m.raw), "- "+last+": ") || strings.Contains(string(m.raw), "of the 1000") {
		t.Errorf("query for %s: %.400s", last, m.raw)
	}
	// A name that is none is answered with the nearest names, not all thousand.
	_, evs = d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": []map[string]any{
		{"id": "u", "name": "skill", "arguments": map[string]any{"name": "astronomy-astropy-x"}}}})
	if m := messages(t, evs)["u"]; m.str("error_kind") != "not_found" || len(m.raw) > 4000 || !strings.Contains(string(m.raw), "there are 1000 skills") ||
		!strings.Contains(string(m.raw), "astronomy-astropy-") {
		t.Errorf("unknown name: %d bytes: %.600s", len(m.raw), m.raw)
	}

	// A budget that holds every name but not every description names them all; one
	// that holds everything lists everything.
	for _, budget := range []int{12_000, 1_000_000} {
		other := startDaemon(t, daemonOpts{mutate: func(c *config.Config) {
			c.Skills.Dirs = []string{dir}
			c.Skills.PromptBudgetTokens = budget
		}})
		id := other.createSession(map[string]any{"available_tools": []string{"skill"}})["id"].(string)
		code, _, body := other.do("GET", "/v1/sessions/"+id+"/prompt", nil)
		var p promptAnswer
		if err := json.Unmarshal(body, &p); code != 200 || err != nil {
			t.Fatalf("budget %d: %d %v", budget, code, err)
		}
		tokens := toolmgr.CountTokens(p.Prompt[strings.Index(p.Prompt, "## Skills\n"):])
		t.Logf("budget %d: %d bytes, %d tokens: %d described, %d by name, %d left out", budget, len(p.Prompt), tokens, p.Described, len(p.Skills)-p.Described, p.LeftOut)
		all := budget == 1_000_000
		if p.Cut == all || p.LeftOut != 0 || !slices.Equal(p.Skills, pickable) || (p.Described == len(pickable)) != all || p.Described < 40 ||
			tokens > budget || strings.Contains(p.Prompt, "cut to fit") == all || strings.Contains(p.Prompt, "not named here") {
			t.Errorf("budget %d: cut %v, %d described, %d named of %d, %d tokens", budget, p.Cut, p.Described, len(p.Skills), len(pickable), tokens)
		}
	}
}

// descriptionOf reads the description of skill name from its SKILL.md.
func descriptionOf(t *testing.T, dir, name string) string {
	t.Helper()
	var sk struct {
		Description string `json:"description"`
	}
	b, err := os.ReadFile(filepath.Join(dir, name, "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^description: (.*)$`).FindSubmatch(b)
	if err := json.Unmarshal(line[1], &sk.Description); err != nil {
		t.Fatal(err)
	}
	return sk.Description
}

// TestSkillQueryLong: the skill tool's answer to a query quotes the query cut short,
// so that a very long query (a model pasting a document) leaves the answer room for
// the skills it found, within the result's token budget.
func TestSkillQueryLong(t *testing.T) {
	t.Parallel()
	dir, names := skillLibrary(t, 20)
	d := startDaemon(t, daemonOpts{mutate: func(c *config.Config) { c.Skills.Dirs = []string{dir} }})
	id := d.createSession(map[string]any{"available_tools": []string{"skill"}})["id"].(string)
	var want string
	for _, n := range names {
		if strings.HasSuffix(n, "-003") {
			want = n
		}
	}
	for _, tc := range []struct{ name, query string }{
		{"found", strings.Repeat("filler ", 100_000) + "marker3x"},
		{"nothing", strings.Repeat("nothingmatches ", 100_000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", map[string]any{"calls": []map[string]any{
				{"id": "q", "name": "skill", "arguments": map[string]any{"query": tc.query}}}})
			m := messages(t, evs)["q"]
			text, _ := m.m["message"].(map[string]any)["content"].(string)
			if m.m["is_error"] != false || len(text) > 4000 || strings.Contains(text, "[… ") {
				t.Fatalf("%d bytes: %.300s … %.300s", len(text), text, text[max(0, len(text)-300):])
			}
			if found := strings.Contains(text, "- "+want+": "); found != (tc.name == "found") {
				t.Errorf("%s listed: %v: %.600s", want, found, text)
			}
		})
	}
}
