package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/openapi"
	"github.com/toolserverd/toolserverd/internal/session"
)

// openAPIRetry bounds the wait between two attempts at loading a source whose
// document is a URL: it starts at openAPIRetryMin and doubles up to openAPIRetryMax.
const (
	openAPIRetryMin = time.Second
	openAPIRetryMax = 5 * time.Minute
)

// registerOpenAPI loads the configured OpenAPI documents and registers their
// operations as tools. A document read from a file is configuration: one that cannot
// be read or parsed stops start-up, naming it. One read from a URL is an API's, which
// may be down when the daemon starts: it is loaded in the background (openAPILoader),
// as MCP servers connect. Either way a source whose configuration is wrong (a field,
// an auth variable not set) stops start-up; an operation whose argument schema cannot
// be used is left out with a warning.
func (a *App) registerOpenAPI(ctx context.Context) error {
	var remote []openAPISource
	for i, c := range a.Config.OpenAPI {
		oc := a.openAPIConfig(c)
		if err := openapi.Check(oc); err != nil {
			return fmt.Errorf("config: openapi[%d]: %w", i, err)
		}
		if openapi.IsURL(c.Spec) {
			remote = append(remote, openAPISource{index: i, cfg: oc})
			continue
		}
		src, err := openapi.Load(ctx, oc)
		if err != nil {
			return fmt.Errorf("config: openapi[%d]: %w", i, err)
		}
		if err := a.registerOpenAPISource(i, c.Name, src); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	if len(remote) > 0 {
		a.openAPILoader = a.startOpenAPILoader(ctx, remote)
	}
	return nil
}

func (a *App) openAPIConfig(c config.OpenAPIConfig) openapi.Config {
	return openapi.Config{
		Name: c.Name, Prefix: c.Prefix, Spec: c.Spec, BaseURL: c.BaseURL,
		Auth: openapi.Auth{BearerTokenEnv: c.Auth.BearerTokenEnv, APIKeyEnv: c.Auth.APIKeyEnv, APIKeyHeader: c.Auth.APIKeyHeader, APIKeyQuery: c.Auth.APIKeyQuery,
			BasicUsernameEnv: c.Auth.BasicUsernameEnv, BasicPasswordEnv: c.Auth.BasicPasswordEnv,
			OAuth2: openapi.OAuth2{TokenURL: c.Auth.OAuth2.TokenURL, ClientIDEnv: c.Auth.OAuth2.ClientIDEnv,
				ClientSecretEnv: c.Auth.OAuth2.ClientSecretEnv, Scopes: c.Auth.OAuth2.Scopes}},
		Include: c.Include, Exclude: c.Exclude,
		Timeout: c.Timeout, FetchTimeout: c.FetchTimeout, MaxResponseBytes: c.MaxResponseBytes,
		MaxFileBytes: c.MaxFileBytes, Workspaces: a.Sandbox,
	}
}

// registerOpenAPISource registers a loaded source's tools and logs it.
func (a *App) registerOpenAPISource(i int, name string, src *openapi.Source) error {
	n, err := src.Register(a.Tools)
	if err != nil {
		return fmt.Errorf("openapi[%d] %q: %w (set another prefix, or exclude the operation)", i, name, err)
	}
	for _, w := range src.Warnings {
		a.Log.Warn("openapi source", "source", name, "problem", w)
	}
	a.Log.Info("openapi source loaded", "source", name, "spec", src.Spec, "tools", n)
	return nil
}

// openAPISource is a source whose document is a URL, loaded in the background.
type openAPISource struct {
	index int
	cfg   openapi.Config
}

// openAPILoader loads the URL sources in the background, each until it loads, fails
// for good or the daemon stops, and tells which are still loading (Pending).
type openAPILoader struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
	mu   sync.Mutex
	// loading: by name, each source not loaded yet; one that failed for good is left
	// out, and named in failed.
	loading map[string]*loadingSource
	failed  []string
}

// loadingSource is a source not loaded yet: the start of its tools' names
// ({prefix}__), and why ("openapi source x is loading …").
type loadingSource struct{ prefix, why string }

// openAPISummary is the state of the URL sources for /readyz: loading, the sources
// not loaded yet (retried); failed, those that will not load before a restart.
type openAPISummary struct {
	Loading []string `json:"loading"`
	Failed  []string `json:"failed"`
}

