package rank

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestTokenize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"getWeatherForecast", []string{"get", "weather", "forecast"}},
		{"mcp__github__create_issue", []string{"mcp", "github", "creat", "issu"}},
		{"get-tiny-image", []string{"get", "tiny", "imag"}},
		{"HTTPServer parseJSONBody", []string{"http", "server", "pars", "json", "body"}},
		{"list_dir", []string{"list", "directory"}},
		{"read_text_file", []string{"read", "text", "fil"}},
		{"base64 utf8Decode", []string{"base64", "utf8", "decod"}},
		{"Read the contents of a file!", []string{"read", "content", "fil"}},
		{"a I x", nil},
		{"", nil},
		{"open_pr", []string{"open", "pull", "request"}},
		{"Ünïcödé wörds", []string{"ünïcödé", "wörds"}},
		// A URL is about a URL, whatever its scheme; a file name adds "file".
		{"open https://example.com/docs", []string{"open", "url", "exampl", "com", "docu"}},
		{"show main.go and config.old.yaml", []string{"show", "main", "go", "fil", "configur", "old", "yaml", "fil"}},
		{"get https://go.dev/doc.html", []string{"get", "url", "go", "dev", "docu", "html"}},
		{"e.g. v1.2", []string{"v1"}},
		{"a new folder", []string{"new", "directory"}},
		{"which images do I have, all of them", []string{"imag"}},
		// Issue keys, e-mail addresses, channels and mentions add what they name.
		{"move PROJ-123 to done", []string{"mov", "proj", "issu", "123", "don"}},
		{"share it with finance@acme.com", []string{"shar", "financ", "acm", "email", "com"}},
		{"tell #eng and @alice", []string{"tell", "eng", "channel", "alic", "user"}},
		{"v1-2 x-1 #1 a@b", []string{"v1", "email"}},
		{"e-mail bob; ack the page; DM her", []string{"email", "bob", "acknowledg", "pag", "direct", "messag"}},
		{"why is the worklog up where it's most", []string{"work", "log"}},
	}
	for _, tt := range tests {
		if got := Tokenize(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestStemConflates checks that the forms of a word meet and that words that must
// stay apart do.
func TestStemConflates(t *testing.T) {
	t.Parallel()
	groups := [][]string{
		{"create", "creates", "creating", "created"},
		{"write", "writes", "writing"},
		{"list", "lists", "listing", "listed"},
		{"file", "files"},
		{"run", "runs", "running"},
		{"get", "gets", "getting"},
		{"search", "searches", "searching", "searched"},
		{"fetch", "fetches", "fetching", "fetched"},
		{"match", "matches", "matching"},
		{"box", "boxes"},
		{"directory", "directories"},
		{"query", "queries"},
		{"process", "processes", "processing", "processed"},
		{"use", "uses", "using", "used"},
		{"move", "moves", "moving", "moved"},
		{"add", "adds", "added", "adding"},
		{"stop", "stops", "stopped", "stopping"},
		{"exist", "exists", "existing"},
		{"image", "images"},
		{"number", "numbers"},
		// Derived nouns meet their verbs.
		{"configure", "configuration", "configured"},
		{"react", "reaction", "reactions"},
		{"deploy", "deployment", "deployments", "deployed"},
		{"attach", "attachment", "attached"},
		{"validate", "validation"},
		{"create", "creation"},
		{"invite", "invitation"},
		{"transit", "transition"},
		{"document", "documentation", "documents"},
		// Agent nouns meet their verbs, and every form of an -er or -or verb meets.
		{"remind", "reminder", "reminders", "reminded"},
		{"schedule", "scheduler", "scheduled"},
		{"format", "formatter", "formatting"},
		{"convert", "converter", "converting"},
		{"translate", "translator", "translation"},
		{"compress", "compressor", "compressed"},
		{"create", "creator"},
		{"monitor", "monitoring", "monitored", "monitors"},
		{"render", "rendering", "renders"},
	}
	for _, g := range groups {
		want := Stem(g[0])
		for _, w := range g[1:] {
			if got := Stem(w); got != want {
				t.Errorf("Stem(%q) = %q, Stem(%q) = %q; want equal", w, got, g[0], want)
			}
		}
	}
	apart := [][2]string{{"status", "state"}, {"string", "str"}, {"thing", "th"}, {"pass", "pa"}, {"install", "instal"}}
	for _, p := range apart {
		if Stem(p[0]) == p[1] {
			t.Errorf("Stem(%q) = %q", p[0], p[1])
		}
	}
	for _, w := range []string{"status", "process", "analysis", "string", "bus", "gas", "js", "action", "comment", "payment", "mention",
		// Fewer than agentMinStem letters would stay: these keep their -er.
		"user", "server", "order", "filter", "header", "number", "power", "docker", "water", "paper", "sender"} {
		if got := Stem(w); got != w && got != strings.TrimSuffix(w, "e") {
			t.Errorf("Stem(%q) = %q, want it unchanged", w, got)
		}
	}
}

func names(rs []Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func TestRankBasics(t *testing.T) {
	t.Parallel()
	docs := []Doc{
		{Name: "read_file", Description: "Read a text file with line numbers.", Params: []string{"path", "offset"}},
		{Name: "write_file", Description: "Create or overwrite a file.", Params: []string{"path", "content"}},
		{Name: "web_fetch", Description: "Fetch a URL and return the page as Markdown.", Params: []string{"url"}},
		{Name: "notes_tool", Description: "Keeps notes. Can also read a file into a note.", Params: []string{"note_id"}},
		{Name: "read_file", Description: "A duplicate name: skipped."},
		{Name: "", Description: "No name: skipped."},
	}
	ix := NewIndex(docs)
	if ix.Len() != 4 {
		t.Fatalf("Len = %d, want 4 (duplicate and empty names skipped)", ix.Len())
	}

	got := ix.Rank("read a file", 10)
	if len(got) == 0 || got[0].Name != "read_file" {
		t.Fatalf("Rank(read a file) = %v, want read_file first", got)
	}
	// A match in the name outranks the same words in a description.
	pos := map[string]int{}
	for i, r := range got {
		pos[r.Name] = i
	}
	if pos["notes_tool"] < pos["read_file"] {
		t.Errorf("description-only match ranked above the name match: %v", names(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].Score > got[i-1].Score {
			t.Errorf("results not sorted by score: %v", got)
		}
	}
	if r := ix.Rank("fetch the page at this url", 1); len(r) != 1 || r[0].Name != "web_fetch" {
		t.Errorf("Rank(fetch …, 1) = %v", r)
	}
	if r := ix.Rank("quantum chromodynamics", 10); len(r) != 0 {
		t.Errorf("no shared term but got %v", r)
	}
	if r := ix.Rank("the a of", 10); len(r) != 0 {
		t.Errorf("stopwords only but got %v", r)
	}
	if r := ix.Rank("path", 0); len(r) != 2 {
		t.Errorf("limit 0 returned %v, want both tools with a path parameter", names(r))
	}
	keep := func(n string) bool { return n != "read_file" }
	if r := ix.RankFiltered("read a file", 10, keep); len(r) == 0 || r[0].Name == "read_file" {
		t.Errorf("RankFiltered returned a filtered tool: %v", names(r))
	}
	if r := NewIndex(nil).Rank("anything", 5); len(r) != 0 {
		t.Errorf("empty index returned %v", r)
	}
}

// TestRankRelatedWords: a query word finds tools that use a word of nearly the same
// meaning, below those that use the word itself, and a rare related word does not
// outweigh the query's own.
func TestRankRelatedWords(t *testing.T) {
	t.Parallel()
	ix := NewIndex([]Doc{
		{Name: "box_destroy", Description: "Destroy a box."},
		{Name: "container_remove", Description: "Remove a container."},
		{Name: "container_start", Description: "Start a container."},
		{Name: "memory_save", Description: "Save a fact to long-term memory."},
		{Name: "notes_find", Description: "Find notes by title."},
		{Name: "notes_search", Description: "Search notes by title."},
	})
	if got := names(ix.Rank("erase the container", 10)); len(got) == 0 || got[0] != "container_remove" {
		t.Errorf("erase the container = %v, want container_remove first", got)
	}
	if got := names(ix.Rank("remember that Alice prefers email", 10)); !reflect.DeepEqual(got, []string{"memory_save"}) {
		t.Errorf("remember … = %v, want [memory_save]", got)
	}
	if got := names(ix.Rank("find notes", 10)); !reflect.DeepEqual(got, []string{"notes_find", "notes_search"}) {
		t.Errorf("find notes = %v, want notes_find, then notes_search", got)
	}

	// "locate" is rarer than "search" here: unchecked, its higher IDF would put the
	// one tool that locates above the three that search.
	ix = NewIndex([]Doc{
		{Name: "a_tool", Description: "Search the alpha records."},
		{Name: "b_tool", Description: "Search the beta records."},
		{Name: "c_tool", Description: "Search the gamma records."},
		{Name: "d_tool", Description: "Locate the delta records."},
		{Name: "e_tool", Description: "Unrelated."},
	})
	if got := names(ix.Rank("search records", 10)); len(got) != 4 || got[3] != "d_tool" {
		t.Errorf("search records = %v, want d_tool last of four", got)
	}
}

// TestRankShowFindsListAndGet: "show me the invoices" is how users ask for what
// APIs name list_* and get_*. With 24 invoice tools (create, delete, list, update,
// 6 versions each) every one of them matched on "invoices" alone, and the name
// order put create_* and delete_* in the dozen a turn gets, no list_* at all.
func TestRankShowFindsListAndGet(t *testing.T) {
	t.Parallel()
	var docs []Doc
	for _, verb := range []string{"create", "delete", "list", "update", "get"} {
		for v := range 6 {
			docs = append(docs, Doc{Name: fmt.Sprintf("%s_invoice_v%d", verb, v), Description: fmt.Sprintf("%s invoices (version %d)", verb, v)})
		}
	}
	ix := NewIndex(docs)
	got := names(ix.Rank("show me the invoices", 12))
	for _, n := range got {
		if !strings.HasPrefix(n, "list_") && !strings.HasPrefix(n, "get_") {
			t.Fatalf("show me the invoices = %v, want the list_ and get_ tools first", got)
		}
	}
	// A tool that uses the word itself stays first.
	ix = NewIndex(append(docs, Doc{Name: "show_invoice", Description: "Show an invoice."}))
	if got := names(ix.Rank("show me the invoices", 12)); got[0] != "show_invoice" {
		t.Errorf("with a show tool: %v, want show_invoice first", got)
	}
}

func TestRankTieBreakByName(t *testing.T) {
	t.Parallel()
	var docs []Doc
	for _, n := range []string{"zeta_tool", "alpha_tool", "mid_tool", "beta_tool"} {
		docs = append(docs, Doc{Name: n, Description: "Identical description."})
	}
	ix := NewIndex(docs)
	want := []string{"alpha_tool", "beta_tool", "mid_tool", "zeta_tool"}
	for range 20 {
		if got := names(ix.Rank("identical", 10)); !reflect.DeepEqual(got, want) {
			t.Fatalf("tie order = %v, want %v", got, want)
		}
	}
	if got := names(ix.Rank("identical description", 2)); !reflect.DeepEqual(got, want[:2]) {
		t.Errorf("top 2 of a tie = %v, want %v", got, want[:2])
	}
}

// TestRankTopKMatchesFullSort checks the bounded heap against a full ranking.
func TestRankTopKMatchesFullSort(t *testing.T) {
	t.Parallel()
	docs := registry(t, 2000)
	ix := NewIndex(docs)
	for _, q := range benchQueries(t, docs, 200) {
		all := ix.Rank(q, 0)
		for _, k := range []int{1, 5, 10} {
			top := ix.Rank(q, k)
			want := all[:min(k, len(all))]
			if !reflect.DeepEqual(top, want) {
				t.Fatalf("Rank(%q, %d) = %v, want %v", q, k, top, want)
			}
			// RankFiltered asks keep only of tools that would place: the same answer as
			// the full ranking filtered.
			for _, mod := range []int{2, 3, 7} {
				keep := func(name string) bool { return len(name)%mod != 0 }
				var want []Result
				for _, r := range all {
					if len(want) < k && keep(r.Name) {
						want = append(want, r)
					}
				}
				if got := ix.RankFiltered(q, k, keep); !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
					t.Fatalf("RankFiltered(%q, %d, len %% %d) = %v, want %v", q, k, mod, got, want)
				}
			}
		}
	}
}

func TestRankConcurrent(t *testing.T) {
	t.Parallel()
	docs := registry(t, 1000)
	ix := NewIndex(docs)
	queries := benchQueries(t, docs, 64)
	want := make([][]Result, len(queries))
	for i, q := range queries {
		want[i] = ix.Rank(q, 10)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range queries {
				j := (i + w) % len(queries)
				if got := ix.Rank(queries[j], 10); !reflect.DeepEqual(got, want[j]) {
					errs <- fmt.Errorf("query %q: concurrent result differs", queries[j])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestRankMailAndChat: the words people use for mail, chat, calendars and trackers
// find the tools that use the service's words. A probe over server-everything's tools
// and a mail API's operations answered "send an email to bob" with research tools
// and no mail tool, since "email" never met "mail" and "send" no operation's word.
func TestRankMailAndChat(t *testing.T) {
	t.Parallel()
	ix := NewIndex([]Doc{
		{Name: "mcp__everything__simulate-research-query", Description: "Simulates a deep research query, sending progress notifications as it goes.", Params: []string{"topic", "ambiguous"}},
		{Name: "mcp__everything__echo", Description: "Echoes back the input.", Params: []string{"message"}},
		{Name: "mail_messages_post", Description: "Post a mail message to the given recipients.", Params: []string{"to", "subject", "body"}},
		{Name: "mail_messages_list", Description: "List mail messages in a mailbox.", Params: []string{"mailbox", "limit"}},
		{Name: "slack_add_reaction", Description: "Add a reaction emoji to a message", Params: []string{"channel_id", "timestamp", "reaction"}},
		{Name: "slack_post_message", Description: "Post a new message to a Slack channel", Params: []string{"channel_id", "text"}},
		{Name: "calendar_create_event", Description: "Create a new calendar event.", Params: []string{"summary", "start", "end", "attendees"}},
		{Name: "jira_transition_issue", Description: "Transition a Jira issue to a new status.", Params: []string{"issue_key", "transition_id"}},
		{Name: "files_move", Description: "Move a file or directory.", Params: []string{"source", "destination"}},
	})
	for _, tt := range []struct{ query, want string }{
		{"send an email to bob", "mail_messages_post"},
		{"react with a thumbs up to that message", "slack_add_reaction"},
		{"tell the team in #eng that the release went out", "slack_post_message"},
		{"book a meeting with Dana on Thursday", "calendar_create_event"},
		{"move PROJ-123 to done", "jira_transition_issue"},
	} {
		if got := ix.Rank(tt.query, 3); len(got) == 0 || got[0].Name != tt.want {
			t.Errorf("Rank(%q) = %v, want %s first", tt.query, names(got), tt.want)
		}
	}
}
