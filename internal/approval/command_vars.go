package approval

import (
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// What a variable holds where a command uses it. `x=/etc/passwd; cat $x` reads
// /etc/passwd: a word that holds a variable is judged by the values the line gives
// that variable before the word, and is known only when it runs (so it asks) when the
// line does not tell. The reading is conservative: a variable is known only from
// plain assignments of a literal (x=a, not x+=a, x=(a), x=$y, declare, read,
// ${x:=a}) and the literal words of a for loop; a use is known only inside such a
// loop over it, or after an assignment that surely ran (one in the line's top-level
// list, or earlier in the same && chain); and then its values are every value the
// line may give it anywhere, so that an assignment in a branch, a loop or a function
// is never missed. A line that sets IFS or sources a script knows no variable.

// maxVarValues bounds the values one word is judged with (a word of several variables
// multiplies them); past it the word is known only when it runs.
const maxVarValues = 64

// specialVars are set by the shell itself as the line runs.
var specialVars = map[string]bool{
	"PWD": true, "OLDPWD": true, "RANDOM": true, "SRANDOM": true, "SECONDS": true, "LINENO": true,
	"EPOCHSECONDS": true, "EPOCHREALTIME": true, "HISTCMD": true, "REPLY": true, "OPTARG": true,
	"OPTIND": true, "PIPESTATUS": true, "FUNCNAME": true, "IFS": true, "HOME": true, "CDPATH": true,
	"_": true, "DIRSTACK": true, "PPID": true, "UID": true, "EUID": true, "GROUPS": true, "SHLVL": true,
}

// varScope is what the line tells of its variables.
type varScope struct {
	off     bool // the line knows no variable
	tainted map[string]bool
	values  map[string][]field // every literal value assigned, loop words included
	sure    map[string][]sureAssign
	loops   map[string][]loopVar
}

// sureAssign: from end to until, a name surely holds a value the line gave it.
type sureAssign struct{ end, until uint }

// loopVar: from start to end (the loop's body), a name holds one of the loop's words.
type loopVar struct{ start, end uint }

func (a *analyzer) scanVars(f *syntax.File) {
	v := &varScope{}
	a.vars = v
	if !strings.Contains(a.src, "$") {
		return // no word holds a variable
	}
	if strings.Contains(a.src, "IFS") {
		v.off = true
		return
	}
	v.tainted, v.values = map[string]bool{}, map[string][]field{}
	v.sure, v.loops = map[string][]sureAssign{}, map[string][]loopVar{}
	var visit func(syntax.Node) bool
	walk := func(n syntax.Node) {
		if n != nil {
			syntax.Walk(n, visit)
		}
	}
	visit = func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			if len(n.Args) > 0 {
				switch n.Args[0].Lit() {
				case "source", ".":
					v.off = true
				}
			}
			for _, as := range n.Assigns {
				v.assign(a, as)
				if as.Index != nil {
					walk(as.Index)
				}
				if as.Value != nil {
					walk(as.Value)
				}
				if as.Array != nil {
					walk(as.Array)
				}
			}
			for _, w := range n.Args {
				walk(w)
			}
			return false
		case *syntax.DeclClause:
			for _, as := range n.Args {
				if as.Name != nil {
					v.tainted[as.Name.Value] = true
				}
				if as.Index != nil {
					walk(as.Index)
				}
				if as.Value != nil {
					walk(as.Value)
				}
				if as.Array != nil {
					walk(as.Array)
				}
			}
			return false
		case *syntax.ForClause:
			wi, ok := n.Loop.(*syntax.WordIter)
			if !ok || n.Select {
				return true
			}
			name := wi.Name.Value
			items := expandWords(a.cfg, a.src, wi.Items)
			for _, it := range items {
				if it.dynamic {
					v.tainted[name] = true
				}
			}
			if len(wi.Items) == 0 && !wi.InPos.IsValid() { // for x; do: the positional parameters
				v.tainted[name] = true
			}
			v.values[name] = append(v.values[name], items...)
			v.loops[name] = append(v.loops[name], loopVar{start: n.DoPos.Offset(), end: n.DonePos.Offset()})
			for _, w := range wi.Items {
				walk(w)
			}
			for _, s := range n.Do {
				walk(s)
			}
			return false
		case *syntax.ParamExp:
			if n.Param != nil && simpleParam(n) {
				return false
			}
			if n.Param != nil {
				v.tainted[n.Param.Value] = true
			}
		case *syntax.Lit:
			for _, tok := range strings.FieldsFunc(n.Value, func(r rune) bool {
				return r != '_' && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && !(r >= '0' && r <= '9')
			}) {
				v.tainted[tok] = true
			}
		}
		return true
	}
	walk(f)
	for _, s := range f.Stmts {
		if s.Background || s.Coprocess || s.Disown {
			continue
		}
		if bc, ok := s.Cmd.(*syntax.BinaryCmd); ok && bc.Op == syntax.AndStmt {
			for _, e := range andChain(s) {
				v.sureAt(e, s.End().Offset())
			}
			continue
		}
		v.sureAt(s, ^uint(0))
	}
}

