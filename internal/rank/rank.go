// Package rank orders tools by how well their name, description and parameter names
// match a free-text query, so a session can send the model the few schemas that fit
// the turn instead of all of them (tool suggestion; the model widens the set with
// tool_expand_tools).
//
// The ranking is BM25F: per field term frequencies are length-normalised, weighted
// (name highest), summed, and saturated once per term; each term is weighted by its
// inverse document frequency. Everything but the query-side sum is computed when the
// Index is built, so ranking a query is a walk over a few posting lists. A query word
// also walks the lists of a few words of nearly the same meaning ("remove" those of
// "delete"), at a discount, since users and tool authors seldom pick the same word.
package rank

import (
	"math"
	"slices"
	"strings"
	"sync"
)

// Doc is one tool as the ranker sees it.
type Doc struct {
	Name        string
	Description string
	// Params are the tool's parameter names (top-level properties of its schema).
	Params []string
}

// Result is one ranked tool; higher scores fit better.
type Result struct {
	Name  string
	Score float64
}

// Params tune the ranking. DefaultParams are the usual BM25 constants with the name
// weighted three times the description.
type Params struct {
	K1, B                               float64
	NameWeight, DescWeight, ParamWeight float64
}

// DefaultParams returns k1 1.2, b 0.5, field weights name 3, description 1, parameters
// 0.5. Parameter names are mostly generic (id, path, limit, opt_fields) and real
// descriptions range from four words to a page, so both count less than BM25's usual
// b 0.75 and the former weight 1.5 made them: measured on the labelled queries of
// the real-world fixture and of the synthetic registry, recall and MRR both rose.
func DefaultParams() Params {
	return Params{K1: 1.2, B: 0.5, NameWeight: 3, DescWeight: 1, ParamWeight: 0.5}
}

// Index is an immutable BM25F index over a set of tools. It is safe for concurrent use
// and cheap enough to rebuild whenever the set changes (tens of milliseconds for 5,000
// tools).
type Index struct {
	names    []string // doc id → name; ids follow name order, so lower id wins ties
	postings map[string][]posting
	scratch  sync.Pool
}

type posting struct {
	doc    int32
	weight float64 // the term's whole BM25F contribution to this doc's score
}

type field int

const (
	fName field = iota
	fDesc
	fParams
	numFields
)

// NewIndex builds an index with DefaultParams. Docs with an empty or repeated name
// are skipped (the first of a name is kept).
func NewIndex(docs []Doc) *Index { return NewIndexWith(docs, DefaultParams()) }

// NewIndexWith builds an index with the given parameters.
func NewIndexWith(docs []Doc, p Params) *Index {
	docs = uniqueSorted(docs)
	n := len(docs)
	weights := [numFields]float64{p.NameWeight, p.DescWeight, p.ParamWeight}

	// Pass 1: intern terms, count term frequencies per doc and field (as runs of
	// (term, tf) per doc) and field lengths.
	type count struct {
		term int32
		tf   [numFields]float32
	}
	termID := map[string]int32{}
	var terms []string
	var df []int32
	counts := make([][]count, n)
	lens := make([][numFields]float64, n)
	var total [numFields]float64
	slot := map[int32]int{} // term → index in this doc's counts; reused
	var buf []string
	for i, d := range docs {
		clear(slot)
		var cs []count
		texts := [numFields]string{d.Name, d.Description, strings.Join(d.Params, " ")}
		for f, text := range texts {
			buf = appendTokens(buf[:0], text)
			for _, term := range buf {
				id, ok := termID[term]
				if !ok {
					id = int32(len(terms))
					termID[term] = id
					terms = append(terms, term)
					df = append(df, 0)
				}
				j, seen := slot[id]
				if !seen {
					j = len(cs)
					slot[id] = j
					cs = append(cs, count{term: id})
					df[id]++
				}
				cs[j].tf[f]++
			}
			lens[i][f] = float64(len(buf))
			total[f] += float64(len(buf))
		}
		counts[i] = cs
	}
	var avg [numFields]float64
	for f := range avg {
		if n > 0 {
			avg[f] = total[f] / float64(n)
		}
	}

	// Pass 2: the BM25F weight of every (term, doc), appended in doc order.
	idf := make([]float64, len(terms))
	for id, d := range df {
		idf[id] = idfOf(n, int(d))
	}
	lists := make([][]posting, len(terms))
	for id, d := range df {
		lists[id] = make([]posting, 0, d)
	}
	ix := &Index{names: make([]string, n), postings: make(map[string][]posting, len(terms))}
	for i, d := range docs {
		ix.names[i] = d.Name
		for _, c := range counts[i] {
			var pseudo float64
			for f := range numFields {
				if c.tf[f] == 0 {
					continue
				}
				norm := 1.0
				if avg[f] > 0 {
					norm = 1 - p.B + p.B*lens[i][f]/avg[f]
				}
				pseudo += weights[f] * float64(c.tf[f]) / norm
			}
			w := idf[c.term] * pseudo * (p.K1 + 1) / (p.K1 + pseudo)
			lists[c.term] = append(lists[c.term], posting{doc: int32(i), weight: w})
		}
	}
	for id, term := range terms {
		ix.postings[term] = lists[id]
	}
	ix.scratch.New = func() any { return &scratch{scores: make([]float64, n), seen: map[string]struct{}{}} }
	return ix
}

