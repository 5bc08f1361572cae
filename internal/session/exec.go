package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolserverd/toolserverd/internal/approval"
	"github.com/toolserverd/toolserverd/internal/jsontext"
	"github.com/toolserverd/toolserverd/internal/store"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// Strategy is how a batch's calls are scheduled.
type Strategy string

const (
	Parallel   Strategy = "parallel"
	Sequential Strategy = "sequential"
	Batched    Strategy = "batched"
)

// ParseStrategy accepts "" (parallel), parallel, sequential and batched.
func ParseStrategy(s string) (Strategy, error) {
	switch Strategy(s) {
	case "", Parallel:
		return Parallel, nil
	case Sequential, Batched:
		return Strategy(s), nil
	}
	return "", fmt.Errorf("unknown strategy %q (use parallel, sequential or batched)", s)
}

// CallRequest is one call as the model produced it.
type CallRequest struct {
	ToolCallID string
	Name       string
	Arguments  json.RawMessage
	// ArgError, when set, says why the arguments could not be read (a provider's
	// malformed JSON string); the call is answered invalid_args without running.
	ArgError string
	// NoID says the model gave the call no id, as Gemini may: Plan gives it the
	// daemon's id (tc_…) as its ToolCallID, which no other call of the session has.
	NoID bool
}

// Batch is a request to run calls for a session.
type Batch struct {
	Calls     []CallRequest
	Strategy  Strategy
	BatchSize int
	// Timeout overrides every call's default timeout (still capped by the server max).
	Timeout time.Duration
	// Positions, when the request held entries that are no call (left out), gives
	// each call's index in the request's calls, which errors name; nil: Calls' own.
	Positions []int
	// nested is set for the one-call batches a running tool makes (tool_chain).
	nested *nestedOpts
}

// Position is the index in the request's calls of b.Calls[i].
func (b Batch) Position(i int) int {
	if i < len(b.Positions) {
		return b.Positions[i]
	}
	return i
}

// Call is a planned call with the daemon's id.
type Call struct {
	ID string
	CallRequest
	entry   *toolmgr.Entry
	manager *toolmgr.Manager
	preset  *tool.Result // answered without running (not found, bad arguments)
	// prepared: Arguments went through the entry's Prepare when the call was planned.
	prepared bool
	// timeout is the request's override of the tool's default, if any.
	timeout time.Duration
	// planned is the policy's answer at plan time: a call that will ask needs its
	// intent record committed before an approval refers to it.
	planned approval.Outcome
	// approved: the call went through an approval (waited for a decision, or was
	// claimed after one by RunApproved); its finish is announced on TopicCall, for
	// the streams and followers of the call on other replicas.
	approved bool
	// settled: the record already holds the outcome (denied, expired, run by another
	// replica) or must stay as it is (left waiting for a decision); finish leaves it.
	settled bool
	// countedElsewhere: the call is not counted as finished here. Either it is left
	// waiting for a decision or an answer, its outcome to come later, or whatever
	// finished its record counts it: RunApproved a run, the approval store a denial
	// or an expiry (on whichever replica decided, whether or not a stream still
	// waited), so that each is counted once.
	countedElsewhere bool
	// goesOn: the call was left waiting for a decision or an answer (its client left,
	// or the daemon stops); its message says so, and Event.GoesOn tells clients.
	goesOn bool
	// nested is set for a call made by another running call (tool_chain).
	nested *nestedOpts
	// span is the call's trace span while it runs; nil without tracing.
	span trace.Span
	// record is the record this process inserted for the call (nil when it did not).
	record *store.Call
	// progress is the call's progress once it ran (nil before): its output may go on
	// after the call's result (see outputOpen).
	progress tool.Progress
	// after are closed once the calls listed before c that it must follow are over:
	// c runs only then (see order).
	after []chan struct{}
}

// Spec is the spec of the tool the call resolved to; false for a call answered
// without one (an unknown name, say).
func (c *Call) Spec() (tool.Spec, bool) {
	if c.entry == nil {
		return tool.Spec{}, false
	}
	return c.entry.Spec, true
}

// ordered reports whether c takes part in its batch's order (see Execute): a tool run
// in the foreground by this daemon. unsafe says it is not concurrency-safe (it takes
// the session's serial lock).
func (c *Call) ordered() (ordered, unsafe bool) {
	if c.preset != nil || c.entry == nil {
		return false, false
	}
	s := c.entry.Spec
	if s.External || s.Mode == tool.ModeBackground {
		return false, false
	}
	return true, !s.ConcurrencySafe
}

