package toolmgr

import (
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// DefaultMaxResultTokens is the token budget of a result's text when none is configured.
const DefaultMaxResultTokens = 12000

// markerReserve is what the truncation marker may cost in tokens.
const markerReserve = 64

// Truncator cuts result text to a token budget, keeping the head and the tail (where
// command output usually says what went wrong) with a marker saying what was removed.
// The tokenizer (cl100k_base, embedded, never downloaded) is loaded on first need.
type Truncator struct {
	max int
}

// loadEncoding loads the tokenizer once per process: tiktoken-go keeps its loader in a
// package variable, and the loaded encoding is immutable and safe to share.
var loadEncoding = sync.OnceValues(func() (*tiktoken.Tiktoken, error) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	return tiktoken.GetEncoding("cl100k_base")
})

// NewTruncator returns a Truncator with the given budget; max ≤ 0 means the default.
func NewTruncator(max int) *Truncator {
	if max <= 0 {
		max = DefaultMaxResultTokens
	}
	if max < 2*markerReserve {
		max = 2 * markerReserve
	}
	return &Truncator{max: max}
}

// Max is the budget in tokens.
func (t *Truncator) Max() int { return t.max }

func (t *Truncator) encoding() (*tiktoken.Tiktoken, error) { return loadEncoding() }

// Warm loads the tokenizer now rather than on the first large result.
func (t *Truncator) Warm() error { _, err := t.encoding(); return err }

// Apply returns res with its text cut to the budget and its image and audio blocks to
// MaxResultMedia and MaxResultMediaBytes, or res itself when it fits. The
// structured output counts too: when the text fits but not with it, it is dropped and
// the text kept whole. The input is never modified: the full result is what gets
// persisted.
func (t *Truncator) Apply(res *tool.Result) *tool.Result {
	res = capMedia(res)
	if t.fitsByBytes(res) {
		return res
	}
	text := res.Text()
	cut, ok := t.Cut(text)
	if ok {
		if len(res.Structured) == 0 {
			return res
		}
		if _, fits := t.Cut(text + string(res.Structured)); fits {
			return res
		}
		out := *res
		out.Structured = nil
		out.Truncated = true
		return &out
	}
	out := *res
	out.Content = []tool.Content{{Type: tool.ContentText, Text: cut}}
	for _, c := range res.Content {
		if isMedia(c) {
			out.Content = append(out.Content, c)
		}
	}
	out.Structured = nil // it would blow the budget too; the record keeps it
	out.Truncated = true
	return &out
}

// fitsByBytes reports whether res's text and structured output fit the budget
// without counting tokens: a token covers at least one byte, so text no longer than
// the budget in bytes fits.
func (t *Truncator) fitsByBytes(res *tool.Result) bool {
	total := len(res.Structured)
	for _, c := range res.Content {
		total += len(c.Text)
	}
	return total <= t.max
}

// minTextTokens is the least text KeepStructured leaves a result: the smallest budget
// a Truncator takes.
const minTextTokens = 2 * markerReserve

// KeepStructured is Apply for a result whose structured output must stay whole: its
// tool declares an output schema, and MCP holds every result that is not an error to
// carry structured content conforming to it (a cut JSON value would not; the
// TypeScript SDK client throws on a result without one). The text gives way instead:
// it is cut to what the budget leaves beside the structured output, and to
// minTextTokens when the structured output alone takes about the whole budget, the
// one case where the result passes the budget. The input is never modified.
func (t *Truncator) KeepStructured(res *tool.Result) *tool.Result {
	if len(res.Structured) == 0 {
		return t.Apply(res)
	}
	res = capMedia(res)
	if t.fitsByBytes(res) {
		return res
	}
	text := res.Text()
	if _, fits := t.Cut(text + string(res.Structured)); fits {
		return res
	}
	cut, fits := t.cut(text, max(t.max-t.tokensUpTo(string(res.Structured)), minTextTokens))
	if fits {
		return res
	}
	out := *res
	out.Content = []tool.Content{{Type: tool.ContentText, Text: cut}}
	for _, c := range res.Content {
		if isMedia(c) {
			out.Content = append(out.Content, c)
		}
	}
	out.Truncated = true
	return &out
}

