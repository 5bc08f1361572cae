package approval

import "path"

// Programs whose words carry a script or a command: what they read, write and run
// beyond the files their words name. sed's r and w commands name files inside its
// script, its e command runs shell code; a static reading finds them there as it
// finds a redirection's file in the line.

// effects are what one program's script does: files it reads and writes, and the
// shell code it runs ("" for code it builds as it runs), said as what.
type effects struct {
	reads, writes, runs []string
	what                string
}

// scriptEffects reads the script words of the program words runs.
func scriptEffects(words []string) effects {
	switch path.Base(words[0]) {
	case "sed", "gsed":
		var fx effects
		scripts, _ := sedScripts(words[1:])
		for _, s := range scripts {
			sfx := sedScriptEffects(s)
			fx.reads = append(fx.reads, sfx.reads...)
			fx.writes = append(fx.writes, sfx.writes...)
			fx.runs = append(fx.runs, sfx.runs...)
		}
		fx.what = "sed e"
		return fx
	}
	return effects{}
}
