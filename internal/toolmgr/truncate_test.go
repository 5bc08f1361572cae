package toolmgr

import (
	"math/rand"
	"strings"
	"testing"

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

func TestTruncator(t *testing.T) {
	t.Parallel()
	tr := NewTruncator(1000)
	enc, err := tr.encoding()
	if err != nil {
		t.Fatal(err)
	}
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

	// Text just over the budget in bytes but under it in tokens is kept whole.
	mid := strings.Repeat("compile ", 300) // 2400 bytes, ~300 tokens
	if got, ok := tr.Cut(mid); !ok || got != mid {
		t.Fatal("text under the token budget was cut")
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
