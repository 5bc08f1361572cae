package session

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/skills"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// TestSharedSessionState: two managers on one store (two replicas) with one
// notifier. What one changes — narrowed tools, active skill, rules — the other, which
// holds the session live already, applies before the session's next use; an empty
// notification (some may have been missed) makes it read every live session again.
func TestSharedSessionState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := store.NewInProcessNotifier(0)
	a, b, sa, sb := twoReplicas(t, func(m *Manager, name string) { m.UseNotifier(n, name) })
	// eventually: notifications are delivered asynchronously.
	eventually := func(what string, cond func(*Session) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			s, err := b.Get(ctx, "t1", sa.ID)
			if err != nil {
				t.Fatal(err)
			}
			if s != sb {
				t.Fatal("b loaded a second copy of a session it holds")
			}
			if cond(s) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("b never saw %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	sa.Narrow([]string{"echo"})
	sa.activeSkill().Set(skills.Skill{Name: "review", AllowedTools: []string{"echo"}})
	if err := a.SaveState(ctx, sa); err != nil {
		t.Fatal(err)
	}
	eventually("the narrowed list and the skill", func(s *Session) bool {
		name, allowed := s.activeSkill().Current()
		return !s.Selected("other") && s.Selected("echo") && name == "review" && slices.Equal(allowed, []string{"echo"})
	})
	if err := a.AllowRules(ctx, "t1", sa.ID, []string{"echo"}); err != nil {
		t.Fatal(err)
	}
	eventually("the rule", func(s *Session) bool {
		rs := s.CurrentSpec().Rules
		return rs != nil && slices.Equal(rs.Allow, []string{"echo"}) && len(s.Rules()) == 1
	})
	// Adding the rule kept the narrowed list and the skill.
	if name, _ := sb.activeSkill().Current(); name != "review" || sb.Selected("other") {
		t.Fatalf("after the rule, b has skill %q and other selected %v", name, sb.Selected("other"))
	}
	// Lifted on a, through the store alone, then an empty notification.
	sa.Narrow(nil)
	sa.activeSkill().Set(skills.Skill{})
	if _, err := a.saveResume(ctx, sa, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !sb.Selected("echo") || sb.Selected("other") {
		t.Fatal("b changed without a notification")
	}
	if err := n.Notify(ctx, TopicSession, ""); err != nil {
		t.Fatal(err)
	}
	eventually("the change after an empty notification", func(s *Session) bool {
		name, _ := s.activeSkill().Current()
		return s.Selected("other") && name == ""
	})
	// A's own changes do not make a read its own copy again.
	if err := a.AllowRules(ctx, "t1", sa.ID, []string{"other"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if sa.stale.Load() {
		t.Fatal("a marked its own change stale")
	}
}

// TestRulesFromTwoReplicasKept: a replica that has not heard of another's new rule
// (a lost notification) adds its own to the stored rules, not to its copy: both stay.
func TestRulesFromTwoReplicasKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, newManager := sharedStore(t)
	a, b := newManager(), newManager() // b hears nothing
	sa, _, err := a.Create(ctx, "t1", Spec{AvailableTools: []string{"echo", "other"}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Get(ctx, "t1", sa.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AllowRules(ctx, "t1", sa.ID, []string{"echo"}); err != nil {
		t.Fatal(err)
	}
	if err := b.AllowRules(ctx, "t1", sa.ID, []string{"other"}); err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetSession(ctx, sa.ID)
	if err != nil {
		t.Fatal(err)
	}
	var stored storedSpec
	if err := json.Unmarshal(rec.Spec, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.Rules == nil || !slices.Equal(stored.Spec.Rules.Allow, []string{"echo", "other"}) {
		t.Fatalf("stored rules %+v, want echo and other", stored.Spec.Rules)
	}
	if got := sb.CurrentSpec().Rules; got == nil || !slices.Equal(got.Allow, []string{"echo", "other"}) || len(sb.Rules()) != 2 {
		t.Fatalf("b's rules %+v, want both", got)
	}
}

// sharedStore is one SQLite store, as replicas share one database, and a function
// making managers over it (tools echo and other).
func sharedStore(t *testing.T) (*store.SQLite, func() *Manager) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.OpenSQLite(context.Background(), filepath.Join(dir, "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	tm := toolmgr.New()
	tm.MustRegister(named{"echo", "builtin"}, named{"other", "builtin"})
	return st, func() *Manager {
		m, err := NewManager(Config{WorkspaceDir: filepath.Join(dir, "ws")}, st, tm)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// TestReadThrough: with ReadThrough and no notification at all, a change one replica
// made is in force on the other at the very next use (the request after the answer
// may reach it at once). A narrowed list changed on a replica and not yet saved is
// not undone there by the older stored one.
func TestReadThrough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, sa, sb := twoReplicas(t, func(m *Manager, _ string) { m.ReadThrough() })
	if !sb.Selected("other") {
		t.Fatal("b starts narrowed")
	}

	sa.Narrow([]string{"echo"})
	sa.activeSkill().Set(skills.Skill{Name: "review", AllowedTools: []string{"echo"}})
	if err := a.SaveState(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if err := a.AllowRules(ctx, "t1", sa.ID, []string{"echo"}); err != nil {
		t.Fatal(err)
	}
	s, err := b.Get(ctx, "t1", sa.ID)
	if err != nil || s != sb {
		t.Fatalf("b.Get: %v (same session %v)", err, s == sb)
	}
	name, _ := s.activeSkill().Current()
	if s.Selected("other") || !s.Selected("echo") || name != "review" || len(s.Rules()) != 1 {
		t.Fatalf("b after a's change: other selected %v, skill %q, rules %v", s.Selected("other"), name, s.Rules())
	}

	// On a, a narrowing not saved yet survives a use that reads the store.
	sa.Narrow([]string{"other"})
	if s, err := a.Get(ctx, "t1", sa.ID); err != nil || !s.Selected("other") || s.Selected("echo") {
		t.Fatalf("a's unsaved narrowing was undone by the stored one (%v)", err)
	}
	if err := a.SaveState(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.Get(ctx, "t1", sa.ID); !s.Selected("other") || s.Selected("echo") {
		t.Fatal("b missed a's second narrowing")
	}
	// And b's own change, saved, goes back to a.
	sb.Narrow(nil)
	if err := b.SaveState(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if s, _ := a.Get(ctx, "t1", sa.ID); !s.Selected("echo") || !s.Selected("other") {
		t.Fatal("a missed b's widening")
	}
}

// twoReplicas starts managers a and b on one store, each set up by setup before
// Start, and returns a session a created and b loaded.
func twoReplicas(t *testing.T, setup func(m *Manager, name string)) (a, b *Manager, sa, sb *Session) {
	t.Helper()
	ctx := context.Background()
	_, newManager := sharedStore(t)
	replica := func(name string) *Manager {
		m := newManager()
		setup(m, name)
		if err := m.Start(ctx, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		return m
	}
	a, b = replica("a"), replica("b")
	sa, _, err := a.Create(ctx, "t1", Spec{AvailableTools: []string{"echo", "other"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb, err = b.Get(ctx, "t1", sa.ID); err != nil {
		t.Fatal(err)
	}
	return a, b, sa, sb
}