// Summary says which sources are loading and which failed for good.
func (l *openAPILoader) Summary() openAPISummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	sum := openAPISummary{Loading: []string{}, Failed: append([]string{}, l.failed...)}
	for name := range l.loading {
		sum.Loading = append(sum.Loading, name)
	}
	sort.Strings(sum.Loading)
	sort.Strings(sum.Failed)
	return sum
}

func (a *App) startOpenAPILoader(ctx context.Context, sources []openAPISource) *openAPILoader {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &openAPILoader{stop: cancel, loading: map[string]*loadingSource{}}
	for _, s := range sources {
		l.loading[s.cfg.Name] = &loadingSource{prefix: toolPrefix(s.cfg), why: "openapi source " + s.cfg.Name + " is loading"}
	}
	for _, s := range sources {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			a.loadOpenAPI(ctx, l, s)
		}()
	}
	return l
}

func toolPrefix(c openapi.Config) string {
	if c.Prefix != "" {
		return c.Prefix + "__"
	}
	return c.Name + "__"
}

// loadOpenAPI tries to load s until it loads, fails for good, or ctx ends. A document
// that cannot be read or parsed (an API down, an error status, an HTML maintenance
// page) is tried again, after 1s, 2s, 4s … up to 5 min, each wait ±10%; any other
// failure (too many operations, a tool name taken) is logged as an error and ends it.
func (a *App) loadOpenAPI(ctx context.Context, l *openAPILoader, s openAPISource) {
	name := s.cfg.Name
	wait := openAPIRetryMin
	for attempt := 1; ; attempt++ {
		src, err := openapi.Load(ctx, s.cfg)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			// Registered before it stops being pending: a session made meanwhile
			// finds the tools either way.
			err = a.registerOpenAPISource(s.index, name, src)
			if err == nil {
				l.done(name)
				return
			}
		}
		if !errors.Is(err, openapi.ErrUnreadable) {
			a.Log.Error("openapi source not loaded; fix it and restart", "source", name, "spec", openapi.ShownSpec(s.cfg.Spec), "err", err)
			l.gaveUp(name)
			return
		}
		jittered := time.Duration(float64(wait) * (0.9 + 0.2*rand.Float64()))
		a.Log.Warn("openapi source not loaded yet; retrying", "source", name, "spec", openapi.ShownSpec(s.cfg.Spec),
			"attempt", attempt, "retry_in", jittered.Round(time.Millisecond).String(), "err", err)
		l.retrying(name, err)
		t := time.NewTimer(jittered)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, openAPIRetryMax)
	}
}

func (l *openAPILoader) done(name string) {
	l.mu.Lock()
	delete(l.loading, name)
	l.mu.Unlock()
}

func (l *openAPILoader) gaveUp(name string) {
	l.mu.Lock()
	delete(l.loading, name)
	l.failed = append(l.failed, name)
	l.mu.Unlock()
}

func (l *openAPILoader) retrying(name string, err error) {
	l.mu.Lock()
	l.loading[name].why = "openapi source " + name + " has not loaded yet and is retried (" + err.Error() + ")"
	l.mu.Unlock()
}

// Pending is session.PendingSources for the sources still loading: those whose
// prefix an exact name starts with, or a pattern may match.
func (l *openAPILoader) Pending(entry string, pattern bool) []string {
	lead := entry
	if pattern {
		lead = entry[:strings.IndexAny(entry, `*?[\`)]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.loading {
		if strings.HasPrefix(lead, s.prefix) || (pattern && strings.HasPrefix(s.prefix, lead)) {
			out = append(out, s.why)
		}
	}
	sort.Strings(out)
	return out
}

// Stop ends the loading and waits for it.
func (l *openAPILoader) Stop() {
	l.stop()
	l.wg.Wait()
}

// pendingSources composes the tool sources that may be pending (MCP servers
// connecting, OpenAPI documents loading); nil ones are skipped.
func pendingSources(fs ...session.PendingSources) session.PendingSources {
	return func(entry string, pattern bool) []string {
		var out []string
		for _, f := range fs {
			if f != nil {
				out = append(out, f(entry, pattern)...)
			}
		}
		return out
	}
}
