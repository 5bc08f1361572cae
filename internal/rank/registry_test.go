package rank

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// coreDocs loads the built-in tools and the MCP "everything" and "filesystem" server
// tools, named as toolserverd exposes them (mcp__<server>__<tool>).
func coreDocs(t testing.TB) []Doc { return docsFile(t, "core_tools.json") }

// docsFile loads tools from a JSON file of {name, description, params} in testdata.
func docsFile(t testing.TB, name string) []Doc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var raw []struct {
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Params      []string `json:"params"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	docs := make([]Doc, len(raw))
	for i, r := range raw {
		docs[i] = Doc{Name: r.Name, Description: r.Description, Params: r.Params}
	}
	return docs
}

// lines returns the non-empty, non-comment lines of a testdata file, each split on "|".
func lines(t testing.TB, name string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		parts := strings.Split(l, "|")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		out = append(out, parts)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

type service struct {
	slug, display string
	objects       []string
	params        []string
}

type verb struct {
	name, template string
	params         []string
}

// registry returns n tools: the core tools plus synthetic ones generated
// deterministically from the service, verb and suffix lists in testdata. The synthetic
// tools use the naming styles seen in the wild (mcp__svc__verb_object, svc_verb_object,
// camelCase, kebab-case) and include close competitors of the core tools (Google
// Drive and SFTP files, Brave and Tavily web search, Firecrawl scraping, SSH and
// Kubernetes commands, calculators).
func registry(t testing.TB, n int) []Doc {
	t.Helper()
	var services []service
	for _, l := range lines(t, "services.txt") {
		services = append(services, service{slug: l[0], display: l[1], objects: splitList(l[2]), params: splitList(l[3])})
	}
	var verbs []verb
	for _, l := range lines(t, "verbs.txt") {
		verbs = append(verbs, verb{name: l[0], template: l[1], params: splitList(l[2])})
	}
	var suffixes []string
	for _, l := range lines(t, "suffixes.txt") {
		suffixes = append(suffixes, l[0])
	}

	type combo struct {
		s   service
		obj string
		v   verb
	}
	var combos []combo
	for _, s := range services {
		for _, obj := range s.objects {
			for _, v := range verbs {
				combos = append(combos, combo{s, obj, v})
			}
		}
	}
	rng := rand.New(rand.NewPCG(20240601, 7))
	rng.Shuffle(len(combos), func(i, j int) { combos[i], combos[j] = combos[j], combos[i] })

	docs := coreDocs(t)
	seen := map[string]bool{}
	for _, d := range docs {
		seen[d.Name] = true
	}
	for _, c := range combos {
		if len(docs) >= n {
			break
		}
		name := toolName(rng, c.s.slug, c.v.name, c.obj)
		if seen[name] {
			continue
		}
		seen[name] = true
		phrase := strings.ReplaceAll(c.obj, "_", " ")
		desc := strings.NewReplacer("{obj}", phrase, "{objs}", plural(phrase), "{svc}", c.s.display).Replace(c.v.template)
		if rng.IntN(10) < 4 {
			desc += " " + suffixes[rng.IntN(len(suffixes))]
		}
		var params []string
		for _, p := range c.v.params {
			params = append(params, strings.ReplaceAll(p, "{obj}", c.obj))
		}
		params = append(params, c.s.params...)
		docs = append(docs, Doc{Name: name, Description: desc, Params: params})
	}
	if len(docs) < n {
		t.Fatalf("only %d tools generated, want %d", len(docs), n)
	}
	return docs
}

func toolName(rng *rand.Rand, svc, verb, obj string) string {
	switch r := rng.IntN(20); {
	case r < 11:
		return fmt.Sprintf("mcp__%s__%s_%s", svc, verb, obj)
	case r < 14:
		return fmt.Sprintf("%s_%s_%s", svc, verb, obj)
	case r < 16:
		return fmt.Sprintf("mcp__%s__%s%s", svc, camel(verb, false), camel(obj, true))
	case r < 18:
		return camel(verb, false) + camel(svc, true) + camel(obj, true)
	default:
		return strings.ReplaceAll(fmt.Sprintf("%s-%s-%s", svc, verb, obj), "_", "-")
	}
}

// camel turns snake_case into camelCase (or PascalCase when upper is set).
func camel(s string, upper bool) string {
	var b strings.Builder
	for i, part := range strings.Split(s, "_") {
		if part == "" {
			continue
		}
		if i > 0 || upper {
			r := []rune(part)
			r[0] = unicode.ToUpper(r[0])
			part = string(r)
		}
		b.WriteString(part)
	}
	return b.String()
}

func plural(phrase string) string {
	switch {
	case strings.HasSuffix(phrase, "y") && !strings.HasSuffix(phrase, "ey") && !strings.HasSuffix(phrase, "ay"):
		return phrase[:len(phrase)-1] + "ies"
	case strings.HasSuffix(phrase, "s"), strings.HasSuffix(phrase, "x"), strings.HasSuffix(phrase, "ch"), strings.HasSuffix(phrase, "sh"):
		return phrase + "es"
	default:
		return phrase + "s"
	}
}

type labelled struct {
	query    string
	relevant []string
}

func labelledQueries(t testing.TB) []labelled { return labelledFile(t, "queries.txt") }

// labelledFile reads "query => relevant tool names" lines from a file in testdata.
func labelledFile(t testing.TB, name string) []labelled {
	t.Helper()
	var out []labelled
	for _, l := range lines(t, name) {
		q, rel, ok := strings.Cut(l[0], "=>")
		if !ok {
			t.Fatalf("%s: no => in %q", name, l[0])
		}
		out = append(out, labelled{query: strings.TrimSpace(q), relevant: strings.Fields(rel)})
	}
	return out
}

// benchQueries returns the labelled queries plus queries phrased from random
// synthetic tools ("please archive the jira sprint"), n in all.
func benchQueries(t testing.TB, docs []Doc, n int) []string {
	t.Helper()
	var qs []string
	for _, l := range labelledQueries(t) {
		qs = append(qs, l.query)
	}
	rng := rand.New(rand.NewPCG(99, 1))
	openers := []string{"", "please ", "I need to ", "can you ", "help me "}
	for len(qs) < n {
		d := docs[rng.IntN(len(docs))]
		words := strings.Fields(d.Description)
		k := min(len(words), 3+rng.IntN(5))
		qs = append(qs, openers[rng.IntN(len(openers))]+strings.ToLower(strings.Join(words[:k], " ")))
	}
	return qs
}
