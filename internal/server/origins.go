package server

import "strings"

// origins matches a request's Origin against cors.allowed_origins, one definition
// for both places that ask: the CORS middleware (which origins browsers may read
// answers from) and unauthenticated mode's web-page check (which pages may send at
// all). An entry is an exact origin, compared without regard to case as browsers'
// are, "*" for any, or an origin with one "*" standing for part of it
// (https://*.example.com).
type origins struct {
	any      bool
	exact    map[string]bool
	patterns []originPattern
}

// originPattern is an entry with a "*": the origin starts with prefix and ends with
// suffix, and the "*" stands for at least one character: https://*.example.com
// matches https://a.example.com, not https://.example.com.
type originPattern struct{ prefix, suffix string }

func newOrigins(list []string) *origins {
	o := &origins{exact: map[string]bool{}}
	for _, e := range list {
		e = strings.ToLower(e)
		if e == "*" {
			o.any = true
		} else if i := strings.IndexByte(e, '*'); i >= 0 {
			o.patterns = append(o.patterns, originPattern{e[:i], e[i+1:]})
		} else {
			o.exact[e] = true
		}
	}
	return o
}

func (o *origins) allowed(origin string) bool {
	if o.any {
		return true
	}
	origin = strings.ToLower(origin)
	if o.exact[origin] {
		return true
	}
	for _, p := range o.patterns {
		if len(origin) > len(p.prefix)+len(p.suffix) && strings.HasPrefix(origin, p.prefix) && strings.HasSuffix(origin, p.suffix) {
			return true
		}
	}
	return false
}