// CountTokens returns how many cl100k_base tokens text is, the tokenizer every budget
// of the daemon counts in (a third of its bytes, rounded up, when the embedded
// tokenizer cannot be loaded).
func CountTokens(text string) int {
	enc, err := loadEncoding()
	if err != nil {
		return (len(text) + 2) / 3
	}
	return len(encode(enc, text))
}

// tokensUpTo counts the tokens of text, or returns the budget when there are more.
func (t *Truncator) tokensUpTo(text string) int {
	enc, err := t.encoding()
	if err != nil {
		return min(len(text)/3, t.max) // ≈3 bytes a token, as cutBytes
	}
	if _, all := prefixForTokens(enc, text, t.max); !all {
		return t.max
	}
	return len(encode(enc, text))
}

// The image and audio blocks one result may pass to the model: tokens do not measure
// them, and an upstream may send thousands (an MCP server's answer may be 16 MiB).
// Providers refuse a request with more images or larger ones than they take (a
// refused turn stays refused, as the conversation keeps the result), so the blocks
// past either bound are left out, with a note saying so; the record keeps them.
const (
	MaxResultMedia      = 20      // blocks
	MaxResultMediaBytes = 5 << 20 // their base64 data, together
)

// capMedia returns res with the image and audio blocks that fit MaxResultMedia and
// MaxResultMediaBytes, in order, and a note about the rest; an image larger than
// MaxImageSide is replaced by a note of its own. res itself when all fit.
func capMedia(res *tool.Result) *tool.Result {
	n, size, over := 0, 0, false
	var notes map[int]string // oversized images, by block
	for i, c := range res.Content {
		if isMedia(c) {
			n, size = n+1, size+len(c.Data)
			over = over || n > MaxResultMedia || size > MaxResultMediaBytes
			if note := oversized(c); note != "" {
				if notes == nil {
					notes = map[int]string{}
				}
				notes[i] = note
			}
		}
	}
	if !over && notes == nil {
		return res
	}
	out := *res
	out.Content = make([]tool.Content, 0, len(res.Content)+1)
	out.Truncated = true
	kept, keptBytes, dropped, droppedBytes := 0, 0, 0, 0
	for i, c := range res.Content {
		if note, ok := notes[i]; ok {
			out.Content = append(out.Content, tool.Content{Type: tool.ContentText, Text: note})
			continue
		}
		if isMedia(c) && (kept == MaxResultMedia || keptBytes+len(c.Data) > MaxResultMediaBytes) {
			dropped, droppedBytes = dropped+1, droppedBytes+len(c.Data)
			continue
		}
		if isMedia(c) {
			kept, keptBytes = kept+1, keptBytes+len(c.Data)
		}
		out.Content = append(out.Content, c)
	}
	if dropped > 0 {
		out.Content = append(out.Content, tool.Content{Type: tool.ContentText, Text: fmt.Sprintf(
			"[%d image or audio block(s) (%d bytes of base64) left out here: a result passes at most %d of them and %d MiB together]",
			dropped, droppedBytes, MaxResultMedia, MaxResultMediaBytes>>20)})
	}
	return &out
}

func isMedia(c tool.Content) bool { return c.Type == tool.ContentImage || c.Type == tool.ContentAudio }

// Cut returns text unchanged with true when it fits the budget, otherwise the head and
// tail that fit with a marker between them, and false.
func (t *Truncator) Cut(text string) (string, bool) { return t.cut(text, t.max) }

// cut is Cut to a budget of n tokens (at most the Truncator's).
func (t *Truncator) cut(text string, n int) (string, bool) {
	if len(text) <= n {
		return text, true
	}
	enc, err := t.encoding()
	if err != nil {
		// Without a tokenizer, fall back to a conservative byte budget (≈3 bytes/token).
		return t.cutBytes(text, n*3)
	}
	budget := n - markerReserve
	headN := budget * 2 / 3
	tailN := budget - headN
	headEnd, headAll := prefixForTokens(enc, text, headN)
	if headAll {
		return text, true
	}
	tailStart, _ := suffixForTokens(enc, text, tailN)
	if tailStart <= headEnd {
		// Head and tail overlap: the whole text fits.
		if len(encode(enc, text)) <= n {
			return text, true
		}
		tailStart = headEnd
	}
	// A token may hold part of a character (CJK, emoji): cut between characters, so
	// the text stays valid UTF-8; the head gives up, the tail skips, the partial one.
	headEnd = len(validPrefix(text, headEnd))
	tailStart = validSuffixStart(text, tailStart)
	removed := tailStart - headEnd
	return fmt.Sprintf("%s\n\n[… %d of %d bytes removed here: the result exceeded the %d-token limit …]\n\n%s",
		text[:headEnd], removed, len(text), t.max, text[tailStart:]), false
}