func uniqueSorted(docs []Doc) []Doc {
	seen := make(map[string]bool, len(docs))
	idx := make([]int, 0, len(docs))
	for i, d := range docs {
		if d.Name == "" || seen[d.Name] {
			continue
		}
		seen[d.Name] = true
		idx = append(idx, i)
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(docs[a].Name, docs[b].Name) })
	out := make([]Doc, len(idx))
	for i, j := range idx {
		out[i] = docs[j]
	}
	return out
}

// idfOf is the inverse document frequency of a term that df of n docs hold.
func idfOf(n, df int) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

func (ix *Index) idf(df int) float64 { return idfOf(len(ix.names), df) }

// Len returns the number of tools in the index.
func (ix *Index) Len() int { return len(ix.names) }

type scratch struct {
	scores    []float64 // by doc id; all zero between queries
	touched   []int32
	terms     []string
	compounds []string
	seen      map[string]struct{}
}

// Rank returns up to limit tools matching query, best first; ties go to the name that
// sorts first. limit <= 0 returns every tool that matches at all. Tools that share no
// term with the query are never returned.
func (ix *Index) Rank(query string, limit int) []Result {
	return ix.RankFiltered(query, limit, nil)
}

// RankFiltered is Rank over the tools for which keep returns true (keep nil keeps
// all), e.g. a session's allowed tools ranked against a global index. keep is asked
// only of tools that match the query and score high enough to place, so it must
// answer the same whenever it is asked.
func (ix *Index) RankFiltered(query string, limit int, keep func(name string) bool) []Result {
	s := ix.scratch.Get().(*scratch)
	defer ix.scratch.Put(s)
	s.terms = appendTokens(s.terms[:0], query)
	s.touched = s.touched[:0]
	clear(s.seen)
	for _, term := range s.terms {
		if _, dup := s.seen[term]; dup {
			continue
		}
		s.seen[term] = struct{}{}
		s.add(ix.postings[term], 1)
	}
	// Two words written as one ("back up" → backup), as a word of the query.
	s.compounds = appendCompounds(s.compounds[:0], query)
	for _, term := range s.compounds {
		if _, dup := s.seen[term]; dup {
			continue
		}
		s.seen[term] = struct{}{}
		s.add(ix.postings[term], 1)
	}
	// Related terms after the query's own, so a word the query also holds counts once.
	// A related term rarer than the query's word would outweigh it (its IDF is
	// higher), so it counts at most as much as the word itself would.
	for _, term := range s.terms {
		for _, rel := range related[term] {
			if _, dup := s.seen[rel]; dup {
				continue
			}
			s.seen[rel] = struct{}{}
			list := ix.postings[rel]
			if len(list) == 0 {
				continue
			}
			s.add(list, relatedWeight*min(1, ix.idf(len(ix.postings[term]))/ix.idf(len(list))))
		}
	}
	h := resultHeap{limit: limit}
	if limit > 0 {
		h.hits = make([]hit, 0, min(limit, len(s.touched)))
	}
	for _, doc := range s.touched {
		x := hit{doc: doc, score: s.scores[doc]}
		s.scores[doc] = 0
		// keep is asked only of a tool that would place: with a dozen to fill from
		// thousands, asking every touched tool cost more than the ranking.
		if !h.takes(x) || keep != nil && !keep(ix.names[doc]) {
			continue
		}
		h.offer(x)
	}
	return h.results(ix.names)
}

func (s *scratch) add(list []posting, factor float64) {
	for _, p := range list {
		if s.scores[p.doc] == 0 {
			s.touched = append(s.touched, p.doc)
		}
		s.scores[p.doc] += factor * p.weight
	}
}

type hit struct {
	doc   int32
	score float64
}

// better orders hits: higher score first, then lower doc id (name order).
func better(a, b hit) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.doc < b.doc
}

// resultHeap keeps the best limit hits in a min-heap whose root is the worst kept
// (limit <= 0: keeps all, unordered until results).
type resultHeap struct {
	limit int
	hits  []hit
}

// takes reports whether offer would keep x now.
func (h *resultHeap) takes(x hit) bool {
	return h.limit <= 0 || len(h.hits) < h.limit || better(x, h.hits[0])
}

func (h *resultHeap) offer(x hit) {
	switch {
	case h.limit <= 0:
		h.hits = append(h.hits, x)
	case len(h.hits) < h.limit:
		h.hits = append(h.hits, x)
		h.up(len(h.hits) - 1)
	case better(x, h.hits[0]):
		h.hits[0] = x
		h.down(0)
	}
}

func (h *resultHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !better(h.hits[parent], h.hits[i]) {
			return
		}
		h.hits[parent], h.hits[i] = h.hits[i], h.hits[parent]
		i = parent
	}
}

func (h *resultHeap) down(i int) {
	n := len(h.hits)
	for {
		worst, l, r := i, 2*i+1, 2*i+2
		if l < n && better(h.hits[worst], h.hits[l]) {
			worst = l
		}
		if r < n && better(h.hits[worst], h.hits[r]) {
			worst = r
		}
		if worst == i {
			return
		}
		h.hits[i], h.hits[worst] = h.hits[worst], h.hits[i]
		i = worst
	}
}

func (h *resultHeap) results(names []string) []Result {
	slices.SortFunc(h.hits, func(a, b hit) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	out := make([]Result, len(h.hits))
	for i, x := range h.hits {
		out[i] = Result{Name: names[x.doc], Score: x.score}
	}
	return out
}
