package toolmgr

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxNameLen is the longest function name the model providers accept.
const MaxNameLen = 64

// SanitizeName replaces every character a provider rejects in a tool name (anything
// outside [a-zA-Z0-9_-]) with '_'. Tool sources that take names from elsewhere (MCP
// servers, OpenAPI documents) pass them through it.
func SanitizeName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// ShortHash is a stable 8-hex-digit digest of s.
func ShortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}

// CapName cuts a name longer than MaxNameLen and appends a hash of the whole name,
// so that two long names sharing their first 55 characters stay distinct.
func CapName(s string) string {
	if len(s) <= MaxNameLen {
		return s
	}
	return WithSuffix(s, "_"+ShortHash(s))
}

// WithSuffix appends suffix, cutting s so that the result fits MaxNameLen.
func WithSuffix(s, suffix string) string {
	if len(s)+len(suffix) > MaxNameLen {
		s = s[:MaxNameLen-len(suffix)]
	}
	return s + suffix
}
