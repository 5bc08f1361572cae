package approval

import (
	"path"
	"strings"
)

// readOnlyCommands are the commands known to change nothing. A nil check means
// any arguments are fine (dynamic ones too); otherwise the check decides, and a
// dynamic argument makes the command not read-only, since it could be an option.
var readOnlyCommands = map[string]func(args []string) bool{}

func init() {
	for _, name := range strings.Fields(`ls cat head tail wc grep egrep fgrep zgrep echo printf pwd which
		whereis type printenv uname whoami id groups uptime df du free ps stat realpath readlink
		dirname basename cut tr nl od hexdump md5sum sha1sum sha224sum sha256sum sha384sum sha512sum shasum
		cksum b2sum diff cmp comm column fold tac rev strings jq true false test [ seq expr sleep nproc
		arch tty locale getconf cal cd pushd popd dirs : lsblk lscpu whatis less more zcat read
		exit return`) {
		readOnlyCommands[name] = nil
	}
	for name, check := range map[string]func([]string) bool{
		"find":     findReadOnly,
		"sed":      sedReadOnly,
		"tee":      teeReadOnly,
		"sort":     sortReadOnly,
		"uniq":     maxPositional(1, "fsw"),
		"xxd":      maxPositional(1, "cglsoCn"),
		"rg":       rgReadOnly,
		"ag":       runsNone("", "--pager", 5),    // --pager=CMD runs CMD through the shell
		"file":     runsNone("C", "--compile", 4), // -C writes a compiled magic file
		"fd":       fdReadOnly,
		"tree":     noneOf("-o"),
		"date":     dateReadOnly,
		"hostname": hostnameReadOnly,
		"env":      envReadOnly,
		"command":  func(args []string) bool { return len(args) > 0 && (args[0] == "-v" || args[0] == "-V") },
		"xargs":    xargsReadOnly,
		"git":      gitReadOnly,
		"gofmt":    noneOf("-w"),
		"go":       goReadOnly,
		"docker":   subcommands("ps", "images", "inspect", "logs", "version", "info"),
		"kubectl":  subcommands("get", "describe", "logs", "version", "explain"),
		"npm":      subcommands("ls", "list", "view", "info", "outdated", "--version", "-v"),
		"pip":      subcommands("list", "show", "freeze", "--version"),
		"pip3":     subcommands("list", "show", "freeze", "--version"),
	} {
		readOnlyCommands[name] = check
	}
	for _, name := range strings.Fields(`node python python3 ruby perl java rustc cargo gcc clang make cmake
		yarn pnpm deno bun tsc`) {
		readOnlyCommands[name] = versionOnly
	}
}

// trustedBinDirs are where a command named by path may live and still count as
// the well-known command (/usr/bin/ls is ls; ./ls is not).
var trustedBinDirs = map[string]bool{"/bin": true, "/usr/bin": true, "/usr/local/bin": true, "/sbin": true, "/usr/sbin": true, "/opt/homebrew/bin": true}

func readOnlyCommand(words []string, dyn []bool) bool {
	if len(words) == 0 {
		return true
	}
	name := words[0]
	if strings.Contains(name, "/") {
		if !trustedBinDirs[path.Dir(name)] {
			return false
		}
		name = path.Base(name)
	}
	check, ok := readOnlyCommands[name]
	if !ok {
		return false
	}
	if check == nil {
		return true
	}
	for _, d := range dyn {
		if d {
			return false
		}
	}
	return check(words[1:])
}

func noneOf(bad ...string) func([]string) bool {
	return func(args []string) bool {
		for _, a := range args {
			for _, b := range bad {
				if a == b || strings.HasPrefix(a, b+"=") {
					return false
				}
			}
		}
		return true
	}
}

func subcommands(allowed ...string) func([]string) bool {
	return func(args []string) bool {
		return len(args) > 0 && contains(allowed, args[0])
	}
}

