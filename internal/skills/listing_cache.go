package skills

import "sync"

// maxCachedListings bounds a ListingCache: distinct whitelists (and tool-group
// gates) times budgets. Past it the cache starts again empty.
const maxCachedListings = 256

// ListingCache remembers Listing's answers for sessions' views, since counting the
// tokens of a large library's listing costs milliseconds and the prompt route asks
// on every turn. An answer is keyed on everything it depends on: the Manager and the
// version of its library (Version changes on any edit, addition or removal of a
// skill, so a reload that changes nothing keeps the answers), which of the library's
// skills the session sees (its whitelist and gate, evaluated on every call, so a
// tool group switched off or on is seen at once) and the budget. The count function
// is fixed per cache. Safe for concurrent use.
type ListingCache struct {
	count func(string) int

	mu      sync.Mutex
	entries map[listingKey]PromptListing
	// versions is the newest library version seen per Manager: answers for older
	// ones are dropped, and never stored again.
	versions map[*Manager]uint64
}

type listingKey struct {
	m       *Manager
	version uint64
	budget  int
	// visible holds one bit per skill of the library's snapshot (in its name
	// order): whether the session sees it.
	visible string
}

// NewListingCache returns an empty cache for listings whose tokens count measures.
func NewListingCache(count func(string) int) *ListingCache {
	return &ListingCache{count: count, entries: map[listingKey]PromptListing{}, versions: map[*Manager]uint64{}}
}

// Listing is Listing(p.List(), budget, count), from the cache when the same library
// version, visible skills and budget were listed before.
func (c *ListingCache) Listing(p *Proxy, budget int) PromptListing {
	snap := p.m.snap.Load()
	bits := make([]byte, (len(snap.list)+7)/8)
	for i, sk := range snap.list {
		if p.Allows(sk.Name) {
			bits[i/8] |= 1 << (i % 8)
		}
	}
	key := listingKey{m: p.m, version: snap.version, budget: budget, visible: string(bits)}
	c.mu.Lock()
	l, ok := c.entries[key]
	c.mu.Unlock()
	if !ok {
		var visible []Skill
		for i, sk := range snap.list {
			if bits[i/8]&(1<<(i%8)) != 0 {
				visible = append(visible, sk) // read only: Listing keeps no part of it
			}
		}
		l = Listing(visible, budget, c.count)
		c.store(key, l)
	}
	l.Described, l.NamedOnly = cloneStrings(l.Described), cloneStrings(l.NamedOnly)
	return l
}

func (c *ListingCache) store(key listingKey, l PromptListing) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch newest, seen := c.versions[key.m]; {
	case seen && key.version < newest:
		return // a reload has already replaced this library
	case !seen || key.version > newest:
		c.versions[key.m] = key.version
		for k := range c.entries {
			if k.m == key.m {
				delete(c.entries, k)
			}
		}
	}
	if len(c.entries) >= maxCachedListings {
		clear(c.entries)
	}
	c.entries[key] = l
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append(make([]string, 0, len(s)), s...)
}
