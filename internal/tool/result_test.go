package tool

import "testing"

func TestErrorKindKnown(t *testing.T) {
	for _, k := range []ErrorKind{KindNotFound, KindInvalidArgs, KindDenied, KindTimeout, KindCancelled, KindFailed, KindUnavailable, KindSkipped} {
		if !k.Known() {
			t.Errorf("%q is not known", k)
		}
	}
	for _, k := range []ErrorKind{"", "ok", "Failed", "attacker-chosen"} {
		if k.Known() {
			t.Errorf("%q is known", k)
		}
	}
}
