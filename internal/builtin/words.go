package builtin

import "fmt"

// countOf is n followed by the noun that agrees with it: "1 file", "3 files".
func countOf[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// pluralS is the "s" a count other than one takes.
func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// wasWere is the verb that agrees with a count.
func wasWere[N ~int | ~int64](n N) string {
	if n == 1 {
		return "was"
	}
	return "were"
}
