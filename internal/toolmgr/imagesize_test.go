package toolmgr

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"image"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/tool"
)

func pngOf(t *testing.T, w, h int) tool.Content {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return tool.Content{Type: tool.ContentImage, MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(b.Bytes())}
}

func jpegOf(t *testing.T, w, h int) tool.Content {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)), nil); err != nil {
		t.Fatal(err)
	}
	return tool.Content{Type: tool.ContentImage, MimeType: "image/jpeg", Data: base64.StdEncoding.EncodeToString(b.Bytes())}
}

// webpOf is the head of an extended-format WebP file (VP8X) of w×h: what the size
// is read from.
func webpOf(w, h int) tool.Content {
	b := []byte("RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00")
	le24 := func(v int) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16)} }
	b = append(b, le24(w-1)...)
	b = append(b, le24(h-1)...)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-8))
	return tool.Content{Type: tool.ContentImage, MimeType: "image/webp", Data: base64.StdEncoding.EncodeToString(b)}
}

// webpLosslessOf is the head of a lossless WebP file (VP8L) of w×h.
func webpLosslessOf(w, h int) tool.Content {
	b := []byte("RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	binary.LittleEndian.PutUint32(b[21:], uint32(w-1)|uint32(h-1)<<14)
	binary.LittleEndian.PutUint32(b[16:], uint32(len(b)-20)) // the VP8L chunk's size
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-8))
	return tool.Content{Type: tool.ContentImage, MimeType: "image/webp", Data: base64.StdEncoding.EncodeToString(b)}
}

// TestTruncatorDropsOversizedImages: an image more than 8000 pixels wide or high (a
// full-page screenshot of a long page) is refused by Anthropic's API, and the refusal
// repeats on every later turn of the conversation that holds it; such a block is left
// out with a note naming its size, in its place. Images within the bound, and ones
// whose size cannot be read, pass; the input (the record) keeps everything.
func TestTruncatorDropsOversizedImages(t *testing.T) {
	t.Parallel()
	tr := NewTruncator(0)
	text := tool.Content{Type: tool.ContentText, Text: "### Result"}
	for _, tc := range []struct {
		name string
		img  tool.Content
		note string // "" when the image passes
	}{
		{"png within", pngOf(t, 1280, 8000), ""},
		{"png too high", pngOf(t, 1280, 13218), "1280x13218"},
		{"png too wide", pngOf(t, 8001, 2), "8001x2"},
		{"jpeg too high", jpegOf(t, 8, 8200), "8x8200"},
		{"jpeg within", jpegOf(t, 800, 600), ""},
		{"webp too high", webpOf(100, 9000), "100x9000"},
		{"webp within", webpOf(100, 7999), ""},
		{"lossless webp too wide", webpLosslessOf(9000, 10), "9000x10"},
		{"lossless webp within", webpLosslessOf(8000, 10), ""},
		{"unreadable", tool.Content{Type: tool.ContentImage, MimeType: "image/png", Data: "AAAA"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := &tool.Result{Content: []tool.Content{text, tc.img}}
			got := tr.Apply(in)
			if tc.note == "" {
				if got != in {
					t.Fatalf("an image that fits was changed: %+v", got.Content)
				}
				return
			}
			if countMedia(got) != 0 || !got.Truncated || len(got.Content) != 2 {
				t.Fatalf("kept %d images of %d blocks, truncated %v", countMedia(got), len(got.Content), got.Truncated)
			}
			if note := got.Content[1].Text; got.Content[1].Type != tool.ContentText ||
				!strings.Contains(note, tc.note) || !strings.Contains(note, "8000 pixels") {
				t.Errorf("note %q does not give the size %s and the bound", note, tc.note)
			}
			if got.Content[0].Text != "### Result" || countMedia(in) != 1 {
				t.Error("the text or the input was changed")
			}
		})
	}
}
