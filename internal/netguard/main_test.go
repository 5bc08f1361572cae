package netguard

import (
	"testing"

	"github.com/toolserverd/toolserverd/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