func goReadOnly(args []string) bool {
	if len(args) > 0 && args[0] == "env" {
		return !contains(args, "-w") && !contains(args, "-u")
	}
	for _, a := range args {
		// -vettool and -toolexec run the program they name.
		name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "vettool" || name == "toolexec") {
			return false
		}
	}
	return subcommands("version", "list", "vet", "doc", "help")(args)
}

// runsNone refuses the option that makes an otherwise read-only command run a
// program or write a file: one of shorts anywhere in a cluster of short options,
// or long, also abbreviated to at least minLong characters (getopt_long takes any
// unambiguous prefix).
func runsNone(shorts, long string, minLong int) func([]string) bool {
	return func(args []string) bool {
		for _, a := range args {
			if a == "--" {
				break
			}
			if abbrevOf(a, long, minLong) {
				return false
			}
			if shorts != "" && len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsAny(a[1:], shorts) {
				return false
			}
		}
		return true
	}
}

// abbrevOf reports whether arg names the long option long ("--pager"), in full or
// by a prefix of at least min characters, with or without "=value".
func abbrevOf(arg, long string, min int) bool {
	name, _, _ := strings.Cut(arg, "=")
	return strings.HasPrefix(name, "--") && len(name) >= min && strings.HasPrefix(long, name)
}

func versionOnly(args []string) bool {
	return len(args) == 1 && contains([]string{"--version", "-V", "-v", "-version", "version"}, args[0])
}

// maxPositional allows at most n operands (a further one names an output file);
// withArg lists the short options that take a value.
func maxPositional(n int, withArg string) func([]string) bool {
	return func(args []string) bool {
		count := 0
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case len(a) == 2 && a[0] == '-' && strings.IndexByte(withArg, a[1]) >= 0:
				i++
			case strings.HasPrefix(a, "-") && a != "-":
			default:
				count++
			}
		}
		return count <= n
	}
}

func findReadOnly(args []string) bool {
	for _, a := range args {
		switch a {
		case "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls":
			return false
		}
	}
	return true
}

func teeReadOnly(args []string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") && a != "/dev/null" {
			return false
		}
	}
	return true
}

func sortReadOnly(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "--output") || strings.HasPrefix(a, "--compress-program") ||
			len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 'o') {
			return false
		}
	}
	return true
}

func rgReadOnly(args []string) bool {
	for _, a := range args {
		// --pre and --hostname-bin run the program they name.
		if a == "--pre" || strings.HasPrefix(a, "--pre=") || a == "--hostname-bin" || strings.HasPrefix(a, "--hostname-bin=") {
			return false
		}
	}
	return true
}

func fdReadOnly(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "--exec") || len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsAny(a, "xX") {
			return false
		}
	}
	return true
}

func dateReadOnly(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "--set") || len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 's') {
			return false
		}
	}
	return true
}

func hostnameReadOnly(args []string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-F" || a == "-b" || strings.HasPrefix(a, "--file") || a == "--boot" {
			return false
		}
	}
	return true
}

// envReadOnly: env that is still the command after unwrapping runs nothing and
// only prints the environment.
func envReadOnly(args []string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") && !isAssignment(a) {
			return false
		}
	}
	return true
}

func xargsReadOnly(args []string) bool {
	inner := skipOptions(args, "IELnPsdax", "arg-file delimiter eof replace max-lines max-args max-procs max-chars process-slot-var")
	if len(inner) == 0 {
		return true // xargs echo
	}
	return readOnlyCommand(inner, nil)
}

// gitSubcommand skips git's global options. configured is set when -c or
// --exec-path change what git runs, or --git-dir names a repository that is not a
// .git directory: its config can run programs (core.fsmonitor, core.pager,
// diff.external, gpg.program), and only .git directories are immune to writes.
func gitSubcommand(args []string) (sub string, rest []string, configured bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c" || a == "--config-env":
			configured = true
			i++
		case a == "--git-dir":
			if i+1 >= len(args) || !isDotGit(args[i+1]) {
				configured = true
			}
			i++
		case strings.HasPrefix(a, "--git-dir="):
			if !isDotGit(strings.TrimPrefix(a, "--git-dir=")) {
				configured = true
			}
		case a == "-C" || a == "--work-tree" || a == "--namespace" || a == "--super-prefix":
			i++
		case strings.HasPrefix(a, "--exec-path") || strings.HasPrefix(a, "--config-env="):
			configured = true
		case strings.HasPrefix(a, "-"):
		default:
			return a, args[i+1:], configured
		}
	}
	return "", nil, configured
}

