package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Stream names.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

const (
	// DefaultReadMax is what ReadOutputRange returns at most when max <= 0.
	DefaultReadMax = 64 << 10
	// MaxReadMax bounds one ReadOutputRange.
	MaxReadMax = 16 << 20
	// maxTailBytes bounds what Tail scans and returns.
	maxTailBytes = 1 << 20
)

// outputLog is one stream of one job: an append-only file holding at most limit
// bytes. Only the copier writes; size is published after each write, so readers never
// see a byte that is not on disk.
type outputLog struct {
	path  string
	limit int64
	size  atomic.Int64
	// dropped counts the bytes beyond limit; lost those that could not be written.
	dropped atomic.Int64
	lost    atomic.Int64
	// werr is the first write error (disk full …); later bytes are lost.
	werr atomic.Pointer[error]
	// lostTail keeps the last lostTailBytes of the lost bytes in memory: a command
	// run on a full disk (df, du, the error of the write that filled it) is what the
	// model needs to see to clear it.
	lostMu   sync.Mutex
	lostTail []byte
}

// lostTailBytes is how much of a stream's lost output is kept in memory.
const lostTailBytes = 16 << 10

func (o *outputLog) keepLost(b []byte) {
	if len(b) == 0 {
		return
	}
	o.lostMu.Lock()
	defer o.lostMu.Unlock()
	if len(b) >= lostTailBytes {
		o.lostTail = append(o.lostTail[:0], b[len(b)-lostTailBytes:]...)
		return
	}
	if over := len(o.lostTail) + len(b) - lostTailBytes; over > 0 {
		o.lostTail = append(o.lostTail[:0], o.lostTail[over:]...)
	}
	o.lostTail = append(o.lostTail, b...)
}

// lostText returns the kept tail of the lost output.
func (o *outputLog) lostText() string {
	o.lostMu.Lock()
	defer o.lostMu.Unlock()
	return string(o.lostTail)
}

// copyFrom drains r into the log file w until EOF or a read error (a deadline set by
// the job after its process exited), then closes both.
func (o *outputLog) copyFrom(r, w *os.File, notify func()) {
	defer r.Close()
	defer w.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) && n == 0 {
			// The drain deadline passed, perhaps before this goroutine ran at all on a
			// loaded machine: what the process wrote before it exited is still in the
			// pipe, and Read no longer returns it. Take it without waiting.
			n, err = drainNow(r, buf)
		}
		if n > 0 {
			fits := min(int64(n), max(o.limit-o.size.Load(), 0))
			written := int64(0)
			if fits > 0 && o.werr.Load() == nil {
				m, werr := w.Write(buf[:fits])
				if werr != nil {
					o.werr.Store(&werr)
				}
				written = int64(m)
				o.size.Add(written)
			}
			o.lost.Add(fits - written)
			o.keepLost(buf[written:fits])
			o.dropped.Add(int64(n) - fits)
			notify()
		}
		if err != nil {
			return
		}
	}
}

// drainNow reads what is in the pipe now, without waiting and whatever its deadline.
// It returns io.EOF once nothing is left, so the caller's loop ends.
func drainNow(r *os.File, buf []byte) (int, error) {
	rc, err := r.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	cerr := rc.Control(func(fd uintptr) {
		for {
			m, err := syscall.Read(int(fd), buf)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if m > 0 {
				n = m
			}
			return
		}
	})
	if cerr != nil {
		return 0, cerr
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// writeErr says why the log could not be written, without the log's path (the
// daemon's own directory, nothing for a reader to act on): "" when it could.
func (o *outputLog) writeErr() string {
	p := o.werr.Load()
	if p == nil {
		return ""
	}
	err := *p
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return err.Error()
}

// readRange returns the bytes [offset, offset+max) that are on disk.
func (o *outputLog) readRange(offset int64, max int) ([]byte, int64, error) {
	if offset < 0 {
		return nil, offset, fmt.Errorf("offset %d: must not be negative", offset)
	}
	if max <= 0 {
		max = DefaultReadMax
	}
	max = min(max, MaxReadMax)
	size := o.size.Load()
	if offset >= size {
		return []byte{}, offset, nil
	}
	n := min(int64(max), size-offset)
	buf, err := o.readAt(offset, n)
	if err != nil {
		return nil, offset, err
	}
	return buf, offset + n, nil
}

func (o *outputLog) readAt(offset, n int64) ([]byte, error) {
	f, err := os.Open(o.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrOutputDiscarded
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, offset); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf, nil
}

// tail returns the last n lines (a final newline does not start a new line), at most
// maxTailBytes, and the offset they start at.
func (o *outputLog) tail(n int) ([]byte, int64, error) {
	size := o.size.Load()
	if n <= 0 || size == 0 {
		return []byte{}, size, nil
	}
	floor := max(0, size-maxTailBytes)
	data, err := o.readAt(floor, size-floor)
	if err != nil {
		return nil, size, err
	}
	end := len(data)
	if data[end-1] == '\n' {
		end--
	}
	start := 0
	for i := end - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n--
			if n == 0 {
				start = i + 1
				break
			}
		}
	}
	if n > 0 && floor > 0 {
		// Not enough lines in the window: start at the next line boundary inside it.
		if i := bytes.IndexByte(data, '\n'); i >= 0 && i+1 < len(data) {
			start = i + 1
		}
	}
	return data[start:], floor + int64(start), nil
}
