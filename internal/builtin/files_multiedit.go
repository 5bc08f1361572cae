package builtin

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// multi_edit modes.
const (
	modeStrict     = "strict"
	modePartial    = "partial"
	modeBestEffort = "best_effort"
)

// Statuses of one edit of multi_edit.
const (
	editApplied      = "applied"
	editFailed       = "failed"
	editNotAttempted = "not_attempted"
	editRolledBack   = "rolled_back"
)

const maxMultiEdits = 100

type multiEdit struct{ fileDeps }

type multiEditArgs struct {
	Path  string     `json:"path"`
	Edits []editSpec `json:"edits"`
	Mode  string     `json:"mode"`
}

// editReport is what happened to one edit of multi_edit.
type editReport struct {
	Index        int    `json:"index"`
	Status       string `json:"status"`
	Replacements int    `json:"replacements,omitempty"`
	Line         int    `json:"line,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// multiEditOutput is the structured result of multi_edit.
type multiEditOutput struct {
	Path    string       `json:"path"`
	Mode    string       `json:"mode"`
	Written bool         `json:"written"`
	Applied int          `json:"applied"`
	Failed  int          `json:"failed"`
	Edits   []editReport `json:"edits"`
}

func (t *multiEdit) Spec() tool.Spec {
	return fileSpec(tool.Spec{
		Name:  "multi_edit",
		Label: "Edit file (several changes)",
		Description: "Apply several exact string replacements to one file in one call, in order (each sees the result of the previous ones). " +
			"mode: strict = all or nothing; partial (default) = stop at the first failing edit, keep those before it; best_effort = skip failing edits, apply the rest. " +
			"Same read-before-write rule as edit_file. The result reports each edit.",
		Parameters: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "The file, relative to the working directory (absolute paths must lie inside it)."},
    "edits": {
      "type": "array", "minItems": 1, "maxItems": %d,
      "description": "The replacements, applied in this order.",
      "items": {
        "type": "object",
        "properties": {
          %s
        },
        "required": ["old_string", "new_string"],
        "additionalProperties": false
      }
    },
    "mode": {"type": "string", "enum": ["strict", "partial", "best_effort"], "description": "What to do when an edit fails (default partial)."}
  },
  "required": ["path", "edits"],
  "additionalProperties": false
}`, maxMultiEdits, editSchemaProps)),
		Documentation: multiEditDoc,
		Timeout:       time.Minute,
	}, false)
}

// Precheck: as edit_file's, refusing also edits of which Run would write nothing
// (none applies or, strict, one fails) (tool.Prechecker).
func (t *multiEdit) Precheck(ctx *tool.Context, raw json.RawMessage) error {
	var args multiEditArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil // Run says what is wrong with the arguments
	}
	return precheckFile(t.fileDeps, ctx, args.Path, func(w *fileRoot, tg fileTarget, guard *fileGuard) error {
		data, _, err := w.loadForEdit(tg, guard, "multi_edit")
		if err != nil {
			return err
		}
		switch args.Mode {
		case "":
			args.Mode = modePartial
		case modeStrict, modePartial, modeBestEffort:
		default:
			return nil // Run says what is wrong with the mode
		}
		if len(args.Edits) == 0 || len(args.Edits) > maxMultiEdits {
			return nil
		}
		_, out := applyEdits(string(data), args.Edits, args.Mode)
		out.Path = tg.show()
		if out.Applied == 0 || (args.Mode == modeStrict && out.Failed > 0) {
			return tool.Errorf(tool.KindInvalidArgs, "%s", out.render("nothing was written"))
		}
		return nil
	})
}

func (t *multiEdit) Run(ctx *tool.Context, raw json.RawMessage) (*tool.Result, error) {
	var args multiEditArgs
	if err := decodeArgs(raw, &args); err != nil {
		return nil, err
	}
	switch args.Mode {
	case "":
		args.Mode = modePartial
	case modeStrict, modePartial, modeBestEffort:
	default:
		return nil, tool.Errorf(tool.KindInvalidArgs, "mode %q: must be strict, partial or best_effort", args.Mode)
	}
	if len(args.Edits) == 0 || len(args.Edits) > maxMultiEdits {
		return nil, tool.Errorf(tool.KindInvalidArgs, "edits: give between 1 and %d edits", maxMultiEdits)
	}
	w, tg, guard, err := openFile(t.fileDeps, ctx, args.Path)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	data, fi, err := w.loadForEdit(tg, guard, "multi_edit")
	if err != nil {
		return nil, err
	}
	text, out := applyEdits(string(data), args.Edits, args.Mode)
	out.Path = tg.show()
	switch {
	case out.Applied == 0 || (args.Mode == modeStrict && out.Failed > 0):
		res, err := fileResult(out.render("nothing was written"), out, nil)
		if err != nil {
			return nil, err
		}
		res.IsError, res.ErrorKind = true, tool.KindInvalidArgs
		return res, nil
	case text == string(data):
		return fileResult(out.render("the content is unchanged, nothing was written"), out, nil)
	}
	if err := w.commit(ctx, guard, tg, []byte(text), fi.Mode(), false); err != nil {
		return nil, err
	}
	out.Written = true
	return fileResult(out.render("written"), out, nil)
}

// applyEdits applies edits to text in order under a mode and reports on each.
func applyEdits(text string, edits []editSpec, mode string) (string, multiEditOutput) {
	out := multiEditOutput{Mode: mode, Edits: make([]editReport, len(edits))}
	for i, e := range edits {
		rep := &out.Edits[i]
		rep.Index = i
		if mode == modePartial && out.Failed > 0 {
			rep.Status = editNotAttempted
			continue
		}
		reason := e.invalid()
		var r editResult
		if reason == "" {
			r, reason = applyEdit(text, e)
		}
		if reason != "" {
			rep.Status, rep.Reason = editFailed, reason
			out.Failed++
			continue
		}
		text = r.text
		rep.Status, rep.Replacements, rep.Line = editApplied, r.count, r.lines[0]
		out.Applied++
	}
	if mode == modeStrict && out.Failed > 0 {
		for i := range out.Edits {
			if out.Edits[i].Status == editApplied {
				out.Edits[i].Status = editRolledBack
			}
		}
	}
	return text, out
}

// render is the text of a multi_edit result.
func (o multiEditOutput) render(outcome string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "multi_edit %s (mode %s): %d of %s applied, %d failed; %s.\n", o.Path, o.Mode, o.Applied, countOf(len(o.Edits), "edit", "edits"), o.Failed, outcome)
	for _, r := range o.Edits {
		fmt.Fprintf(&b, "edits[%d]: %s", r.Index, strings.ReplaceAll(r.Status, "_", " "))
		switch r.Status {
		case editApplied, editRolledBack:
			fmt.Fprintf(&b, " (%d replacement%s, from line %d)", r.Replacements, pluralS(r.Replacements), r.Line)
		case editFailed:
			b.WriteString(": " + r.Reason)
		}
		b.WriteByte('\n')
	}
	switch {
	case o.Mode == modeStrict && o.Failed > 0:
		b.WriteString("In strict mode one failing edit cancels all of them; fix the failing edits and send the whole list again.\n")
	case o.Mode == modePartial && o.Failed > 0 && o.Applied > 0:
		b.WriteString("The edits before the failing one are in the file; send the failing edit and the ones after it again (corrected).\n")
	}
	return strings.TrimRight(b.String(), "\n")
}
