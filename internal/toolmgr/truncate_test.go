package toolmgr

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"

	"github.com/toolserverd/toolserverd/internal/tool"
)

func words(r *rand.Rand, n int) string {
	vocab := []string{"alpha", "beta", "gamma", "delta", "compile", "error:", "main.go:12", "ok", "λ", "日本語", "\n"}
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(vocab[r.Intn(len(vocab))])
		b.WriteByte(' ')
	}
	return b.String()
}

// truncatorWithEncoding returns a Truncator with budget max and its tokenizer.
func truncatorWithEncoding(t *testing.T, max int) (*Truncator, *tiktoken.Tiktoken) {
	t.Helper()
	tr := NewTruncator(max)
	enc, err := tr.encoding()
	if err != nil {
		t.Fatal(err)
	}
	return tr, enc
}

func TestTruncator(t *testing.T) {
	t.Parallel()
	tr, enc := truncatorWithEncoding(t, 1000)
	r := rand.New(rand.NewSource(1))

	small := tool.TextResult(words(r, 100))
	if got := tr.Apply(small); got != small {
		t.Fatal("a result under budget was changed")
	}

	big := "HEAD-MARKER " + words(r, 20000) + " TAIL-MARKER"
	res := &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: big}}, Structured: []byte(`{"a":1}`)}
	out := tr.Apply(res)
	if !out.Truncated || out == res {
		t.Fatal("big result not truncated")
	}
	if res.Content[0].Text != big || res.Structured == nil {
		t.Fatal("the input result was modified; the record must keep the full text")
	}
	text := out.Text()
	if n := len(enc.Encode(text, nil, nil)); n > tr.Max() {
		t.Fatalf("truncated text has %d tokens, budget %d", n, tr.Max())
	}
	if n := len(enc.Encode(text, nil, nil)); n < tr.Max()*8/10 {
		t.Fatalf("truncation wasted the budget: %d tokens of %d", n, tr.Max())
	}
	for _, want := range []string{"HEAD-MARKER", "TAIL-MARKER", "bytes removed here", "1000-token limit"} {
		if !strings.Contains(text, want) {
			t.Errorf("truncated text lacks %q", want)
		}
	}
	if out.Structured != nil {
		t.Error("structured content kept in a truncated message")
	}

	// Structured output counts against the budget: short text with a huge structured
	// value keeps its text whole and loses the structured value (the record keeps it);
	// both small together are left alone.
	huge := []byte(`{"rows":"` + strings.Repeat("row ", 5000) + `"}`)
	withHuge := &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: "20000 bytes of rows"}}, Structured: huge}
	if out := tr.Apply(withHuge); out == withHuge || out.Structured != nil || !out.Truncated || out.Text() != "20000 bytes of rows" {
		t.Errorf("huge structured output: structured kept %v, truncated %v, text %q", out.Structured != nil, out.Truncated, out.Text())
	}
	if withHuge.Structured == nil {
		t.Error("the input result was modified")
	}
	both := &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: strings.Repeat("compile ", 80)}}, Structured: []byte(`{"a":"` + strings.Repeat("compile ", 80) + `"}`)}
	if got := tr.Apply(both); got != both {
		t.Error("text and structured output under the budget together were changed")
	}

	// Text just over the budget in bytes but under it in tokens is kept whole.
	mid := strings.Repeat("compile ", 300) // 2400 bytes, ~300 tokens
	if got, ok := tr.Cut(mid); !ok || got != mid {
		t.Fatal("text under the token budget was cut")
	}
}

// TestEncodeInPieces: ordinary text encodes to exactly the tokenizer's tokens, however
// it is spaced; text without spaces is cut into pieces of at most maxPiece bytes on rune
// boundaries (bytes that are not UTF-8 still make progress), and the tokens of the
// pieces still decode to the text.
func TestEncodeInPieces(t *testing.T) {
	t.Parallel()
	_, enc := truncatorWithEncoding(t, 0)
	r := rand.New(rand.NewSource(3))
	var spaced strings.Builder
	for _, sep := range []string{" ", "  ", "\t ", "\n ", "\n\n  ", "\u00a0 ", "\u00a0 \n", "\u3000 ", " 12 ", "3 ", " (", ". "} {
		spaced.WriteString(words(r, 300) + sep + strings.Repeat("a", maxPiece/2) + sep)
	}
	for _, text := range []string{words(r, 5000), spaced.String(), "x " + strings.Repeat(" ", 3*maxPiece) + "y"} {
		if got, want := encode(enc, text), enc.Encode(text, nil, nil); !slices.Equal(got, want) {
			t.Fatalf("encode of %d bytes: %d tokens, the tokenizer's %d", len(text), len(got), len(want))
		}
	}
	for _, run := range []string{strings.Repeat("x", 10*maxPiece+3), strings.Repeat("日本語", 2*maxPiece), strings.Repeat(" ", 5*maxPiece), strings.Repeat("\x80", 3*maxPiece)} {
		for rest := run; rest != ""; {
			n := pieceEnd(rest)
			if n <= 0 || n > maxPiece || (utf8.ValidString(run) && !utf8.ValidString(rest[:n])) {
				t.Fatalf("piece of %d bytes ends at %d", len(rest), n)
			}
			rest = rest[n:]
		}
		if got := enc.Decode(encode(enc, run)); utf8.ValidString(run) && got != run {
			t.Fatalf("the pieces of a run of %d bytes decode to %d bytes", len(run), len(got))
		}
	}
}

