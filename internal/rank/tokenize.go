package rank

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokenize splits text into normalised terms: it splits on every character that is
// not a letter or digit (so "_", "-", "__", "/" and spaces all separate), then splits
// camelCase and PascalCase words at their case boundaries ("getWeatherForecast" →
// get weather forecast, "HTTPServer" → http server), lower-cases, expands common
// abbreviations of tool names ("dir" → directory, "repo" → repository), drops
// stopwords and single letters, and stems each word (see Stem). Digits stay attached
// to letters ("base64", "utf8"). A URL's scheme becomes "url" and a file name such as
// "main.go" adds "file" (see appendLiteral); an issue key ("PROJ-123") adds "issue",
// an e-mail address "email", a "#channel" "channel" and an "@mention" "user" (see
// appendMarks).
func Tokenize(text string) []string {
	return appendTokens(nil, text)
}

func appendTokens(dst []string, text string) []string {
	start, prevEnd := -1, -1
	inURL := false
	for i, r := range text {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		if alnum && start < 0 {
			start = i
		}
		if !alnum && start >= 0 {
			dst, inURL = appendLiteral(dst, text, start, i, prevEnd, inURL)
			prevEnd, start = i, -1
		}
		if unicode.IsSpace(r) {
			inURL = false
		}
	}
	if start >= 0 {
		dst, _ = appendLiteral(dst, text, start, len(text), prevEnd, inURL)
	}
	return dst
}

