package builtin

// How web_fetch turns a response body into text for the model: which media types
// count as text, charset decoding, and HTML to Markdown or plain text.

import (
	"bytes"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// Output formats of web_fetch.
const (
	fetchMarkdown = "markdown"
	fetchText     = "text"
	fetchRaw      = "raw"
)

// webMediaType is the lower-cased type of a Content-Type header without parameters.
func webMediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(contentType, ";")
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// webTextTypes are the application/* types whose bodies are text.
var webTextTypes = map[string]bool{
	"application/json": true, "application/ld+json": true, "application/x-ndjson": true,
	"application/xml": true, "application/xhtml+xml": true, "application/javascript": true,
	"application/ecmascript": true, "application/x-javascript": true, "application/yaml": true,
	"application/x-yaml": true, "application/toml": true, "application/x-sh": true,
	"application/sql": true, "application/graphql": true, "application/x-www-form-urlencoded": true,
	"application/csv": true, "application/x-httpd-php": true,
}

// webIsText reports whether a body of media type mt is text web_fetch returns.
func webIsText(mt string) bool {
	return strings.HasPrefix(mt, "text/") || webTextTypes[mt] ||
		strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml")
}

func webIsHTML(mt string) bool { return mt == "text/html" || mt == "application/xhtml+xml" }

// webSniff guesses the type of a body whose declared type says nothing useful.
func webSniff(head []byte) string {
	mt := webMediaType(http.DetectContentType(head))
	if mt == "application/octet-stream" && len(head) > 0 && bytes.IndexByte(head, 0) < 0 &&
		utf8.Valid(head[:len(head)-incompleteTail(head)]) {
		return "text/plain"
	}
	return mt
}

// webDecode converts body to UTF-8: a BOM, the header's charset or (for HTML) a
// <meta> charset win; without one, UTF-8 when the bytes are UTF-8, else the HTML
// default windows-1252. Invalid bytes and NULs become U+FFFD.
func webDecode(body []byte, contentType string, cut bool) string {
	e, name, certain := charset.DetermineEncoding(body, contentType)
	valid := body
	if cut {
		valid = body[:len(body)-incompleteTail(body)]
	}
	if name == "utf-8" || (!certain && name == "windows-1252" && utf8.Valid(valid)) {
		s, _ := sanitize(valid)
		return s
	}
	out, err := e.NewDecoder().Bytes(body)
	if err != nil {
		out = body
	}
	s, _ := sanitize(out)
	return s
}

// webPage is a converted body.
type webPage struct {
	title string
	text  string
}

// webConvert renders a decoded body in the requested format. HTML becomes Markdown
// (links made absolute against base) or plain text; raw and other types stay as
// they are.
func webConvert(body, mt, format, baseURL string) (webPage, error) {
	if !webIsHTML(mt) {
		return webPage{text: body}, nil
	}
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		return webPage{}, err
	}
	p := webPage{title: htmlTitle(doc)}
	switch format {
	case fetchRaw:
		p.text = body
	case fetchText:
		p.text = htmlText(doc)
	default:
		htmlPrune(doc)
		conv := converter.NewConverter(converter.WithPlugins(
			base.NewBasePlugin(), commonmark.NewCommonmarkPlugin(),
			table.NewTablePlugin(), strikethrough.NewStrikethroughPlugin(),
		))
		md, err := conv.ConvertNode(doc, converter.WithDomain(baseURL))
		if err != nil {
			return webPage{}, err
		}
		p.text = string(md)
	}
	return p, nil
}

// htmlTitle is the text of the document's first <title>, whitespace collapsed.
func htmlTitle(doc *html.Node) string {
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && n.DataAtom == atom.Svg {
			continue
		}
		if n.Type == html.ElementNode && n.DataAtom == atom.Title && n.Namespace == "" {
			var b strings.Builder
			for c := range n.Descendants() {
				if c.Type == html.TextNode {
					b.WriteString(c.Data)
				}
			}
			return strings.Join(strings.Fields(b.String()), " ")
		}
	}
	return ""
}

