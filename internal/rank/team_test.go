package rank

import "testing"

// teamDocs is scenario 5's catalogue: the core tools and the tools of about twenty
// MCP servers and OpenAPI specs a team connects (GitHub, git, Slack, Gmail, Outlook,
// Google Calendar, Jira/Confluence, Linear, Postgres, SQLite, Playwright, Kubernetes,
// AWS, Stripe, Notion, Sentry, Datadog, PagerDuty, search, memory, Drive, Docker,
// Vercel, Cloudflare, HubSpot, Zendesk, Twilio, …), named and described in the style
// those servers publish.
func teamDocs(t testing.TB) []Doc {
	return append(coreDocs(t), docsFile(t, "team_tools.json")...)
}

// teamHeldOutFloor guards recall@12 of the held-out half of the team messages (see
// team_queries_heldout.txt): measured value minus about two queries' worth (0.662
// before derived-word stemming, the wider stopword list, issue keys, addresses and
// channels, and the mail, chat, calendar, tracker and ops words; 0.775 after). The
// ranker is tuned on the other half only; raise the floor (measured − 0.05) when a
// change that generalises lifts it.
const teamHeldOutFloor = 0.725

// teamTuneFloor guards the half the ranker was tuned on, with the same margin
// (0.637 before, 0.912 after).
const teamTuneFloor = 0.86

// TestRecallTeamHeldOut is recall@12 (the listing's default dozen) of the held-out
// messages over the ~420-tool team catalogue.
func TestRecallTeamHeldOut(t *testing.T) {
	t.Parallel()
	docs := teamDocs(t)
	queries := labelledFile(t, "team_queries_heldout.txt")
	if len(docs) < 400 || len(queries) < 40 {
		t.Fatalf("%d tools and %d labelled queries, want at least 400 and 40", len(docs), len(queries))
	}
	checkRecall(t, docs, queries, 12, teamHeldOutFloor)
}

// TestRecallTeamTune is recall@12 of the messages the ranker was tuned on.
func TestRecallTeamTune(t *testing.T) {
	t.Parallel()
	docs := teamDocs(t)
	queries := labelledFile(t, "team_queries_tune.txt")
	if len(docs) < 400 || len(queries) < 40 {
		t.Fatalf("%d tools and %d labelled queries, want at least 400 and 40", len(docs), len(queries))
	}
	checkRecall(t, docs, queries, 12, teamTuneFloor)
}
