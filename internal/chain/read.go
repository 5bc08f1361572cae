package chain

import (
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// ArtifactReadName is the name of the tool that reads artifacts.
const ArtifactReadName = "artifact_read"

const (
	defaultReadLimit = 8192
	maxReadLimit     = 65536
)

type readTool struct{ store *Artifacts }

func (readTool) Spec() tool.Spec {
	return tool.Spec{
		Name:  ArtifactReadName,
		Label: "Read artifact",
		Description: "Read part of an artifact: a tool result too large to pass inline that tool_chain stored and referenced as {\"artifact\": \"art_…\"}. " +
			"Give the reference, a byte offset (default 0) and a limit (default 8192, at most 65536). " +
			"Returns the text read, the total size and next_offset (null at the end); call again with next_offset to read on. " +
			"Only artifacts of this session can be read.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"ref":{"type":"string","description":"the artifact reference, art_…"},` +
			`"offset":{"type":"integer","minimum":0,"description":"byte offset to start at (default 0)"},` +
			`"limit":{"type":"integer","minimum":1,"maximum":65536,"description":"bytes to read (default 8192)"}},` +
			`"required":["ref"],"additionalProperties":false}`),
		Flags: tool.Flags{ReadOnly: true, ConcurrencySafe: true},
		Risk:  tool.RiskSafe,
	}
}

func (t readTool) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args struct {
		Ref    string `json:"ref"`
		Offset int64  `json:"offset"`
		Limit  int64  `json:"limit"`
	}
	if err := tool.UnmarshalArgs(raw, &args); err != nil {
		return nil, tool.Errorf(tool.KindInvalidArgs, "arguments: %v", err)
	}
	if args.Limit <= 0 {
		args.Limit = defaultReadLimit
	}
	args.Limit = min(args.Limit, maxReadLimit)
	if ctx.Session == nil {
		return nil, tool.Errorf(tool.KindFailed, "artifact_read runs only within a session")
	}
	data, size, err := t.store.Read(ctx.Session.ID, args.Ref, args.Offset, args.Limit)
	if errors.Is(err, ErrNoArtifact) && t.store.replicas != nil {
		// Another replica may hold it: the chain that made it ran there.
		if res, handled, ferr := t.store.replicas.Forward(ctx, args.Ref, raw); handled {
			return res, ferr
		}
	}
	if errors.Is(err, ErrNoArtifact) {
		return nil, tool.Errorf(tool.KindNotFound, "artifact %q does not exist in this session (references come from tool_chain results; the oldest artifacts are deleted when a session holds too many, and all of a session's when it has not used them for a long time)", args.Ref)
	}
	if err != nil {
		return nil, err
	}
	end := args.Offset + int64(len(data))
	// Stop at a character boundary, so that the next read starts on one.
	if end < size {
		if cut := cutIncomplete(data); len(cut) > 0 {
			data = cut
		}
		end = args.Offset + int64(len(data))
	}
	out := map[string]any{"ref": args.Ref, "offset": args.Offset, "bytes": len(data), "total_bytes": size, "text": string(data), "next_offset": nil}
	if end < size {
		out["next_offset"] = end
	}
	return tool.JSONResult(out)
}

// cutIncomplete drops a UTF-8 sequence cut off at the end of b.
func cutIncomplete(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}