// appendCompounds appends the terms of every two words of text that follow each
// other with only spaces between them, written as one word: users write as two words
// what tool names write as one ("back up" for backup, "clean up" for cleanup, "log
// in" for login, "roll back" for rollback). Each part is two letters or more; the
// joined word goes through appendTerm (abbreviations, stopwords, stemming) like any
// other. A query's compounds are matched besides its words; documents are indexed
// as written.
func appendCompounds(dst []string, text string) []string {
	prev := ""
	start := -1
	for i := 0; i <= len(text); i++ {
		if i < len(text) && isLetterByte(text[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			w := strings.ToLower(text[start:i])
			if prev != "" && len(w) >= 2 {
				dst = appendTerm(dst, prev+w)
			}
			prev, start = w, -1
			if len(prev) < 2 {
				prev = ""
			}
		}
		if i < len(text) && text[i] != ' ' {
			prev = ""
		}
	}
	return dst
}

func isLetterByte(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// appendLiteral appends the terms of the word text[start:end] (the previous word
// ended at prevEnd) and says whether a URL goes on after it. A URL's scheme
// ("https://") is the term "url", not "http": a query or description that holds a
// URL is about one, whatever the protocol. A file name ("main.go", "package.json",
// outside a URL) adds the term "file" after its extension.
func appendLiteral(dst []string, text string, start, end, prevEnd int, inURL bool) ([]string, bool) {
	w := text[start:end]
	if strings.HasPrefix(text[end:], "://") && isScheme(w) {
		return appendTerm(dst, "url"), true
	}
	dst = appendWord(dst, w)
	dst = appendMarks(dst, text, start, end, inURL)
	if !inURL && prevEnd >= 0 && prevEnd == start-1 && text[prevEnd] == '.' && isExtension(w) && !inAddress(text, start) &&
		!(end+1 < len(text) && text[end] == '.' && isAlnumByte(text[end+1])) {
		dst = appendTerm(dst, "file")
	}
	return dst, inURL
}

// appendMarks adds the term a word's surroundings give it: an issue key such as
// "PROJ-123" or "ENG-7" adds "issue", an e-mail address ("bob@acme.com") adds
// "email", a channel ("#eng") "channel" and a mention ("@alice") "user".
func appendMarks(dst []string, text string, start, end int, inURL bool) []string {
	if inURL {
		return dst
	}
	w := text[start:end]
	if end+1 < len(text) && text[end] == '-' && isDigitByte(text[end+1]) && isIssuePrefix(w) &&
		(start == 0 || !isAlnumByte(text[start-1]) && text[start-1] != '-') {
		return appendTerm(dst, "issue")
	}
	if start == 0 {
		return dst
	}
	atStart := start == 1 || !isAlnumByte(text[start-2]) && text[start-2] != '.'
	switch text[start-1] {
	case '@':
		if atStart {
			return appendTerm(dst, "user")
		}
		return appendTerm(dst, "email")
	case '#':
		if atStart && !isDigitByte(text[start]) {
			return appendTerm(dst, "channel")
		}
	}
	return dst
}

// isIssuePrefix reports whether w is an issue tracker's project key: 2 to 10 capital
// letters and digits, starting with a letter ("PROJ", "ENG", "K8S").
func isIssuePrefix(w string) bool {
	if len(w) < 2 || len(w) > 10 || w[0] < 'A' || w[0] > 'Z' {
		return false
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; (c < 'A' || c > 'Z') && !isDigitByte(c) {
			return false
		}
	}
	return true
}

func isDigitByte(c byte) bool { return c >= '0' && c <= '9' }

// inAddress reports whether the word at start is part of an e-mail address (an "@"
// earlier in the same run of non-space text), whose domain ("acme.com") is no file.
func inAddress(text string, start int) bool {
	for i := start - 1; i >= 0; i-- {
		switch text[i] {
		case '@':
			return true
		case ' ', '\t', '\n', '\r':
			return false
		}
	}
	return false
}

func isScheme(w string) bool {
	switch strings.ToLower(w) {
	case "http", "https", "ftp", "ftps", "ws", "wss", "file", "s3", "gs", "git", "ssh":
		return true
	}
	return false
}

// isExtension reports whether w looks like a file name extension: 2 to 5 lower-case
// letters and digits, starting with a letter ("go", "json", "mp4"; not "e" of "e.g.",
// not "2" of "v1.2").
func isExtension(w string) bool {
	if len(w) < 2 || len(w) > 5 || w[0] < 'a' || w[0] > 'z' {
		return false
	}
	return isASCIILower(w)
}

func isAlnumByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// appendWord splits one run of letters and digits at case boundaries.
func appendWord(dst []string, w string) []string {
	start := 0
	var prev rune
	for i, r := range w {
		if i > 0 && unicode.IsUpper(r) {
			next, _ := utf8.DecodeRuneInString(w[i+utf8.RuneLen(r):])
			// aB → a|B; ABc → A|Bc (the last capital of a run starts the next word).
			if unicode.IsLower(prev) || unicode.IsDigit(prev) ||
				unicode.IsUpper(prev) && unicode.IsLower(next) {
				dst = appendTerm(dst, w[start:i])
				start = i
			}
		}
		prev = r
	}
	return appendTerm(dst, w[start:])
}

func appendTerm(dst []string, w string) []string {
	w = strings.ToLower(w)
	if full, ok := abbreviations[w]; ok {
		if first, rest, two := strings.Cut(full, " "); two {
			return append(dst, Stem(first), Stem(rest))
		}
		w = full
	}
	if len(w) < 2 || stopwords[w] {
		return dst
	}
	return append(dst, Stem(w))
}

// abbreviations common in tool and parameter names, expanded so that "list_dir" and
// "list the directory" share a term.
var abbreviations = map[string]string{
	"dir": "directory", "dirs": "directories", "repo": "repository", "repos": "repositories",
	"env": "environment", "config": "configuration", "cfg": "configuration",
	"msg": "message", "msgs": "messages", "img": "image", "db": "database",
	"info": "information", "doc": "document", "docs": "documents", "cmd": "command",
	"exec": "execute", "args": "arguments", "arg": "argument", "param": "parameter",
	"params": "parameters", "fn": "function", "func": "function", "tmp": "temporary",
	"temp": "temporary", "del": "delete", "pr": "pull request", "prs": "pull requests",
	"auth": "authentication", "desc": "description", "num": "number", "max": "maximum",
	"min": "minimum", "src": "source", "dst": "destination", "dest": "destination",
	"folder": "directory", "folders": "directories",
	"ack": "acknowledge", "dm": "direct message", "dms": "direct messages",
	"k8s": "kubernetes", "js": "javascript", "mail": "email", "mails": "emails",
	"worklog": "work log", "worklogs": "work logs", "freebusy": "free busy",
	"rollback": "undo", "timezone": "time zone", "timezones": "time zones",
}

// stopwords are words that say nothing about which tool fits: articles, pronouns,
// auxiliaries and the filler of requests ("please", "want", "need").
var stopwords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "to": true, "in": true, "on": true,
	"for": true, "from": true, "with": true, "by": true, "and": true, "or": true,
	"is": true, "are": true, "be": true, "was": true, "it": true, "its": true,
	"this": true, "that": true, "these": true, "those": true, "as": true, "at": true,
	"into": true, "i": true, "me": true, "my": true, "you": true, "your": true,
	"we": true, "our": true, "us": true, "can": true, "could": true, "should": true,
	"would": true, "will": true, "do": true, "does": true, "how": true, "what": true,
	"which": true, "please": true, "want": true, "need": true, "some": true,
	"there": true, "here": true, "then": true, "than": true, "if": true, "so": true,
	"one": true, "via": true, "all": true, "any": true, "each": true, "every": true,
	"much": true, "many": true, "about": true, "also": true, "just": true, "very": true,
	"have": true, "has": true, "had": true, "did": true, "been": true, "were": true, "am": true,
	// The rest of a usual English list (function words, question words), kept out of
	// the list above only where a tool's name uses one ("before", "after", "off").
	"up": true, "most": true, "more": true, "why": true, "who": true, "whom": true,
	"when": true, "where": true, "because": true, "while": true, "again": true,
	"once": true, "same": true, "such": true, "own": true, "too": true, "both": true,
	"few": true, "other": true, "only": true, "no": true, "nor": true, "they": true,
	"them": true, "their": true, "he": true, "she": true, "him": true, "her": true,
	"his": true, "being": true, "having": true, "doing": true, "don": true, "let": true,
	"it's": true, "what's": true, "whats": true, "let's": true, "yours": true,
}

// related maps a query term (stemmed) to terms that mean nearly the same in tool
// names and descriptions, so that "remove" finds a tool that deletes, "find" one that
// searches, "remember" a memory. A match through a related term counts relatedWeight
// of a match of the word itself, so tools that use the query's own word stay first.
// Only the query is expanded; documents are indexed as written.
var related = buildRelated(
	[][]string{ // each word is related to every other of its group
		{"delete", "remove", "erase", "destroy"},
		{"create", "make"},
		{"find", "search", "locate", "lookup"},
		{"update", "modify", "change", "edit"},
		{"show", "display", "view"},
		{"start", "launch", "begin"},
		{"stop", "halt", "terminate"},
		{"copy", "duplicate", "clone"},
		{"url", "link"},
		// Messages, mail, calendars, trackers: the words users and these tools use.
		{"send", "post"},
		{"reply", "respond", "answer"},
		{"meeting", "event", "appointment"},
		{"free", "available", "busy"},
		{"ticket", "issue"},
		{"undo", "revert"},
		{"restart", "reboot"},
		{"cost", "spend", "billing"},
	},
	map[string][]string{ // one way: the query word → the words tools use
		"remember": {"memory"}, "memorize": {"memory"}, "recall": {"memory"},
		"forget":   {"memory", "delete"},
		"download": {"fetch", "pull"},
		"big":      {"size"}, "large": {"size"}, "space": {"size"}, "disk": {"size"},
		"open": {"navigate"}, "visit": {"navigate"}, "go": {"navigate"},
		"look": {"search", "find"},
		// "show me the invoices": what APIs name list_invoices or get_invoice.
		"show": {"list", "get"}, "see": {"list", "get"},
		"news": {"web", "search"}, "google": {"web", "search"}, "internet": {"web"}, "online": {"web"},
		"inbox": {"email"}, "mailbox": {"email"}, "newsletter": {"email"},
		"email":    {"message", "mailbox", "inbox"},
		"database": {"sql", "schema"},
		"ping":     {"send", "message"}, "tell": {"send", "message"}, "notify": {"send", "message"},
		"text": {"message", "sms"}, "sms": {"message"},
		"emoji": {"reaction"},
		"book":  {"create", "event"}, "schedule": {"create", "event"},
		"reschedule": {"update", "event"},
		"tomorrow":   {"event", "calendar"}, "agenda": {"event", "calendar"},
		"invite": {"event"}, "decline": {"respond"}, "accept": {"respond"}, "rsvp": {"respond"},
		"cancel": {"delete"},
		"bug":    {"issue"}, "task": {"issue"}, "story": {"issue"},
		"done": {"status", "transition", "close"}, "close": {"status", "transition"},
		"hour": {"time"}, "minute": {"time"},
		"ship": {"deploy", "release", "merge"},
		"main": {"branch"}, "master": {"branch"},
		"crash": {"log", "error"}, "fail": {"error", "log"}, "broken": {"error"},
		"roll":   {"rollout", "undo"},
		"slow":   {"slowest", "performance"},
		"column": {"schema"},
		"bill":   {"invoice"}, "charge": {"payment", "invoice"},
		"promo": {"coupon"}, "discount": {"coupon"}, "money": {"balance"},
		"rename": {"move"},
	},
)

// relatedWeight is how much a match through a related term counts.
const relatedWeight = 0.5

func buildRelated(groups [][]string, oneWay map[string][]string) map[string][]string {
	out := map[string][]string{}
	add := func(from, to string) {
		f, t := Stem(from), Stem(to)
		if f != t && !slices.Contains(out[f], t) {
			out[f] = append(out[f], t)
		}
	}
	for _, g := range groups {
		for _, a := range g {
			for _, b := range g {
				add(a, b)
			}
		}
	}
	for from, tos := range oneWay {
		for _, to := range tos {
			add(from, to)
		}
	}
	return out
}

// Stem strips the commonest English inflections so that a query and a description
// that use different forms of a word meet: plural -s/-es/-ies, -ing, -ed, a doubled
// final consonant left by them, the derivational -ation, -tion, -ate and -ment (see
// stemDerived), a final silent -e, and last the -er or -or of an agent noun, -ator
// as -ate (see stemAgent) ("create", "creates", "creating", "created", "creation",
// "creator" → "creat"; "reminder" → "remind"). It is deliberately small: it needs to be
// consistent, not linguistically right, since queries and documents go through it
// alike.
func Stem(w string) string {
	if len(w) <= 2 || !isASCIILower(w) {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "ches"),
		strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "zes"):
		w = w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") &&
		!strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	}
	for _, suf := range []string{"ing", "ed"} {
		if stem, ok := strings.CutSuffix(w, suf); ok && len(stem) >= 2 && hasVowel(stem) {
			w = undouble(stem)
			break
		}
	}
	if stem, ok := strings.CutSuffix(w, "ator"); ok && len(stem)+2 >= agentMinStem {
		w = stem + "ate" // "translator" → "translate", on to stemDerived
	}
	w = stemDerived(w)
	if len(w) >= 3 && w[len(w)-1] == 'e' {
		w = w[:len(w)-1]
	}
	return stemAgent(w)
}