// startsAtOnce reports whether c's tool is invoked as soon as its turn comes: it needs
// neither the session's serial lock nor a decision nor an outside answer. Such a call
// is recorded running at insert, which saves a write; the others are recorded pending,
// and running only once they start.
func (c *Call) startsAtOnce() bool {
	if c.preset != nil || c.planned == approval.Ask {
		return false
	}
	s := c.entry.Spec
	return !s.External && (s.ConcurrencySafe || s.Mode == tool.ModeBackground)
}

// Plan is a validated batch ready to execute.
type Plan struct {
	Session *Session
	Batch   Batch
	Calls   []*Call
}

// EventType names what happened to a call.
type EventType string

const (
	EventStart   EventType = "tool_start"
	EventMessage EventType = "message"
	// EventYield is an intermediate result of a stateful call, waiting for input.
	EventYield EventType = "tool_yield"
	// EventResult is the final result of a background call, published to the session.
	EventResult EventType = "tool_result"
	// EventQueued: a call of a tool that is not concurrency-safe waits for the
	// session's previous such call (Behind, when this process runs it) to finish
	// before it runs. The REST streams do not write it (their tool_start and the
	// result's timing say as much); the MCP endpoint tells its client.
	EventQueued EventType = "queued"
)

// Event is what the executor reports as calls progress. Result is the message result:
// already truncated to the token budget.
type Event struct {
	Type   EventType
	Call   *Call
	Result *tool.Result
	// Behind is set on EventQueued: the call the queued one waits behind, if known.
	Behind *Call
	// Approval and Suggestions are set on EventApproval.
	Approval    *store.Approval
	Suggestions []string
	TS          time.Time
	// Resumed says the call was not run for this request: it is an earlier call's
	// record, followed (a resumed batch, a client that lost its stream).
	Resumed bool
	// GoesOn, on a message, says the call is not over although this stream ends: it
	// waits for a decision or an answer that the store keeps (its client left, or the
	// daemon stops), or another replica runs it. Its result will be on record; a batch
	// sent again with resume, or GET /v1/tool-calls/{id}/events, follows it.
	GoesOn bool
	// full is a message's result before truncation, for nested calls.
	full *tool.Result
}

// Full is a message's result before it was cut to the token budget: Result, for
// other events and for messages not cut.
func (e Event) Full() *tool.Result {
	if e.full != nil {
		return e.full
	}
	return e.Result
}

// Recorder persists call records durably.
type Recorder interface {
	// Insert returns when the record is durable.
	Insert(ctx context.Context, c *store.Call) error
	// Enqueue queues a record; a later Finish that succeeds implies it is durable.
	Enqueue(c *store.Call) error
	MarkRunning(ctx context.Context, id, owner string, at time.Time) error
	// Finish answers store.ErrAlreadyFinal, writing nothing, when the record was
	// already final (a lease sweep or a restart failed the call meanwhile).
	Finish(ctx context.Context, f store.CallFinish) error
	// GetCall reads a record (one not written yet included).
	GetCall(ctx context.Context, id string) (*store.Call, error)
}

// Observer is told about calls, for metrics.
type Observer interface {
	CallStarted(tool string)
	// CallFinished is called for every call; started says whether CallStarted was.
	CallFinished(tool string, kind tool.ErrorKind, elapsed time.Duration, started bool)
}

// ProgressSource gives each running call its progress emitter.
type ProgressSource interface {
	Begin(callID, toolCallID, sessionID string) tool.Progress
}

// ExecConfig bounds execution.
type ExecConfig struct {
	DefaultTimeout time.Duration // a call's deadline when its tool names none
	MaxTimeout     time.Duration // no call runs longer
	Owner          string        // this replica's name, written on records
	// MaxBatchCalls caps the calls of one batch; 0 means DefaultMaxBatchCalls.
	MaxBatchCalls int
}

// DefaultMaxBatchCalls is the cap on a batch's calls when none is configured. Models
// make a few parallel calls per turn, tens at most; a batch of thousands is a client
// bug or an attack, and each call costs a goroutine and a record.
const DefaultMaxBatchCalls = 256