// TestTruncatorLongRun cuts results that are one long word or one long run of spaces:
// the tokenizer would take minutes on them whole.
func TestTruncatorLongRun(t *testing.T) {
	t.Parallel()
	tr, enc := truncatorWithEncoding(t, 1000)
	for _, text := range []string{"HEAD" + strings.Repeat("x", 300_000) + "TAIL", "HEAD" + strings.Repeat(" ", 300_000) + "TAIL"} {
		cut, ok := tr.Cut(text)
		if ok || !strings.HasPrefix(cut, "HEAD") || !strings.HasSuffix(cut, "TAIL") || !strings.Contains(cut, "bytes removed here") {
			t.Fatalf("cut of %d bytes: ok=%v, %d bytes: %.80q…", len(text), ok, len(cut), cut)
		}
		if n := len(encode(enc, cut)); n > tr.Max() || n < tr.Max()/2 {
			t.Fatalf("cut of %d bytes has %d tokens, budget %d", len(text), n, tr.Max())
		}
	}
}

func TestNewTruncatorDefaults(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -5} {
		if got := NewTruncator(n).Max(); got != DefaultMaxResultTokens {
			t.Errorf("NewTruncator(%d).Max() = %d", n, got)
		}
	}
}

func BenchmarkTruncateSmall(b *testing.B) {
	tr := NewTruncator(0)
	res := tool.TextResult(strings.Repeat("x", 4000))
	for i := 0; i < b.N; i++ {
		tr.Apply(res)
	}
}

func BenchmarkTruncateLarge(b *testing.B) {
	tr := NewTruncator(0)
	_ = tr.Warm()
	res := tool.TextResult(words(rand.New(rand.NewSource(2)), 200000))
	b.SetBytes(int64(len(res.Text())))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr.Apply(res)
	}
}

// TestTruncatorKeepsRunesWhole: the tokenizer splits many characters (CJK, flags,
// mathematical letters) across tokens, so a cut at a token boundary may fall inside a
// character. The text sent to the model must stay valid UTF-8, and every byte kept
// must be the original's.
func TestTruncatorKeepsRunesWhole(t *testing.T) {
	t.Parallel()
	tr := NewTruncator(200)
	for _, unit := range []string{"日本語 ", "🇫🇷", "ﬃ", "𝔘𝔫𝔦", "é😀 "} {
		text := strings.Repeat(unit, 5000)
		cut, ok := tr.Cut(text)
		if ok {
			t.Fatalf("%q: %d bytes not cut", unit, len(text))
		}
		head, rest, _ := strings.Cut(cut, "\n\n[…")
		_, tail, _ := strings.Cut(rest, "…]\n\n")
		if !utf8.ValidString(cut) {
			t.Errorf("%q: the cut text is not valid UTF-8: head ends %q, tail starts %q", unit, head[max(0, len(head)-8):], tail[:min(8, len(tail))])
		}
		if !strings.HasPrefix(text, head) || !strings.HasSuffix(text, tail) {
			t.Errorf("%q: the head or the tail is not the text's own", unit)
		}
	}
}

