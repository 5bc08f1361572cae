package skills

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Start follows changes to the skill directories until ctx ends or Stop is called.
//
// fsnotify does not watch recursively, so the watcher holds one watch per configured
// directory and per folder inside every skill (the list each scan produces). Any event
// restarts a debounce timer (Config.Debounce); when it fires the Manager rescans every
// directory (cheap: unchanged folders are recognised by their stat data and not read)
// and then adds watches for new folders and drops those of removed ones. Adding a watch
// schedules one more rescan, so files written into a new folder before its watch
// existed are not missed. Without fsnotify (e.g. out of inotify instances) the Manager
// falls back to polling, and so it does while some folders cannot be watched (past
// fs.inotify.max_user_watches, a limit shared with every program of the user): one
// warning says so, and an info line when every folder is watched again. Start
// without Watch and without PollInterval does nothing.
func (m *Manager) Start(ctx context.Context) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.done != nil {
		return errors.New("skills: manager already started")
	}
	poll := m.cfg.PollInterval
	var w *fsnotify.Watcher
	if m.cfg.Watch {
		var err error
		if w, err = fsnotify.NewWatcher(); err != nil {
			m.log.Warn("skills: file watcher unavailable, polling instead", "err", err, "interval", fallbackPollInterval)
			if poll == 0 {
				poll = fallbackPollInterval
			}
		}
	}
	m.done = make(chan struct{})
	if w == nil && poll == 0 {
		close(m.done)
		m.cancel = func() {}
		return nil
	}
	ctx, m.cancel = context.WithCancel(ctx)
	go m.run(ctx, w, poll)
	return nil
}

// Stop ends watching and waits for the watcher goroutine. It is safe to call more than
// once and without Start.
func (m *Manager) Stop() {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.done == nil {
		return
	}
	m.cancel()
	<-m.done
}

func (m *Manager) run(ctx context.Context, w *fsnotify.Watcher, poll time.Duration) {
	defer close(m.done)
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	var tick <-chan time.Time
	if poll > 0 {
		t := time.NewTicker(poll)
		defer t.Stop()
		tick = t.C
	}
	// fallback polls while some folders have no watch (sync), when poll does not.
	var fallback *time.Ticker
	defer func() {
		if fallback != nil {
			fallback.Stop()
		}
	}()
	unwatched := 0
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()

	// sync makes the watch set match the latest scan; it reports whether it added any.
	sync := func() bool {
		if w == nil {
			return false
		}
		// The watches fsnotify holds now: a watch ends with its folder, so one removed,
		// or replaced by a new folder of the same name, is added again below.
		watched := map[string]bool{}
		for _, dir := range w.WatchList() {
			watched[dir] = true
		}
		want := map[string]bool{}
		added := false
		failed, firstDir := 0, ""
		var firstErr error
		for _, dir := range m.snap.Load().watch {
			want[dir] = true
			if watched[dir] {
				continue
			}
			if err := w.Add(dir); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed since the scan: the next one drops it
				}
				if failed++; failed == 1 {
					firstDir, firstErr = dir, err
				}
				continue
			}
			added = true
		}
		switch {
		case failed > 0 && unwatched == 0:
			why := "the file watcher refused them"
			if errors.Is(firstErr, syscall.ENOSPC) {
				why = "the inotify watch limit is reached (fs.inotify.max_user_watches, shared with every program of this user; raise it to watch every folder)"
			}
			m.log.Warn("skills: cannot watch every folder of the skills; polling for their changes instead",
				"folders", failed, "first", firstDir, "err", firstErr, "why", why, "interval", fallbackPollInterval)
		case failed == 0 && unwatched > 0:
			m.log.Info("skills: every folder of the skills is watched again; polling stopped")
		}
		unwatched = failed
		switch {
		case failed > 0 && fallback == nil && tick == nil:
			fallback = time.NewTicker(fallbackPollInterval)
			tick = fallback.C
		case failed == 0 && fallback != nil:
			fallback.Stop()
			fallback, tick = nil, nil
		}
		for dir := range watched {
			if !want[dir] {
				_ = w.Remove(dir) // fails when the folder is gone, which removed the watch
			}
		}
		return added
	}
	rescan := func() {
		m.Reload()
		if sync() {
			debounce.Reset(m.cfg.Debounce)
		}
	}
	// Changes between NewManager's scan and the first watches are caught here.
	sync()
	rescan()

	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			debounce.Reset(m.cfg.Debounce)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Typically an event queue overflow: changes may have been lost, rescan.
			m.log.Warn("skills: file watcher error", "err", err)
			debounce.Reset(m.cfg.Debounce)
		case <-debounce.C:
			rescan()
		case <-tick:
			rescan()
		}
	}
}
