package mcpproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestBoundedBodyLargeReads: a message larger than maxMessageBytes is not read even
// when its reader takes it in a few large reads, as json.Decoder does (its buffer
// doubles: a read of 16 MiB may bring the rest of a 30 MB body at once).
func TestBoundedBodyLargeReads(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("x", maxMessageBytes+maxMessageBytes/2)
	body := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`

	t.Run("json", func(t *testing.T) {
		t.Parallel()
		b := &boundedBody{ReadCloser: io.NopCloser(strings.NewReader(body))}
		var v json.RawMessage
		err := json.NewDecoder(b).Decode(&v)
		if !isTooLarge(err) {
			t.Fatalf("decoding a body of %d bytes: err %v, %d bytes decoded; want %v", len(body), err, len(v), errMessageTooLarge)
		}
	})
	t.Run("event", func(t *testing.T) {
		t.Parallel()
		stream := "event: message\ndata: " + body + "\n\n"
		b := &boundedBody{ReadCloser: io.NopCloser(strings.NewReader(stream)), events: true}
		// One read of the whole stream: the event and the blank line ending it.
		buf := make([]byte, len(stream)+1)
		n, err := io.ReadFull(b, buf)
		if !isTooLarge(err) {
			t.Fatalf("reading an event of %d bytes: %d bytes read, err %v; want %v", len(body), n, err, errMessageTooLarge)
		}
	})
	t.Run("small messages pass", func(t *testing.T) {
		t.Parallel()
		// Many events, each well under the bound, in large reads.
		ev := "event: message\ndata: " + strings.Repeat("y", 1<<20) + "\n\n"
		stream := strings.Repeat(ev, 40)
		b := &boundedBody{ReadCloser: io.NopCloser(strings.NewReader(stream)), events: true}
		got, err := io.ReadAll(bufio.NewReaderSize(b, 32<<20))
		if err != nil || !bytes.Equal(got, []byte(stream)) {
			t.Fatalf("read %d of %d bytes, err %v", len(got), len(stream), err)
		}
		small := `{"ok":"` + strings.Repeat("z", maxMessageBytes-100) + `"}`
		b = &boundedBody{ReadCloser: io.NopCloser(strings.NewReader(small))}
		var v json.RawMessage
		if err := json.NewDecoder(b).Decode(&v); err != nil || len(v) != len(small) {
			t.Fatalf("a body of %d bytes: err %v, %d bytes decoded", len(small), err, len(v))
		}
		if _, err := b.Read(make([]byte, 10)); !errors.Is(err, io.EOF) {
			t.Fatalf("after the body: err %v, want EOF", err)
		}
	})
}