// Executor runs planned batches: resolution, validation, scheduling, serialization of
// unsafe tools, timeouts, cancellation, records, truncation.
type Executor struct {
	cfg      ExecConfig
	rec      Recorder
	obs      Observer
	progress ProgressSource
	trunc    *toolmgr.Truncator
	perm     *Permissions  // nil: every call is allowed
	locks    SessionLocker // nil: unsafe calls are serialized in this process only
	log      *slog.Logger
	// storeErrs bounds the lines of calls whose records the store refused.
	storeErrs storeErrLog
	tracer    trace.Tracer // nil: no spans
	// outputs counts the open-output marks waiting for their call's output to end
	// (closeOutputWhenEnded), so that a stopping daemon can let their clears land.
	outputs sync.WaitGroup

	mu sync.Mutex
	// unfinished holds the calls of this process from before their record is written
	// until their result is: Cancel reaches a call waiting for its turn, for the
	// session's lock or for a decision, not only one whose tool runs.
	unfinished map[string]*callCancel
	inputs     map[string]chan json.RawMessage // stateful calls waiting for the agent
	releasing  bool                            // ReleaseWaiting was called: the daemon stops
	released   chan struct{}                   // closed by ReleaseWaiting (see Released)
	wg         sync.WaitGroup

	// Results the store refused, written again in the background (finishLater).
	retrying  atomic.Int64
	closed    chan struct{} // Close: no more retries
	closeOnce sync.Once
}

// NewExecutor returns an Executor. obs and progress may be nil.
func NewExecutor(cfg ExecConfig, rec Recorder, trunc *toolmgr.Truncator, obs Observer, progress ProgressSource, log *slog.Logger) *Executor {
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = 2 * time.Minute
	}
	if cfg.MaxTimeout <= 0 || cfg.MaxTimeout < cfg.DefaultTimeout {
		cfg.MaxTimeout = max(cfg.DefaultTimeout, 30*time.Minute)
	}
	if cfg.MaxBatchCalls <= 0 {
		cfg.MaxBatchCalls = DefaultMaxBatchCalls
	}
	return &Executor{cfg: cfg, rec: rec, obs: obs, progress: progress, trunc: trunc, log: log, unfinished: map[string]*callCancel{}, inputs: map[string]chan json.RawMessage{},
		released: make(chan struct{}), closed: make(chan struct{})}
}

// PlanError is a problem with a batch as a whole (an HTTP 400, not a tool result).
type PlanError struct{ Msg string }

func (e *PlanError) Error() string { return e.Msg }

// Check is what Plan finds wrong with a batch as a whole, whatever the session: no
// calls, too many, a call without an id (unless NoID), two with the same id. A
// *PlanError.
func (x *Executor) Check(b Batch) error {
	if len(b.Calls) == 0 {
		return &PlanError{"calls must hold at least one call"}
	}
	if len(b.Calls) > x.cfg.MaxBatchCalls {
		return &PlanError{fmt.Sprintf("calls holds %d calls; a batch may hold at most %d (calls.max_batch_calls): send them in several batches",
			len(b.Calls), x.cfg.MaxBatchCalls)}
	}
	seen := make(map[string]int, len(b.Calls))
	for i, c := range b.Calls {
		if c.ToolCallID == "" && !c.NoID {
			return &PlanError{fmt.Sprintf("calls[%d]: id is required", b.Position(i))}
		}
		// No store can keep a NUL in these (PostgreSQL refuses it in text).
		if strings.IndexByte(c.ToolCallID, 0) >= 0 || strings.IndexByte(c.Name, 0) >= 0 {
			return &PlanError{fmt.Sprintf("calls[%d]: id and name must not contain a NUL character", b.Position(i))}
		}
		if c.ToolCallID == "" { // NoID: each gets an id of its own
			continue
		}
		if j, dup := seen[c.ToolCallID]; dup {
			return &PlanError{fmt.Sprintf("calls[%d]: id %q is also used by calls[%d]; tool call ids must be unique in a batch", b.Position(i), c.ToolCallID, b.Position(j))}
		}
		seen[c.ToolCallID] = i
	}
	return nil
}