// isDotGit reports whether dir is a directory named .git ("sub/.git", ".git/").
func isDotGit(dir string) bool {
	return path.Base(path.Clean(dir)) == ".git"
}

var gitReadOnlySubs = map[string]bool{
	"status": true, "log": true, "diff": true, "show": true, "blame": true, "annotate": true, "shortlog": true,
	"describe": true, "rev-parse": true, "ls-files": true, "ls-tree": true, "ls-remote": true, "cat-file": true,
	"grep": true, "whatchanged": true, "merge-base": true, "name-rev": true, "rev-list": true,
	"count-objects": true, "version": true, "show-ref": true, "for-each-ref": true, "check-ignore": true,
	"cherry": true, "range-diff": true, "diff-tree": true, "diff-files": true, "diff-index": true, "help": true,
}

func gitReadOnly(args []string) bool {
	sub, rest, configured := gitSubcommand(args)
	if configured {
		return false
	}
	for _, a := range rest {
		if strings.HasPrefix(a, "--output") || a == "--ext-diff" {
			return false
		}
	}
	// git grep -O<cmd> (--open-files-in-pager) runs cmd through the shell.
	if sub == "grep" && !runsNone("O", "--open-files-in-pager", 4)(rest) {
		return false
	}
	switch {
	case gitReadOnlySubs[sub]:
		return true
	case sub == "":
		return true // git --version, git --help
	case sub == "branch":
		return listOnly(rest, "alrvq", []string{"--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format"},
			[]string{"--all", "--remotes", "--list", "--verbose", "--show-current", "--quiet", "--color", "--no-color", "--column", "--no-column", "--abbrev", "--no-abbrev", "--ignore-case", "--omit-empty"})
	case sub == "tag":
		return listOnly(rest, "lni0123456789", []string{"--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format"},
			[]string{"--list", "--column", "--no-column", "--ignore-case", "--color", "--omit-empty"})
	case sub == "remote":
		return len(rest) == 0 || contains([]string{"-v", "--verbose", "get-url", "show"}, rest[0])
	case sub == "stash" || sub == "worktree":
		return len(rest) > 0 && (rest[0] == "list" || sub == "stash" && rest[0] == "show")
	case sub == "reflog":
		return len(rest) == 0 || rest[0] == "show" || strings.HasPrefix(rest[0], "-")
	case sub == "config":
		get := false
		for _, a := range rest {
			switch {
			case a == "--list" || a == "-l" || strings.HasPrefix(a, "--get") || a == "get" || a == "list":
				get = true
			case a == "--unset" || a == "--unset-all" || a == "--add" || a == "--replace-all" || a == "--edit" ||
				a == "-e" || a == "--rename-section" || a == "--remove-section" || a == "set" || a == "unset":
				return false
			}
		}
		return get
	}
	return false
}

// listOnly accepts `git branch`/`git tag` invocations that only list: short
// options from shortOK, long ones from longOK or valued, and operands only as
// patterns after --list.
func listOnly(args []string, shortOK string, valued, longOK []string) bool {
	list, operands := false, 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasVal := strings.Cut(a, "=")
		switch {
		case a == "-l" || a == "--list":
			list = true
		case contains(valued, name):
			if !hasVal {
				i++
			}
		case contains(longOK, name):
		case strings.HasPrefix(a, "--"):
			return false
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for _, c := range a[1:] {
				if !strings.ContainsRune(shortOK, c) {
					return false
				}
			}
			list = list || strings.ContainsRune(a, 'l')
		default:
			operands++
		}
	}
	return operands == 0 || list
}
