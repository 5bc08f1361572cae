package toolmgr

import (
	"regexp"
	"time"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// patternMatchTimeout bounds one match of a pattern that only the backtracking engine
// takes: the pattern comes from a tool's schema, the text from a model.
const patternMatchTimeout = 100 * time.Millisecond

// schemaRegexp compiles a schema's "pattern" (and "patternProperties", "format":
// "regex"). JSON Schema patterns are ECMA-262 regular expressions, and schemas written
// for JavaScript use what Go's regexp lacks: zod's email check has lookaheads
// ((?!\.)), Asana's OpenAPI document a backreference (\1). Go's engine, linear in
// time, takes every pattern it can; the others go to regexp2 in ECMAScript mode,
// whose matching backtracks and so is cut off after patternMatchTimeout.
func schemaRegexp(pattern string) (jsonschema.Regexp, error) {
	re, err := regexp.Compile(pattern)
	if err == nil {
		return re, nil
	}
	ecma, ecmaErr := regexp2.Compile(pattern, regexp2.ECMAScript)
	if ecmaErr != nil {
		return nil, err // Go's message: the one operators know
	}
	ecma.MatchTimeout = patternMatchTimeout
	return ecmaRegexp{ecma}, nil
}

// ecmaRegexp is a pattern compiled by regexp2.
type ecmaRegexp struct{ re *regexp2.Regexp }

func (r ecmaRegexp) String() string { return r.re.String() }

// MatchString reports whether s holds a match. A match cut off by the timeout counts
// as one: the value is not refused for what could not be decided, and the tool (its
// MCP server, its API) still checks it.
func (r ecmaRegexp) MatchString(s string) bool {
	ok, err := r.re.MatchString(s)
	return ok || err != nil
}