func (t *Truncator) cutBytes(text string, n int) (string, bool) {
	if len(text) <= n {
		return text, true
	}
	head := validPrefix(text, n*2/3)
	tailStart := validSuffixStart(text, len(text)-(n-len(head)))
	return fmt.Sprintf("%s\n\n[… %d of %d bytes removed here: the result exceeded the size limit …]\n\n%s",
		head, tailStart-len(head), len(text), text[tailStart:]), false
}

// maxPiece bounds the text the tokenizer is given at once. Its byte-pair merging takes
// worse than quadratic time in the length of one pre-tokenized word, and a result may
// hold a word of any length (a line of base64 zeros, a run of one character): 80 KB of
// "x" took half a minute to count, a tool call's result held up all that time. Text is
// cut before a space that follows a non-space, where the tokenizer splits anyway, so
// ordinary text encodes to the very same tokens; only a run of maxPiece bytes without
// such a space is cut inside, which may count a token more per cut.
const maxPiece = 128

// encode returns the tokens of text, given to the tokenizer piece by piece.
func encode(enc *tiktoken.Tiktoken, text string) []int {
	var toks []int
	for text != "" {
		n := pieceEnd(text)
		toks = append(toks, enc.Encode(text[:n], nil, nil)...)
		text = text[n:]
	}
	return toks
}

// pieceEnd is where the first piece of text ends: all of it when it is at most
// maxPiece bytes, else before its last space that follows a non-space within them, else
// at a rune boundary (at maxPiece when there is none: the text is not UTF-8).
func pieceEnd(text string) int {
	if len(text) <= maxPiece {
		return len(text)
	}
	for i := maxPiece; i > 0; i-- {
		if text[i] != ' ' {
			continue
		}
		if r, _ := utf8.DecodeLastRuneInString(text[:i]); !unicode.IsSpace(r) {
			return i
		}
	}
	if n := len(validPrefix(text, maxPiece)); n > 0 {
		return n
	}
	return maxPiece
}

// prefixForTokens returns the byte length of the first n tokens of text, encoding only
// as much of the text as needed; all is true when the whole text has at most n tokens.
func prefixForTokens(enc *tiktoken.Tiktoken, text string, n int) (end int, all bool) {
	window := n * 4
	for {
		if window >= len(text) {
			toks := encode(enc, text)
			if len(toks) <= n {
				return len(text), true
			}
			return len(enc.Decode(toks[:n])), false
		}
		chunk := validPrefix(text, window)
		toks := encode(enc, chunk)
		// The last token of a cut chunk may be a fragment; keep a margin of one.
		if len(toks) > n {
			return len(enc.Decode(toks[:n])), false
		}
		window *= 2
	}
}

// suffixForTokens returns where the last n tokens of text begin.
func suffixForTokens(enc *tiktoken.Tiktoken, text string, n int) (start int, all bool) {
	window := n * 4
	for {
		if window >= len(text) {
			toks := encode(enc, text)
			if len(toks) <= n {
				return 0, true
			}
			return len(text) - len(enc.Decode(toks[len(toks)-n:])), false
		}
		s := validSuffixStart(text, len(text)-window)
		toks := encode(enc, text[s:])
		if len(toks) > n+1 {
			// Drop the first token of the chunk: it may be a fragment of a longer one.
			return len(text) - len(enc.Decode(toks[len(toks)-n:])), false
		}
		window *= 2
	}
}

func validPrefix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func validSuffixStart(s string, i int) int {
	if i <= 0 {
		return 0
	}
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}
