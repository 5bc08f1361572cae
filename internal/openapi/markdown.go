package openapi

// HTML in descriptions. CommonMark allows raw HTML, and real documents use it
// (Asana's: <b>, <code>, <a href>, <table>; Docker's: <p><br /></p>, <sup>). A model
// reads the tags as noise and pays tokens for them, and the ranker indexes them as
// words; so the HTML fragments of a description become Markdown when the tools are
// built. Only the fragments: converting the whole text as HTML would collapse the
// Markdown's line breaks (lists, quotes) and escape its *, _ and backticks.

import (
	"regexp"
	"strings"
	"sync"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
)

// htmlTag matches a tag of an element descriptions are written with. Other <words>
// are text: placeholders (<image>, <YOUR_ACCESS_TOKEN>), XML in prose.
var htmlTag = regexp.MustCompile(`(?i)<(/?)(a|abbr|b|blockquote|br|cite|code|dd|del|div|dl|dt|em|h[1-6]|hr|i|img|ins|kbd|li|mark|ol|p|pre|q|s|samp|small|span|strike|strong|sub|sup|table|tbody|td|tfoot|th|thead|tr|tt|u|ul|var)(?:\s[^<>]*)?/?>`)

var (
	voidTags  = map[string]bool{"br": true, "hr": true, "img": true}
	blockTags = map[string]bool{"blockquote": true, "dd": true, "div": true, "dl": true, "dt": true, "h1": true, "h2": true, "h3": true,
		"h4": true, "h5": true, "h6": true, "hr": true, "li": true, "ol": true, "p": true, "pre": true, "table": true, "tbody": true,
		"td": true, "tfoot": true, "th": true, "thead": true, "tr": true, "ul": true}
)

// mdConverter converts HTML fragments. It escapes nothing: the text in a fragment
// was written for a Markdown reader too. Table cells get one space of padding, not
// the aligned columns that cost a model tokens.
var mdConverter = sync.OnceValue(func() *converter.Converter {
	conv := converter.NewConverter(converter.WithEscapeMode(converter.EscapeModeDisabled), converter.WithPlugins(
		base.NewBasePlugin(), commonmark.NewCommonmarkPlugin(commonmark.WithListEndComment(false)),
		table.NewTablePlugin(table.WithCellPaddingBehavior(table.CellPaddingBehaviorMinimal)),
		strikethrough.NewStrikethroughPlugin(),
	))
	// 10<sup>-9</sup> is 10^-9, not 10-9.
	conv.Register.RendererFor("sup", converter.TagTypeInline, func(ctx converter.Context, w converter.Writer, n *html.Node) converter.RenderStatus {
		w.WriteString("^")
		ctx.RenderChildNodes(ctx, w, n)
		return converter.RenderSuccess
	}, converter.PriorityStandard)
	// The base plugin writes text's < and > as entities; a model reads <key> better.
	conv.Register.TextTransformer(func(_ converter.Context, content string) string {
		return entityUnescaper.Replace(content)
	}, converter.PriorityLate)
	return conv
})

var entityUnescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">")

// descMarkdown converts the HTML in a description to Markdown; a description without
// HTML tags is returned as it is. memo, when not nil, keeps the conversions of one
// build: a schema's description recurs wherever the schema is referenced.
func descMarkdown(s string, memo map[string]string) string {
	if !strings.Contains(s, "<") || !htmlTag.MatchString(s) {
		return s
	}
	if md, ok := memo[s]; ok {
		return md
	}
	md := htmlToMarkdown(s)
	if memo != nil {
		memo[s] = md
	}
	return md
}

// fragment is a run of HTML in a description: from an opening tag to the tag that
// closes it, or one void or stray tag.
type fragment struct {
	start, end int
	tags       [][]int // positions of the known tags within it, relative to start
	first      string  // the first tag's element name
	onlyBreaks bool    // nothing but <br>s
}

func htmlToMarkdown(s string) string {
	var b strings.Builder
	pending := 0 // the line breaks owed before the next text: 1 a line, 2 a paragraph
	text := func(t string) {
		if pending > 0 {
			// The breaks owed, or the ones the text around had, whichever is more.
			lead := len(t) - len(strings.TrimLeft(t, " \t\r\n"))
			n := max(pending, min(strings.Count(t[:lead], "\n"), 2))
			if t = t[lead:]; t == "" {
				pending = n
				return
			}
			out := strings.TrimRight(b.String(), " \t\r\n")
			n = max(n, min(strings.Count(b.String()[len(out):], "\n"), 2))
			b.Reset()
			b.WriteString(out)
			if out != "" {
				b.WriteString(strings.Repeat("\n", n))
			}
			pending = 0
		}
		b.WriteString(t)
	}
	at := 0
	for _, f := range htmlFragments(s) {
		text(s[at:f.start])
		at = f.end
		if f.onlyBreaks {
			pending = min(pending+len(f.tags), 2)
			continue
		}
		md := convertFragment(s[f.start:f.end], f.tags)
		if blockTags[f.first] || strings.Contains(md, "\n") {
			pending = 2
			text(md)
			pending = 2
			continue
		}
		text(md)
	}
	text(s[at:])
	return strings.TrimSpace(b.String())
}

