package progress

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

var (
	// ErrUnknownCall: the hub has no progress for the call (never begun, or its
	// logs were collected). The HTTP layer maps it to 404.
	ErrUnknownCall = errors.New("progress: unknown call")
	// ErrBadOffset: a negative read offset. The HTTP layer maps it to 400.
	ErrBadOffset = errors.New("progress: offset must not be negative")
	// ErrLogUnavailable: the stream's log could not be written or read.
	ErrLogUnavailable = errors.New("progress: log unavailable")
)

const (
	// DefaultReadMax is what Read returns at most when asked for max <= 0.
	DefaultReadMax = 1 << 20
	// MaxRead bounds one Read whatever max asks for.
	MaxRead = 16 << 20

	logSuffix = ".log"
)

// CallInfo describes the progress a hub holds for a call.
type CallInfo struct {
	CallMeta
	// Sizes maps each stream the call has written to its log size in bytes.
	Sizes map[string]int64
	// Finished is set once the call's progress is closed.
	Finished bool
	// Progress is the call's latest numeric progress; nil when it reported none, or
	// when its logs are an earlier process's that stopped before the call finished
	// (a running call's value is in memory; a finished call's is saved with its logs).
	Progress *Value
}

// Latest returns a call's latest numeric progress, if it reported any.
func (h *Hub) Latest(callID string) (Value, bool) {
	if !h.cfg.Enabled {
		return Value{}, false
	}
	c := h.lookup(callID)
	if c == nil {
		return h.savedLatest(callID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest, c.latest.Seq > 0
}

// latestFile holds a finished call's latest value in its directory.
const latestFile = "latest.json"

// savedLatest reads the latest value a finished call left on disk.
func (h *Hub) savedLatest(callID string) (Value, bool) {
	b, err := os.ReadFile(filepath.Join(h.cfg.Dir, encodeName(callID), latestFile))
	if err != nil {
		return Value{}, false
	}
	var v Value
	if json.Unmarshal(b, &v) != nil || v.Seq == 0 {
		return Value{}, false
	}
	return v, true
}

// Read returns the bytes of a call's stream log from offset, at most max of them
// (max <= 0 means DefaultReadMax), the offset to read next, and whether the
// call's progress is closed and next has reached the end of the log. An offset
// past the end yields no data, next = offset, and no error. A stream the call
// never wrote reads as empty. Logs left by an earlier process in Dir stay
// readable, as finished calls, until collected.
func (h *Hub) Read(callID, stream string, offset int64, max int) (data []byte, next int64, finished bool, err error) {
	if offset < 0 {
		return nil, offset, false, ErrBadOffset
	}
	if max <= 0 {
		max = DefaultReadMax
	}
	max = min(max, MaxRead)
	size, closed, path, err := h.locate(callID, stream)
	if err != nil {
		return nil, offset, false, err
	}
	if offset >= size {
		return nil, offset, closed, nil
	}
	data, err = readAt(path, offset, int(min(int64(max), size-offset)))
	if err != nil {
		return nil, offset, false, err
	}
	next = offset + int64(len(data))
	return data, next, closed && next >= size, nil
}

// locate finds the size, closed state and log path of a stream; size is what has
// been published, so Read never returns bytes no event has carried yet.
func (h *Hub) locate(callID, stream string) (size int64, closed bool, path string, err error) {
	if len(stream) > maxStreamName {
		stream = stream[:maxStreamName]
	}
	if !h.cfg.Enabled {
		return 0, false, "", ErrUnknownCall
	}
	if c := h.lookup(callID); c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		st := c.streams[stream]
		if st == nil {
			return 0, c.closed, "", nil
		}
		if st.logErr != nil {
			return 0, false, "", fmt.Errorf("%w: %v", ErrLogUnavailable, st.logErr)
		}
		return st.size, c.closed, st.path, nil
	}
	// Not in memory: logs of an earlier process, read as finished.
	dir := filepath.Join(h.cfg.Dir, encodeName(callID))
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return 0, false, "", ErrUnknownCall
	}
	path = filepath.Join(dir, encodeName(stream)+logSuffix)
	fi, err := os.Stat(path)
	if err != nil {
		return 0, true, "", nil
	}
	return fi.Size(), true, path, nil
}

func readAt(path string, offset int64, n int) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrUnknownCall // collected between locate and open
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLogUnavailable, err)
	}
	defer f.Close()
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %v", ErrLogUnavailable, err)
	}
	return buf[:got], nil
}

// Streams lists, sorted, the streams a call has written; nil for an unknown call.
func (h *Hub) Streams(callID string) []string {
	if !h.cfg.Enabled {
		return nil
	}
	if c := h.lookup(callID); c != nil {
		// Every stream writer asks this of every call it ran, most of which wrote nothing.
		c.mu.Lock()
		names := make([]string, len(c.order))
		for i, st := range c.order {
			names[i] = st.name
		}
		c.mu.Unlock()
		slices.Sort(names)
		return names
	}
	info, err := h.Info(callID)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(info.Sizes))
	for name := range info.Sizes {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Info reports the streams, sizes and state of a call, or ErrUnknownCall.
func (h *Hub) Info(callID string) (CallInfo, error) {
	if !h.cfg.Enabled {
		return CallInfo{}, ErrUnknownCall
	}
	if c := h.lookup(callID); c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		info := CallInfo{CallMeta: c.meta, Sizes: make(map[string]int64, len(c.order)), Finished: c.closed}
		if c.latest.Seq > 0 {
			v := c.latest
			info.Progress = &v
		}
		for _, st := range c.order {
			info.Sizes[st.name] = st.size
		}
		return info, nil
	}
	entries, err := os.ReadDir(filepath.Join(h.cfg.Dir, encodeName(callID)))
	if err != nil {
		return CallInfo{}, ErrUnknownCall
	}
	info := CallInfo{CallMeta: CallMeta{CallID: callID}, Sizes: make(map[string]int64), Finished: true}
	if v, ok := h.savedLatest(callID); ok {
		info.Progress = &v
	}
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), logSuffix)
		if !ok {
			continue
		}
		name, ok := decodeName(base)
		fi, err := e.Info()
		if ok && err == nil {
			info.Sizes[name] = fi.Size()
		}
	}
	return info, nil
}

// encodeName maps a call id or stream name to one safe path element, reversibly
// for names up to 100 bytes: plain when made of [A-Za-z0-9_-] and non-leading
// dots, "~"+hex otherwise, "="+sha256 hex past 100 bytes.
func encodeName(s string) string {
	if plainName(s) {
		return s
	}
	if len(s) <= 100 {
		return "~" + hex.EncodeToString([]byte(s))
	}
	sum := sha256.Sum256([]byte(s))
	return "=" + hex.EncodeToString(sum[:])
}

func decodeName(s string) (string, bool) {
	if rest, ok := strings.CutPrefix(s, "~"); ok {
		b, err := hex.DecodeString(rest)
		return string(b), err == nil
	}
	return s, plainName(s)
}

func plainName(s string) bool {
	if s == "" || len(s) > 128 || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
