package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// ProgressQuery says which bytes of a call's output Progress reads; the zero value
// reads stdout from the start, as text, up to the daemon's default (1 MiB).
type ProgressQuery struct {
	Stream   string // stdout ("" too), stderr, or another of ProgressChunk.Streams
	Offset   int64  // a previous chunk's NextOffset
	MaxBytes int    // 0: the daemon's default; at most 16 MiB
	Encoding string // text ("" too) or base64 (the exact bytes)
}

// ProgressChunk is a piece of a call's output by byte offset.
type ProgressChunk struct {
	CallID     string `json:"call_id"`
	Stream     string `json:"stream"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Data       string `json:"data"`
	Encoding   string `json:"encoding"`
	// InvalidUTF8 says bytes that are not UTF-8 became U+FFFD in Data (text encoding).
	InvalidUTF8 bool `json:"invalid_utf8,omitempty"`
	// Finished says the output is complete and read to the end.
	Finished bool `json:"finished"`
	// OutputLost says the call ran on a replica that has stopped, which held its
	// output: the output is gone, not empty. Read the result with GetCall.
	OutputLost bool `json:"output_lost,omitempty"`
	// Streams names the call's output streams.
	Streams []string `json:"streams"`
	// Progress is the call's latest numeric progress, when it reported any.
	Progress *ProgressValue `json:"progress,omitempty"`
}

// Progress reads a call's output from an offset (GET /v1/tool-calls/{id}/progress):
// polling again from NextOffset until Finished loses nothing and repeats nothing.
// With replicas, a replica that cannot be reached is a 503 Error with RetryAfter.
func (c *Client) Progress(ctx context.Context, callID string, q ProgressQuery) (*ProgressChunk, error) {
	v := url.Values{}
	if q.Stream != "" {
		v.Set("stream", q.Stream)
	}
	if q.Offset > 0 {
		v.Set("offset", strconv.FormatInt(q.Offset, 10))
	}
	if q.MaxBytes > 0 {
		v.Set("max_bytes", strconv.Itoa(q.MaxBytes))
	}
	if q.Encoding != "" {
		v.Set("encoding", q.Encoding)
	}
	path := "/v1/tool-calls/" + url.PathEscape(callID) + "/progress"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var p ProgressChunk
	return &p, c.do(ctx, http.MethodGet, path, nil, &p)
}