// convertFragment converts one fragment; a '<' that starts no known tag (<key>) is
// text, not an element the parser would make of it.
func convertFragment(frag string, tags [][]int) string {
	var h strings.Builder
	at := 0
	for _, t := range tags {
		h.WriteString(strings.ReplaceAll(frag[at:t[0]], "<", "&lt;"))
		h.WriteString(frag[t[0]:t[1]])
		at = t[1]
	}
	h.WriteString(strings.ReplaceAll(frag[at:], "<", "&lt;"))
	md, err := mdConverter().ConvertString(h.String())
	if err != nil {
		return frag
	}
	return strings.TrimSpace(md)
}

// htmlFragments finds the HTML in s outside code (fenced blocks, code spans). A
// fragment never spans a blank line: in CommonMark no HTML does, and an element left
// open (<p>) ends there. Elements side by side, with at most spaces between them
// (<b>Required scope: </b><code>goals:read</code>), are one fragment, which keeps
// the spaces.
func htmlFragments(s string) []fragment {
	code := codeRanges(s)
	var frags []fragment
	var open []string
	var cur fragment
	lastEnd := 0
	flush := func(end int) {
		cur.end = end
		frags = append(frags, cur)
		open = open[:0]
	}
	for _, m := range htmlTag.FindAllStringSubmatchIndex(s, -1) {
		if inRanges(code, m[0]) {
			continue
		}
		closing := m[3] > m[2]
		name := strings.ToLower(s[m[4]:m[5]])
		if len(open) > 0 && strings.Contains(s[lastEnd:m[0]], "\n\n") {
			flush(lastEnd)
		}
		if len(open) == 0 {
			if n := len(frags); n > 0 && frags[n-1].end == lastEnd && strings.TrimLeft(s[lastEnd:m[0]], " \t") == "" {
				cur = frags[n-1]
				frags = frags[:n-1]
			} else {
				cur = fragment{start: m[0], first: name, onlyBreaks: true}
			}
		}
		lastEnd = m[1]
		cur.tags = append(cur.tags, []int{m[0] - cur.start, m[1] - cur.start})
		cur.onlyBreaks = cur.onlyBreaks && name == "br"
		switch {
		case closing:
			i := len(open) - 1
			for i >= 0 && open[i] != name {
				i--
			}
			if i >= 0 {
				open = open[:i]
			}
			if len(open) == 0 {
				flush(m[1])
			}
		case voidTags[name] || strings.HasSuffix(s[m[0]:m[1]], "/>"):
			if len(open) == 0 {
				flush(m[1])
			}
		default:
			open = append(open, name)
		}
	}
	if len(open) > 0 {
		flush(lastEnd)
	}
	return frags
}

// codeRanges are the byte ranges of s's fenced code blocks and code spans, where
// tags are text.
func codeRanges(s string) [][2]int {
	var out [][2]int
	fence := ""
	fenceStart := 0
	pos := 0
	for line := range strings.Lines(s) {
		t := strings.TrimLeft(line, " ")
		switch {
		case fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")):
			fence, fenceStart = t[:3], pos
		case fence != "" && strings.HasPrefix(t, fence):
			out = append(out, [2]int{fenceStart, pos + len(line)})
			fence = ""
		}
		pos += len(line)
	}
	if fence != "" {
		out = append(out, [2]int{fenceStart, len(s)})
	}
	for i := 0; i < len(s); {
		if s[i] != '`' || inRanges(out, i) {
			i++
			continue
		}
		n := 1
		for i+n < len(s) && s[i+n] == '`' {
			n++
		}
		run := s[i : i+n]
		// The closing run has the same length, and is not part of a longer one.
		end := -1
		for j := i + n; j < len(s); {
			k := strings.Index(s[j:], run)
			if k < 0 {
				break
			}
			k += j
			e := k + n
			for e < len(s) && s[e] == '`' {
				e++
			}
			if e-k == n {
				end = e
				break
			}
			j = e
		}
		if end < 0 {
			i += n
			continue
		}
		out = append(out, [2]int{i, end})
		i = end
	}
	return out
}

func inRanges(rs [][2]int, i int) bool {
	for _, r := range rs {
		if i >= r[0] && i < r[1] {
			return true
		}
	}
	return false
}