// TestTruncatorCapsMedia: image and audio blocks past MaxResultMedia or
// MaxResultMediaBytes are left out, in order, with a note; the text and the input stay.
func TestTruncatorCapsMedia(t *testing.T) {
	t.Parallel()
	tr := NewTruncator(0)
	img := func(n int) tool.Content {
		return tool.Content{Type: tool.ContentImage, MimeType: "image/png", Data: strings.Repeat("A", n)}
	}
	small := &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: "two pictures"}, img(8), {Type: tool.ContentAudio, MimeType: "audio/wav", Data: "AAAA"}}}
	if got := tr.Apply(small); got != small {
		t.Errorf("a result within the bounds was changed: %+v", got)
	}

	many := &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: "frames"}}}
	for range MaxResultMedia + 7 {
		many.Content = append(many.Content, img(8))
	}
	got := tr.Apply(many)
	if n := countMedia(got); n != MaxResultMedia || !got.Truncated || !strings.Contains(got.Text(), "7 image or audio block(s) (56 bytes of base64) left out") ||
		!strings.HasPrefix(got.Text(), "frames") {
		t.Errorf("%d blocks: kept %d, truncated %v, text %q", MaxResultMedia+7, n, got.Truncated, got.Text())
	}
	if countMedia(many) != MaxResultMedia+7 {
		t.Error("the input was modified")
	}

	big := &tool.Result{Content: []tool.Content{img(3 << 20), img(3 << 20), img(16)}}
	got = tr.Apply(big)
	var sizes []int
	for _, c := range got.Content {
		if isMedia(c) {
			sizes = append(sizes, len(c.Data))
		}
	}
	if !slices.Equal(sizes, []int{3 << 20, 16}) || !strings.Contains(got.Text(), "1 image or audio block(s)") {
		t.Errorf("5 MiB of media: kept sizes %v, text %q", sizes, got.Text())
	}
}

func countMedia(r *tool.Result) int {
	n := 0
	for _, c := range r.Content {
		if isMedia(c) {
			n++
		}
	}
	return n
}

// TestTruncatorKeepStructured: for a tool with an output schema the structured output
// stays whole and the text gives way: cut to what the budget leaves beside it (text
// and structured output together within the budget), or to minTextTokens when the
// structured output alone fills the budget. A result that fits, or one without
// structured output, is what Apply makes of it.
func TestTruncatorKeepStructured(t *testing.T) {
	t.Parallel()
	tr, enc := truncatorWithEncoding(t, 1000)
	r := rand.New(rand.NewSource(2))
	tokens := func(s string) int { return len(encode(enc, s)) }
	result := func(text, structured string) *tool.Result {
		return &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: text}, {Type: tool.ContentImage, MimeType: "image/png", Data: "AAAA"}},
			Structured: []byte(structured)}
	}

	// Each fits alone, not both together (Apply drops the structured output).
	w := words(r, 350)
	sj := `{"text":"` + strings.ReplaceAll(w, "\n", `\n`) + `"}`
	both := result("HEAD-MARKER "+w+" TAIL-MARKER", sj)
	if tokens(both.Text()) > 1000 || tokens(sj) > 1000 || tokens(both.Text()+sj) <= 1000 {
		t.Fatalf("test data: text %d, structured %d tokens", tokens(both.Text()), tokens(sj))
	}
	if tr.Apply(both).Structured != nil {
		t.Fatal("Apply kept the structured output: the case is not one KeepStructured changes")
	}
	out := tr.KeepStructured(both)
	if string(out.Structured) != sj || !out.Truncated {
		t.Fatalf("structured output changed (%d bytes of %d) or truncated %v", len(out.Structured), len(sj), out.Truncated)
	}
	text := out.Text()
	if n := tokens(text) - tokens("[image: image/png]\n") + tokens(sj); n > 1000 || n < 800 {
		t.Errorf("text and structured output together have %d tokens, want at most the 1000 of the budget and not much less", n)
	}
	for _, want := range []string{"HEAD-MARKER", "TAIL-MARKER", "bytes removed here", "1000-token limit"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q: %q", want, text)
		}
	}
	if countMedia(out) != 1 || both.Structured == nil || both.Content[0].Text != "HEAD-MARKER "+w+" TAIL-MARKER" {
		t.Error("the image was dropped or the input modified")
	}

	// Structured output alone over the budget: kept, and the text cut to the least.
	huge := `{"rows":"` + strings.Repeat("row ", 5000) + `"}`
	out = tr.KeepStructured(result(words(r, 2000), huge))
	if string(out.Structured) != huge || !out.Truncated || tokens(out.Content[0].Text) > minTextTokens {
		t.Errorf("huge structured output: kept %v, truncated %v, text of %d tokens (at most %d wanted)",
			string(out.Structured) == huge, out.Truncated, tokens(out.Content[0].Text), minTextTokens)
	}

	small := result("a few words", `{"a":1}`)
	if got := tr.KeepStructured(small); got != small {
		t.Error("a result under the budget was changed")
	}
	plain := &tool.Result{Content: []tool.Content{{Type: tool.ContentText, Text: words(r, 3000)}}}
	if got, want := tr.KeepStructured(plain), tr.Apply(plain); got.Text() != want.Text() || !got.Truncated {
		t.Error("a result without structured output is not cut as Apply cuts it")
	}
}