// Plan checks a batch and gives every call the daemon's id. Calls of unknown or
// forbidden tools, and calls with unreadable arguments, are planned with their answer.
func (x *Executor) Plan(sess *Session, b Batch) (*Plan, error) {
	if err := x.Check(b); err != nil {
		return nil, err
	}
	if b.Strategy == Batched && b.BatchSize <= 0 {
		b.BatchSize = 1
	}
	p := &Plan{Session: sess, Batch: b}
	expanding := expandedBy(b.Calls)
	switching := switchedOnBy(b.Calls, sess.manager.cfg.Groups)
	for _, c := range b.Calls {
		call := &Call{ID: NewTimeID("tc_"), CallRequest: c, timeout: b.Timeout, nested: b.nested}
		if call.ToolCallID == "" { // NoID: Check let it through
			call.ToolCallID = call.ID
		}
		switch m, e, ok := sess.Tools.Resolve(c.Name); {
		case c.Name == "":
			call.preset = tool.ErrorResult(tool.KindInvalidArgs, "the call has no tool name")
		case !ok:
			if why := sess.pendingTool(c.Name); why != "" {
				call.preset = tool.ErrorResult(tool.KindUnavailable, "tool %q is not available yet: %s; try again later", c.Name, why)
				break
			}
			if hint := sess.switchOnHint(c.Name, switching); hint != "" {
				sess.selectHidden(c.Name)
				call.preset = tool.ErrorResult(tool.KindNotFound, "%s", hint)
				break
			}
			call.preset = tool.ErrorResult(tool.KindNotFound, "%s", sess.unknownToolText(c.Name))
		case c.ArgError != "":
			call.entry, call.manager = e, m
			call.preset = tool.ErrorResult(tool.KindInvalidArgs, "arguments for %s could not be read: %s; send the arguments as one JSON object", c.Name, c.ArgError)
		case jsontext.Deeper(c.Arguments, tool.MaxStructuredDepth):
			call.entry, call.manager = e, m
			call.preset = tool.ErrorResult(tool.KindInvalidArgs, "arguments for %s nest arrays and objects more than %d levels deep, deeper than any tool takes and than the daemon keeps and sends to its clients",
				c.Name, tool.MaxStructuredDepth)
		case !sess.skillAllows(c.Name):
			call.entry, call.manager = e, m
			_, sk, allowed := sess.activeSkill().Allows(c.Name)
			call.preset = tool.ErrorResult(tool.KindDenied, "%s is not among the tools the active skill %s allows (%s); use those, or open another skill",
				c.Name, sk, strings.Join(allowed, ", "))
		case !sess.Selected(c.Name) && !expanding[c.Name]:
			call.entry, call.manager = e, m
			call.preset = tool.ErrorResult(tool.KindNotFound, "%s is available but was not offered this turn; call %s with {\"tool_names\": [%q]} first, then call it again",
				c.Name, ExpandToolName, c.Name)
		case b.nested != nil && NestedCallable(e.Spec) != nil:
			call.entry, call.manager = e, m
			call.preset = tool.ErrorResult(tool.KindDenied, "%s", NestedCallable(e.Spec).Error())
		default:
			call.entry, call.manager = e, m
			// Arguments are checked before the permission check: nobody is asked to
			// approve (or, for an external tool, to answer) a call that cannot run, or
			// shown identity fields the model made up.
			args, bad := e.Prepare(c.Arguments)
			if bad != nil {
				if c.Name == ResetToolName {
					bad = sess.unknownGroups(c.Arguments, bad)
				}
				call.preset = bad
				break
			}
			call.Arguments, call.prepared = args, true
			if x.perm != nil {
				d := x.decide(sess, call)
				call.planned = d.Outcome
				if d.Outcome == approval.Deny {
					call.preset = tool.ErrorResult(tool.KindDenied, "%s was not run: %s", c.Name, d.Reason)
				}
			}
		}
		p.Calls = append(p.Calls, call)
	}
	return p, nil
}

func summarize(names []string) string {
	const show = 30
	if len(names) == 0 {
		return "(none)"
	}
	if len(names) <= show {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:show], len(names)-show)
}