// andChain flattens a && b && c.
func andChain(s *syntax.Stmt) []*syntax.Stmt {
	if bc, ok := s.Cmd.(*syntax.BinaryCmd); ok && bc.Op == syntax.AndStmt && !s.Negated && len(s.Redirs) == 0 {
		return append(andChain(bc.X), bc.Y)
	}
	return []*syntax.Stmt{s}
}

// sureAt records the assignments of s, when it is only assignments, as sure from its
// end until until.
func (v *varScope) sureAt(s *syntax.Stmt, until uint) {
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) > 0 || s.Background || s.Coprocess {
		return
	}
	for _, as := range call.Assigns {
		if as.Name != nil {
			v.sure[as.Name.Value] = append(v.sure[as.Name.Value], sureAssign{end: s.End().Offset(), until: until})
		}
	}
}

// assign notes one NAME=value: its value when it is a plain literal, else the name
// is tainted.
func (v *varScope) assign(a *analyzer, as *syntax.Assign) {
	if as.Name == nil {
		return
	}
	name := as.Name.Value
	if as.Append || as.Naked || as.Index != nil || as.Array != nil {
		v.tainted[name] = true
		return
	}
	if as.Value == nil {
		v.values[name] = append(v.values[name], field{})
		return
	}
	if wordDynamic(as.Value) || strings.HasPrefix(as.Value.Lit(), "~") {
		v.tainted[name] = true
		return
	}
	fs := expandWords(a.cfg, a.src, []*syntax.Word{as.Value})
	if len(fs) != 1 || fs[0].dynamic {
		v.tainted[name] = true
		return
	}
	v.values[name] = append(v.values[name], field{text: fs[0].text})
}

func simpleParam(p *syntax.ParamExp) bool {
	return p.Param != nil && p.Flags == nil && !p.Excl && !p.Length && !p.Width && !p.IsSet &&
		p.NestedParam == nil && p.Index == nil && len(p.Modifiers) == 0 && p.Slice == nil &&
		p.Repl == nil && p.Names == 0 && p.Exp == nil
}

// valuesAt are the values name may hold at offset off, or false when only the run
// knows.
func (v *varScope) valuesAt(name string, off uint) ([]field, bool) {
	if v == nil || v.off || v.tainted[name] || specialVars[name] || !validName(name) || strings.HasPrefix(name, "BASH") {
		return nil, false
	}
	known := false
	for _, l := range v.loops[name] {
		known = known || l.start <= off && off < l.end
	}
	for _, s := range v.sure[name] {
		known = known || s.end <= off && off < s.until
	}
	if !known {
		return nil, false
	}
	return v.values[name], true
}

// resolve expands a word that holds variables with each value the line gives
// them where it stands; false when one is known only when it runs.
func (a *analyzer) resolve(w *syntax.Word) ([]field, bool) {
	var names []string
	ok := true
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ParamExp:
			if !simpleParam(n) {
				ok = false
			} else if !contains(names, n.Param.Value) {
				names = append(names, n.Param.Value)
			}
			return false
		case *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob, *syntax.BraceExp:
			ok = false
		}
		return ok
	})
	if !ok || len(names) == 0 {
		return nil, false
	}
	choices := make([][]field, len(names))
	n := 1
	for i, name := range names {
		vals, known := a.vars.valuesAt(name, w.Pos().Offset())
		if !known || len(vals) == 0 {
			return nil, false
		}
		for _, val := range vals {
			if strings.ContainsAny(val.text, " \t\n") {
				return nil, false // the shell splits it into words
			}
		}
		choices[i] = vals
		if n *= len(vals); n > maxVarValues {
			return nil, false
		}
	}
	glob := wordGlob(w)
	var out []field
	pick := make(map[string]field, len(names))
	var each func(i int) bool
	each = func(i int) bool {
		if i == len(names) {
			g := glob
			for _, f := range pick {
				g = g || f.glob || strings.ContainsAny(f.text, "*?[")
			}
			cfg := &expand.Config{Env: expand.FuncEnviron(func(name string) string {
				if f, ok := pick[name]; ok {
					return f.text
				}
				if name == "IFS" {
					return ""
				}
				return "$" + name
			})}
			fs, err := expand.Fields(cfg, w)
			if err != nil {
				return false
			}
			if len(fs) == 0 {
				fs = []string{""}
			}
			for _, s := range fs {
				out = append(out, field{text: s, glob: g})
			}
			return true
		}
		for _, f := range choices[i] {
			pick[names[i]] = f
			if !each(i + 1) {
				return false
			}
		}
		return true
	}
	if !each(0) {
		return nil, false
	}
	return out, true
}