// agentMinStem is the fewest letters stemAgent leaves. Five keeps the -er and -or
// of the short nouns whose stripped stem would be another word or none ("user",
// "order", "power", "paper", "water"; "server" and "serve", "header" and "head",
// "sender" and "send", "number", "filter", "docker", "folder"): measured on the
// labelled sets, four let "sender" match "send" and lost team held-out MRR (0.510 →
// 0.506); five lost nothing.
const agentMinStem = 5

// stemAgent strips the -er or -or of an agent noun so that it meets its verb:
// "reminder" and "remind", "scheduler" and "schedule", "formatter" and "format",
// "converter" and "convert", "compressor" and "compress" ("translator" and
// "translate" meet through Stem's -ator → -ate). It runs last, on what the other
// steps left, so every form of a verb that itself ends in -er or -or meets too
// ("filtered" and "filter", "monitoring" and "monitor"). At least agentMinStem
// letters stay, and -ther is no agent noun ("weather", "whether", "together").
func stemAgent(w string) string {
	stem, ok := strings.CutSuffix(w, "er")
	if !ok {
		stem, ok = strings.CutSuffix(w, "or")
	}
	if !ok || len(stem) < agentMinStem || strings.HasSuffix(stem, "th") {
		return w
	}
	return undouble(stem)
}

// stemDerived strips the derivational endings that turn a tool's verb into the noun
// of its description or of a user's message, and back: -ation, -tion, -ate
// ("configuration", "configure" → "configur"; "reaction", "react"; "validation",
// "validate" → "valid"), then -ment ("deployment", "deploy"; "attachment",
// "attach"). At least four letters stay, so short words keep their ending
// ("action", "comment", "payment", "state").
func stemDerived(w string) string {
	cut := func(suffix string, keep string) bool {
		stem, ok := strings.CutSuffix(w, suffix)
		if ok && len(stem) >= 4 {
			w = stem + keep
		}
		return ok && len(stem) >= 4
	}
	_ = cut("ation", "") || cut("tion", "t") || cut("ate", "")
	cut("ment", "")
	return w
}

// undouble turns "runn" into "run" (not "ll", "ss", "zz", as in "install", "pass",
// and not when only two letters would be left, as in "add").
func undouble(w string) string {
	n := len(w)
	if n >= 4 && w[n-1] == w[n-2] && !strings.ContainsRune("aeioulsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

func hasVowel(w string) bool { return strings.ContainsAny(w, "aeiouy") }

func isASCIILower(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
