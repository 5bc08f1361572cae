package toolmgr

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	_ "image/gif"  // image.DecodeConfig reads the size of GIF images
	_ "image/jpeg" // … JPEG
	_ "image/png"  // … PNG

	_ "golang.org/x/image/webp" // … and WebP

	"github.com/toolserverd/toolserverd/internal/tool"
)

// MaxImageSide is the most pixels an image passed to the model may have on a side:
// Anthropic's API refuses a request holding a larger one ("At least one of the image
// dimensions exceed max allowed size: 8000 pixels"), and the conversation keeps the
// result, so every later turn is refused too. A full-page screenshot of a long page
// (Playwright's browser_take_screenshot with fullPage) easily passes it.
const MaxImageSide = 8000

// sizeHeadBytes is how much of an image's base64 is decoded to read its size: a JPEG's
// frame header may follow tens of KiB of metadata.
const sizeHeadBytes = 256 << 10

// oversized returns the note that replaces image block c when a side of it is longer
// than MaxImageSide, and "" when it is not or its size cannot be read.
func oversized(c tool.Content) string {
	if c.Type != tool.ContentImage {
		return ""
	}
	w, h, ok := imageSize(c.Data)
	if !ok || (w <= MaxImageSide && h <= MaxImageSide) {
		return ""
	}
	return fmt.Sprintf("[image %s of %dx%d pixels left out here: an image passed to the model may have at most %d pixels on a side (providers refuse larger ones); ask for a smaller one (for a screenshot, the viewport or one element rather than the full page)]",
		c.MimeType, w, h, MaxImageSide)
}

// imageSize reads the width and height of a PNG, JPEG, GIF or WebP image from the
// head of its base64 data.
func imageSize(data string) (w, h int, ok bool) {
	head := data[:min(len(data), sizeHeadBytes)]
	head = head[:len(head)/4*4]
	raw, err := base64.StdEncoding.DecodeString(head)
	if err != nil {
		return 0, 0, false
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}