// htmlPrune removes what would only waste the model's tokens in Markdown: inline
// images as base64 data URIs (their alt text stays) and SVG drawings.
func htmlPrune(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		switch {
		case c.Type == html.ElementNode && c.DataAtom == atom.Svg:
			n.RemoveChild(c)
		case c.Type == html.ElementNode && c.DataAtom == atom.Img && strings.HasPrefix(strings.TrimSpace(htmlAttr(c, "src")), "data:"):
			if alt := strings.TrimSpace(htmlAttr(c, "alt")); alt != "" {
				n.InsertBefore(&html.Node{Type: html.TextNode, Data: alt}, c)
			}
			n.RemoveChild(c)
		default:
			htmlPrune(c)
		}
		c = next
	}
}

func htmlAttr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// Elements whose content is not shown, and the breaks elements make for htmlText:
// 2 an empty line (paragraphs), 1 a new line.
var (
	htmlHidden = map[atom.Atom]bool{
		atom.Head: true, atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
		atom.Svg: true, atom.Iframe: true, atom.Object: true, atom.Canvas: true, atom.Select: true,
	}
	htmlBreaks = map[atom.Atom]int{
		atom.P: 2, atom.H1: 2, atom.H2: 2, atom.H3: 2, atom.H4: 2, atom.H5: 2, atom.H6: 2,
		atom.Pre: 2, atom.Blockquote: 2, atom.Table: 2, atom.Ul: 2, atom.Ol: 2, atom.Dl: 2, atom.Figure: 2,
		atom.Div: 1, atom.Section: 1, atom.Article: 1, atom.Header: 1, atom.Footer: 1, atom.Nav: 1,
		atom.Aside: 1, atom.Main: 1, atom.Form: 1, atom.Li: 1, atom.Tr: 1, atom.Dt: 1, atom.Dd: 1,
		atom.Br: 1, atom.Hr: 1, atom.Caption: 1, atom.Figcaption: 1, atom.Summary: 1, atom.Details: 1,
		atom.Address: 1,
	}
)

// textWriter joins text runs, putting pending line breaks between them and
// collapsing whitespace outside <pre>.
type textWriter struct {
	b       strings.Builder
	pending int  // the break owed before the next text
	space   bool // a collapsed space is owed before the next text on the line
}

func (w *textWriter) brk(level int) {
	if level > 0 {
		w.pending, w.space = max(w.pending, level), false
	}
}

func (w *textWriter) write(s string, pre bool) {
	if !pre {
		lead := s != "" && htmlSpace(rune(s[0]))
		trail := s != "" && htmlSpace(rune(s[len(s)-1]))
		s = strings.Join(strings.Fields(s), " ")
		if s == "" {
			w.space = w.space || lead
			return
		}
		if (lead || w.space) && w.pending == 0 && w.b.Len() > 0 {
			s = " " + s
		}
		w.space = trail
	}
	if s == "" {
		return
	}
	if w.b.Len() > 0 && w.pending > 0 {
		w.b.WriteString(strings.Repeat("\n", w.pending))
	}
	w.pending = 0
	w.b.WriteString(s)
}

// htmlText is the visible text of a document: blocks on their own lines, an empty
// line between paragraphs, table cells separated by tabs, whitespace collapsed
// except in <pre>.
func htmlText(doc *html.Node) string {
	w := &textWriter{}
	var walk func(n *html.Node, pre bool)
	walk = func(n *html.Node, pre bool) {
		switch n.Type {
		case html.TextNode:
			w.write(n.Data, pre)
			return
		case html.ElementNode:
			if htmlHidden[n.DataAtom] {
				return
			}
		}
		level := 0
		if n.Type == html.ElementNode {
			level = htmlBreaks[n.DataAtom]
		}
		w.brk(level)
		if (n.DataAtom == atom.Td || n.DataAtom == atom.Th) && htmlPrevCell(n) {
			w.write("\t", true)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, pre || n.DataAtom == atom.Pre)
		}
		w.brk(level)
	}
	walk(doc, false)
	var out []string
	for line := range strings.Lines(w.b.String()) {
		out = append(out, strings.TrimRight(line, " \t\r\n"))
	}
	return strings.Trim(strings.Join(out, "\n"), "\n")
}

// htmlPrevCell reports whether a table cell has a cell before it in its row.
func htmlPrevCell(n *html.Node) bool {
	for p := n.PrevSibling; p != nil; p = p.PrevSibling {
		if p.Type == html.ElementNode && (p.DataAtom == atom.Td || p.DataAtom == atom.Th) {
			return true
		}
	}
	return false
}

func htmlSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' }
