package rank

import (
	"testing"
)

// BenchmarkRank5000 ranks queries against 5,000 tools. Besides ns/op (the mean) it
// reports the median and 99th percentile of single-query latency over 3,000 queries,
// measured after the timed loop.
func BenchmarkRank5000(b *testing.B) {
	docs := registry(b, 5000)
	ix := NewIndex(docs)
	queries := benchQueries(b, docs, 3000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ix.Rank(queries[i%len(queries)], 10)
		i++
	}
	lat := latencies(ix, queries)
	b.ReportMetric(float64(percentile(lat, 0.5).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(percentile(lat, 0.99).Nanoseconds()), "p99-ns")
}

// BenchmarkNewIndex5000 is the cost of rebuilding the index when the tool set changes.
func BenchmarkNewIndex5000(b *testing.B) {
	docs := registry(b, 5000)
	b.ReportAllocs()
	for b.Loop() {
		NewIndex(docs)
	}
}

// BenchmarkRankTeam ranks the team messages (both halves) against the ~420 tools of
// scenario 5's catalogue, the size a session's listing ranks per turn.
func BenchmarkRankTeam(b *testing.B) {
	ix := NewIndex(teamDocs(b))
	var queries []string
	for _, f := range []string{"team_queries_tune.txt", "team_queries_heldout.txt"} {
		for _, l := range labelledFile(b, f) {
			queries = append(queries, l.query)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ix.Rank(queries[i%len(queries)], 12)
		i++
	}
}