// Execute runs a plan, reporting events to emit (called from several goroutines). It
// returns when every call has its message. Cancelling ctx (the client went away)
// cancels calls that have not finished; their records still get written.
func (x *Executor) Execute(ctx context.Context, p *Plan, emit func(Event)) {
	x.wg.Add(1)
	defer x.wg.Done()
	// The session stays in memory while its calls run or wait (approval, input).
	defer p.Session.hold()()
	seq := p.Session.currentSeq()
	now := time.Now().UTC()

	turns := order(p.Calls)
	// Calls that start at once are recorded as running; the rest as pending first, and
	// as running only when they start, so that a record never says running, nor a
	// crash "may have run partly", for a call that waited and never ran.
	startsNow := func(i int) bool {
		switch p.Batch.Strategy {
		case Sequential:
			if i != 0 {
				return false
			}
		case Batched:
			if i >= p.Batch.BatchSize {
				return false
			}
		}
		return p.Calls[i].startsAtOnce() && len(p.Calls[i].after) == 0
	}
	// A call can be cancelled from before its record is written: once a client can
	// read the record, Cancel finds the call.
	// Per call, in one allocation: its context, the end of its tracking, and why its
	// record could not be written.
	calls := make([]struct {
		ctx        context.Context
		untrack    func()
		unrecorded error
	}, len(p.Calls))
	for i, c := range p.Calls {
		calls[i].ctx, calls[i].untrack = x.track(ctx, c.ID)
	}
	if len(p.Calls) == 1 {
		calls[0].unrecorded = x.insert(calls[0].ctx, p.Session, p.Calls[0], startsNow(0), now)
	} else {
		var wg sync.WaitGroup
		for i, c := range p.Calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				calls[i].unrecorded = x.insert(calls[i].ctx, p.Session, c, startsNow(i), now)
			}()
		}
		wg.Wait()
	}

	run := func(i int) {
		defer calls[i].untrack()
		if turns[i] != nil {
			defer close(turns[i])
		}
		x.runOne(calls[i].ctx, p.Session, p.Calls[i], seq, calls[i].unrecorded, startsNow(i), emit)
	}
	switch p.Batch.Strategy {
	case Sequential:
		for i := range p.Calls {
			run(i)
		}
	case Batched:
		for lo := 0; lo < len(p.Calls); lo += p.Batch.BatchSize {
			hi := min(lo+p.Batch.BatchSize, len(p.Calls))
			parallel(lo, hi, run)
		}
	default:
		parallel(0, len(p.Calls), run)
	}
}

// order makes a batch run in the order it lists, as far as it matters: a call that is
// not concurrency-safe runs after every call listed before it is over, and a safe
// call after the unsafe calls listed before it; safe calls listed together still
// overlap. A model that writes a script, runs it and reads what it wrote, in one turn,
// means that order. It sets each call's after, and returns for each call the channel
// its runner closes when the call is over (nil for calls that take no part).
// Permission is asked before the wait, so the approvals a batch needs are asked for
// together.
func order(calls []*Call) []chan struct{} {
	turns := make([]chan struct{}, len(calls))
	if len(calls) < 2 {
		return turns
	}
	var lastUnsafe chan struct{}
	var safeSince []chan struct{} // safe calls listed after lastUnsafe
	for i, c := range calls {
		ordered, unsafe := c.ordered()
		if !ordered {
			continue
		}
		turns[i] = make(chan struct{})
		if lastUnsafe != nil {
			c.after = append(c.after, lastUnsafe)
		}
		if unsafe {
			c.after = append(c.after, safeSince...)
			lastUnsafe, safeSince = turns[i], nil
		} else {
			safeSince = append(safeSince, turns[i])
		}
	}
	return turns
}

func parallel(lo, hi int, fn func(int)) {
	if hi-lo == 1 {
		fn(lo)
		return
	}
	var wg sync.WaitGroup
	for i := lo; i < hi; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); fn(i) }()
	}
	wg.Wait()
}

// Truncate cuts a result to the token budget, as messages are.
func (x *Executor) Truncate(res *tool.Result) *tool.Result {
	if x.trunc == nil || res == nil {
		return res
	}
	return x.trunc.Apply(res)
}

// TruncateKeepingStructured cuts a result to the token budget keeping its structured
// output whole, for a tool that declares an output schema (see
// toolmgr.Truncator.KeepStructured).
func (x *Executor) TruncateKeepingStructured(res *tool.Result) *tool.Result {
	if x.trunc == nil || res == nil {
		return res
	}
	return x.trunc.KeepStructured(res)
}

// Wait blocks until every Execute in progress has returned, or ctx ends.
func (x *Executor) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { x.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// UnnamedCall is the name a call that named no tool is recorded under: a record needs
// a name, and this one cannot be a tool's (tool names are letters, digits, _ and -).
// The call is answered invalid_args without running.
const UnnamedCall = "(no name)"

func (x *Executor) insert(ctx context.Context, sess *Session, c *Call, running bool, now time.Time) error {
	name := c.Name
	if name == "" {
		name = UnnamedCall
	}
	rec := &store.Call{
		ID: c.ID, SessionID: sess.ID, Tenant: sess.Tenant, ToolCallID: c.ToolCallID, Name: name,
		Arguments: validJSONOrString(c.Arguments), Status: store.CallPending, Owner: x.cfg.Owner, CreatedAt: now,
	}
	if running && c.preset == nil {
		rec.Status = store.CallRunning
		rec.StartedAt = &now
	}
	// A call that changes something must be on record before it runs, so that a crash
	// cannot hide a side effect. A read-only call, or one answered without running,
	// has none: its record is queued, and the finish (committed in queue order)
	// makes both durable before the result is sent.
	var err error
	if c.preset != nil || (c.entry.Spec.ReadOnly && c.planned != approval.Ask && !c.entry.Spec.External) {
		err = x.rec.Enqueue(rec)
	} else {
		wctx, cancel := x.recordCtx(ctx)
		// Calls that ask or wait for an answer are always inserted this way, so the
		// approval or the wait can refer to a committed record.
		err = x.rec.Insert(wctx, rec)
		cancel()
	}
	if err != nil {
		x.storeErrs.log(ctx, x.log, "recording call failed; it will not run", "call_id", c.ID, "session_id", sess.ID, "err", err)
		return err
	}
	c.record = rec
	return nil
}

// recordCtx gives record writes their own deadline: a client that disconnects must not
// stop its calls' records from being written.
func (x *Executor) recordCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

func (x *Executor) runOne(ctx context.Context, sess *Session, c *Call, seq uint64, unrecorded error, startedAtInsert bool, emit func(Event)) {
	recorded := unrecorded == nil
	start := time.Now()
	ctx = x.beginCall(ctx, sess.ID, sess.Tenant, c)
	emit(Event{Type: EventStart, Call: c, TS: start})
	if recorded && c.preset == nil && c.entry.Spec.Mode == tool.ModeBackground && !cancelledByRequest(ctx) {
		x.runBackground(ctx, sess, c, seq, startedAtInsert, start, emit)
		return
	}
	res, started := c.preset, false
	switch {
	case !recorded:
		res = notRecorded(unrecorded)
	case res != nil:
	default:
		res, started = x.execute(ctx, sess, c, seq, startedAtInsert, emit)
	}
	msg, full := x.finish(ctx, sess, c, res, start, started, recorded)
	emit(Event{Type: EventMessage, Call: c, Result: msg, full: full, TS: time.Now(), GoesOn: c.goesOn})
}

// finish records a call's result, reports it to the observer and returns the message
// (the result cut to the token budget) and the result it was cut from: res, or, when
// the record was already final, what the record says (finalRecord).
func (x *Executor) finish(ctx context.Context, sess *Session, c *Call, res *tool.Result, start time.Time, started, recorded bool) (msg, full *tool.Result) {
	if started && !res.IsError && sess != nil && changesSession[c.Name] {
		// Before the result is sent: the model's next call may reach another replica.
		if err := sess.manager.SaveState(ctx, sess); err != nil {
			x.log.WarnContext(ctx, "saving the session's state failed", "session_id", sess.ID, "call_id", c.ID, "err", err)
		}
	}
	full = res
	if recorded && !c.settled {
		status := store.CallSucceeded
		if res.IsError {
			status = store.CallFailed
		}
		wctx, cancel := x.recordCtx(ctx)
		closer, open := x.outputOpen(c)
		f := store.CallFinish{ID: c.ID, Status: status, Result: res, FinishedAt: time.Now().UTC(), OutputOpen: open}
		err := x.rec.Finish(wctx, f)
		if errors.Is(err, store.ErrAlreadyFinal) {
			// Nothing was written (no open-output mark either): the record stays as
			// it is, and the client is told what it says.
			full = x.finalRecord(wctx, sess, c, res, err)
		}
		cancel()
		switch {
		case errors.Is(err, store.ErrAlreadyFinal):
		case err != nil:
			x.storeErrs.log(ctx, x.log, "recording call result failed; retrying in the background", "call_id", c.ID, "err", err)
			// Unmarked: the output may end before the retry lands, leaving the mark set.
			f.OutputOpen = false
			x.finishLater(c.record, f, err)
		case open:
			x.closeOutputWhenEnded(c, closer)
		}
		x.notifyFinished(ctx, c)
	}
	msg = full
	if x.trunc != nil {
		msg = x.trunc.Apply(full)
	}
	if x.obs != nil && !c.countedElsewhere {
		name := c.Name
		if c.entry == nil {
			name = "unknown"
		}
		x.obs.CallFinished(name, res.ErrorKind, time.Since(start), started)
	}
	x.endCall(ctx, c, c.Name, res, time.Since(start))
	return msg, full
}

// changesSession names the tools whose calls change what a session holds in memory
// only (its narrowed tool list, its active skill); see Manager.SaveState.
var changesSession = map[string]bool{ExpandToolName: true, "skill": true}

// execute runs one resolved call; started reports whether the tool was invoked. emit
// receives a stateful call's intermediate results; nil for background calls.
func (x *Executor) execute(ctx context.Context, sess *Session, c *Call, seq uint64, startedAtInsert bool, emit func(Event)) (res *tool.Result, started bool) {
	skip := func() *tool.Result {
		if ctx.Err() != nil {
			return notStarted(ctx, c)
		}
		if ok, why := sess.interruptedSince(seq); ok {
			if why == "" {
				why = "no reason given"
			}
			return tool.ErrorResult(tool.KindSkipped, "%s was not run: the batch was interrupted before it started (%s)", c.Name, why)
		}
		return nil
	}
	if r := skip(); r != nil {
		return r, false
	}
	// Permission comes first: a call waiting for a person must not hold the session's
	// serial lock.
	run, claimed, res, err := x.permit(ctx, sess, c, emit)
	switch {
	case errors.Is(err, errLeftWaiting):
		c.settled, c.countedElsewhere, c.goesOn = true, true, true
		return tool.ErrorResult(tool.KindCancelled, "%s while %s waited for approval; the request stays pending and the call runs if it is approved", whoLeft(ctx), c.Name), false
	case errors.Is(err, errFinishedElsewhere):
		c.settled, c.countedElsewhere = true, true
		return res, false
	case !run:
		return res, false
	}
	if claimed {
		// Approved and claimed here: it runs to the end whether or not this stream's
		// client stays, as it would if nobody had waited (RunApproved) — a person
		// approved it and no one else will run it. Cancel still reaches it.
		dctx, untrack := x.track(context.WithoutCancel(ctx), c.ID)
		defer untrack()
		if cancelledByRequest(ctx) {
			x.Cancel(c.ID)
		}
		ctx = dctx
	}
	if c.entry.Spec.External {
		res, err := x.external(ctx, c, emit)
		switch {
		case errors.Is(err, errLeftWaiting) && cancelledByRequest(ctx):
			return x.cancelExternal(ctx, c), false
		case errors.Is(err, errLeftWaiting):
			c.settled, c.countedElsewhere, c.goesOn = true, true, true
			res = tool.ErrorResult(tool.KindCancelled, "%s while %s waited for its answer; the answer can still be posted", whoLeft(ctx), c.Name)
		case err != nil: // answered: the record holds the outcome, and what answered counts it
			c.settled, c.countedElsewhere = true, true
		}
		return res, false
	}
	// A background call runs detached for as long as it takes: it must not hold the
	// session's serial lock.
	if c.entry.Spec.Mode != tool.ModeBackground {
		for _, prev := range c.after {
			select {
			case <-prev:
			case <-ctx.Done(): // serialize and the checks after it say so
			}
		}
		unlock, r := x.serialize(ctx, sess, c, emit)
		if r != nil {
			return r, false
		}
		defer unlock()
		if r := skip(); r != nil {
			return r, false
		}
	}
	if ctx.Err() != nil { // cancelled while it waited for permission or the lock
		return notStarted(ctx, c), false
	}
	if !startedAtInsert && !claimed {
		wctx, cancel := x.recordCtx(ctx)
		err := x.rec.MarkRunning(wctx, c.ID, x.cfg.Owner, time.Now().UTC())
		cancel()
		if err != nil {
			x.storeErrs.log(ctx, x.log, "recording call start failed; it will not run", "call_id", c.ID, "err", err)
			return notRecorded(err), false
		}
		if ctx.Err() != nil { // cancelled while its start was being written
			return notStarted(ctx, c), false
		}
	}
	return x.run(ctx, sess, c, emit), true
}

// serialize waits until c may run as far as the session's other calls go: a tool that
// is not concurrency-safe takes the session's serial lock, on this replica and across
// replicas. unlock releases what was taken; a non-nil result means c must not run.
// When the lock of this replica is taken, emit (if not nil) is told that c waits
// (EventQueued).
func (x *Executor) serialize(ctx context.Context, sess *Session, c *Call, emit func(Event)) (unlock func(), res *tool.Result) {
	if c.entry.Spec.ConcurrencySafe {
		return func() {}, nil
	}
	waitStart := time.Now()
	select {
	case sess.serial <- struct{}{}:
	default:
		if emit != nil {
			sess.mu.Lock()
			behind := sess.serialHolder
			sess.mu.Unlock()
			emit(Event{Type: EventQueued, Call: c, Behind: behind, TS: waitStart})
		}
		select {
		case sess.serial <- struct{}{}:
		case <-ctx.Done():
			x.queued(ctx, c.Name, time.Since(waitStart))
			if cancelledByRequest(ctx) {
				return nil, notStarted(ctx, c)
			}
			return nil, tool.ErrorResult(tool.KindCancelled, "%s was cancelled while waiting for the session's previous call to finish", c.Name)
		}
	case <-ctx.Done():
		x.queued(ctx, c.Name, time.Since(waitStart))
		if cancelledByRequest(ctx) {
			return nil, notStarted(ctx, c)
		}
		return nil, tool.ErrorResult(tool.KindCancelled, "%s was cancelled while waiting for the session's previous call to finish", c.Name)
	}
	across, r := x.lockAcross(ctx, sess, c)
	// The wait covers this replica's lock and the one across replicas.
	x.queued(ctx, c.Name, time.Since(waitStart))
	if r != nil {
		<-sess.serial
		return nil, r
	}
	sess.mu.Lock()
	sess.serialHolder = c
	sess.mu.Unlock()
	return func() {
		across()
		sess.mu.Lock()
		sess.serialHolder = nil
		sess.mu.Unlock()
		<-sess.serial
	}, nil
}

// run invokes the tool of a call that may run now, with progress and, for stateful
// tools, the agent's answers. Its caller made ctx cancellable by Cancel (track).
func (x *Executor) run(ctx context.Context, sess *Session, c *Call, emit func(Event)) *tool.Result {
	progress := tool.NoProgress
	if x.progress != nil {
		progress = x.progress.Begin(c.ID, c.ToolCallID, sess.ID)
	}
	defer progress.Close()
	c.progress = progress
	if x.obs != nil {
		x.obs.CallStarted(c.Name)
	}
	tc := &tool.Context{Context: ctx, CallID: c.ID, ToolCallID: c.ToolCallID, ToolName: c.Name, Session: sess.Info, ReadOnly: sess.ReadOnly(), Progress: progress}
	if c.entry.Spec.Mode == tool.ModeStateful && emit != nil {
		tc.Interact = interactor{x: x, c: c, emit: emit}
	}
	if c.entry.Spec.Invokes {
		inv := &invoker{x: x, sess: sess, parent: c, emit: emit}
		defer inv.close()
		tc.Invoke = inv
	}
	res := c.manager.Run(c.entry, toolmgr.Invocation{Ctx: tc, Args: c.Arguments, Timeout: x.timeout(c.entry.Spec, c.timeout), Prepared: c.prepared, Log: x.log})
	if res.IsError && errors.Is(context.Cause(ctx), errFenced) {
		// Say what the record says (the other replicas failed the call), not "cancelled".
		return tool.ErrorResult(tool.KindFailed, "%s was stopped: this replica lost its lease on the shared database (its heartbeats failed), "+
			"so the other replicas marked the call failed; the call may have run partly", c.Name)
	}
	return res
}

// timeout is the request's override, else the tool's default, else the server's, and
// never more than the server's maximum.
func (x *Executor) timeout(spec tool.Spec, override time.Duration) time.Duration {
	t := x.cfg.DefaultTimeout
	if spec.Timeout > 0 {
		t = spec.Timeout
	}
	if override > 0 {
		t = override
	}
	return min(t, x.cfg.MaxTimeout)
}

func validJSONOrString(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	if json.Valid(raw) && !jsontext.Deeper(raw, tool.MaxStructuredDepth) {
		return raw
	}
	// Kept as text: invalid JSON, or JSON nested deeper than clients reading the
	// record (Python's json module) decode.
	b, _ := json.Marshal(string(raw))
	return b
}

// notRecorded is the result of a call that was not run because its record could not
// be written, saying why when the store says: a full disk stays full until an operator
// frees space, so "try again shortly" would send a model into a loop of retries.
func notRecorded(err error) *tool.Result {
	switch {
	case store.IsStorageFull(err):
		return tool.ErrorResult(tool.KindUnavailable, "the call could not be recorded, so it was not run: the tool server's disk is full. "+
			"Calls will fail the same way until an operator frees space; tell the user")
	case store.IsUnreachable(err):
		return tool.ErrorResult(tool.KindUnavailable, "the call could not be recorded, so it was not run: the tool server's database cannot be reached just now; try again shortly")
	}
	return tool.ErrorResult(tool.KindUnavailable, "the call could not be recorded, so it was not run; try again shortly")
}
