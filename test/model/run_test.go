package model_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/manager"
	"github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/model"
	"github.com/hitl-dev/hitl/test/testenv"
)

// Run lengths: a short run in `make test`, a long one in `make model`.
const defaultOps = 150

// pokeAnnotation is what the test changes on a question after a clock step,
// so that the controller looks at it again at the new fake time (its own
// schedule waits in real time).
const pokeAnnotation = "model.hitl.dev/poke"

// maxTimeout is the largest spec.timeout the admission policies admit
// here: more than any run's fake clock reaches.
const maxTimeout = 100000 * time.Hour

// converge is how long the objects may take to match the model after an
// operation.
const converge = 30 * time.Second

// TestModel drives the real controller, on a local control plane with the
// default install's admission policies, and the model of SPEC §1 with the
// same random operations, and compares them after every operation. Each
// operation is made as the identity that would make it (identities_test.go),
// the tenancy guide's attacks as the attacker: the model predicts which the
// API server refuses, and with which code. HITL_MODEL_SEED replays a run;
// HITL_MODEL_OPS sets its length; HITL_MODEL_LOG=1 shows the controller's
// logs (=debug: with every reconcile).
func TestModel(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("HITL_MODEL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("HITL_MODEL_SEED=%q: %v", s, err)
		}
	}
	ops := defaultOps
	if s := os.Getenv("HITL_MODEL_OPS"); s != "" {
		var err error
		if ops, err = strconv.Atoi(s); err != nil || ops < 0 {
			t.Fatalf("HITL_MODEL_OPS=%q: want a number of operations", s)
		}
	}
	t.Logf("seed %d, %d operations (replay: HITL_MODEL_SEED=%d HITL_MODEL_OPS=%d go test ./test/model -run TestModel -count=1 -v)", seed, ops, seed, ops)

	if level := os.Getenv("HITL_MODEL_LOG"); level == "" {
		logf.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	} else {
		// The controller's logs, to follow a replay.
		o := zap.Options{Development: true, DestWriter: os.Stderr}
		fs := flag.NewFlagSet("log", flag.ContinueOnError)
		o.BindFlags(fs)
		if level == "debug" {
			_ = fs.Parse([]string{"--zap-log-level=5"}) // every reconcile
		}
		logf.SetLogger(zap.New(zap.UseFlagOptions(&o)))
	}
	env := testenv.New()
	cfg, _, err := testenv.Start(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// The default install's admission policies, which stamp and check who
	// asks, answers and claims. The fake clock runs far ahead of real
	// time, and timed asks take timeouts that reach past it.
	if err := testenv.InstallAdmission(ctx, c, testenv.Policies, maxTimeout); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "model-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	as, err := setUpIdentities(ctx, c, cfg, ns.Name)
	if err != nil {
		t.Fatal(err)
	}

	// T0 is a whole second, one before now: creation timestamps (whole
	// seconds, real time) then all lie after it, and every fake time is a
	// whole second, as condition times are written.
	t0 := time.Now().Truncate(time.Second).Add(-time.Second)
	users := map[string]string{}
	for name, r := range as {
		users[name] = r.username
	}
	rec := newRecorder(t0, users)
	if err := rec.start(ctx, c, ns.Name); err != nil {
		t.Fatal(err)
	}
	m := model.New(t0, model.Tenancy{Agent: agent, Answerers: append([]string{agent}, holders...), Groups: groupsOf})
	d := &driver{t: t, g: NewWithT(t), ctx: ctx, c: c, as: as, env: env, ns: ns.Name, seed: seed,
		clock: clocktesting.NewFakeClock(t0), m: m, rec: rec,
		gen:   &generator{rng: rand.New(rand.NewSource(seed)), m: m, shapeOf: map[string]int{}},
		kinds: map[string]int{}, refused: map[string]int{}, digests: map[string]string{}}
	d.startManager()
	t.Cleanup(func() { d.stopManager() })

	started := time.Now()
	for i := range ops {
		d.index = i
		o := d.gen.next()
		d.current = &o
		d.run(&o)
		d.history = append(d.history, o)
		d.current = nil
		d.check()
	}
	d.check()
	d.final()

	versions, relists := rec.counts()
	kinds := make([]string, 0, len(d.kinds))
	for k, n := range d.kinds {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	t.Logf("model run passed: seed %d, %d operations in %s, fake clock at slot %d (+%s)",
		seed, ops, time.Since(started).Round(time.Millisecond), m.Slots, time.Duration(m.Slots)*model.Slot)
	t.Logf("operations by kind (restart downtime included): %s", strings.Join(kinds, " "))
	refused := make([]string, 0, len(d.refused))
	for k, n := range d.refused {
		refused = append(refused, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(refused)
	t.Logf("requests refused as the model predicted: %s", strings.Join(refused, ", "))
	seen := make([]string, 0, len(m.Seen))
	for k, n := range m.Seen {
		seen = append(seen, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(seen)
	t.Logf("the model went through: %s", strings.Join(seen, ", "))
	t.Logf("%d comparisons with the model passed (%d questions, %d replies at the end); %d object versions passed the invariant checks (%d watch relists)",
		d.comparisons, len(m.Questions), len(m.Replies), versions, relists)
}

// driver runs operations against the API and the model.
type driver struct {
	t   *testing.T
	g   Gomega
	ctx context.Context
	c   client.WithWatch
	// as are the clients of the identities operations run as.
	as    map[string]requester
	env   *envtest.Environment
	ns    string
	seed  int64
	clock *clocktesting.FakeClock
	m     *model.Model
	rec   *recorder
	gen   *generator

	stop    func()
	index   int
	history []op
	current *op
	kinds   map[string]int
	// refused counts the refusals predicted and seen, by kind and refusal.
	refused  map[string]int
	lastPoke int
	// lastWrite is when the test last wrote something the controller
	// reacts to.
	lastWrite   time.Time
	comparisons int
	// digests are the questions' spec digests, as the test computes them
	// from what the API server returned at creation.
	digests map[string]string
}

func (d *driver) startManager() {
	c := manager.DefaultConfig()
	c.Clock = d.clock
	stop, err := testenv.RunManager(d.env, d.env.Config, c)
	if err != nil {
		d.fail("starting the manager: %v", err)
	}
	d.stop = stop
}

func (d *driver) stopManager() {
	if d.stop != nil {
		d.stop()
		d.stop = nil
	}
}

// fail reports a failure with everything needed to replay it.
func (d *driver) fail(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("%s\n\n%s", fmt.Sprintf(format, args...), d.report())
}

func (d *driver) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, failed at operation %d (replay: HITL_MODEL_SEED=%d HITL_MODEL_OPS=%d go test ./test/model -run TestModel -count=1 -v)\n",
		d.seed, d.index, d.seed, d.index+1)
	fmt.Fprintf(&b, "T0 %s, fake clock at slot %d (%s)\noperations:\n", d.m.T0.Format(time.RFC3339), d.m.Slots, d.m.Now().Format(time.RFC3339))
	for i, o := range d.history {
		fmt.Fprintf(&b, "  %4d  %s\n", i, o)
	}
	if d.current != nil {
		fmt.Fprintf(&b, "  %4d  %s  (under way)\n", d.index, *d.current)
	}
	log := d.m.Log
	if len(log) > 40 {
		log = log[len(log)-40:]
	}
	b.WriteString("the model's last transitions:\n")
	for _, l := range log {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// check waits until the objects match the model, and fails on any
// invariant the watches saw broken.
func (d *driver) check() {
	d.t.Helper()
	var last []string
	d.g.Eventually(func() []string {
		if v := d.rec.takeViolations(); len(v) > 0 {
			last = append([]string{"INVARIANTS BROKEN:"}, v...)
			StopTrying("invariants broken").Now()
		}
		last = append(d.rec.compare(d.m), d.rec.settledBy()...)
		return last
	}).WithTimeout(converge).WithPolling(10*time.Millisecond).Should(BeEmpty(), func() string {
		return fmt.Sprintf("the objects do not match the model after operation %d:\n  %s\n\n%s",
			d.index, strings.Join(last, "\n  "), d.report())
	})
	d.comparisons++
}

// final checks that every reply has its one outcome, from a fresh list as
// well as from the watches.
func (d *driver) final() {
	var replies hitlv1.QuestionReplyList
	if err := d.c.List(d.ctx, &replies, client.InNamespace(d.ns)); err != nil {
		d.fail("listing replies: %v", err)
	}
	for _, r := range replies.Items {
		want := d.m.Replies[r.Name]
		if want == nil || want.Deleted || r.Status.Outcome != want.Outcome || r.Status.Reason != want.Reason {
			d.fail("reply %s is %s/%s in a fresh list; the model has %+v", r.Name, r.Status.Outcome, r.Status.Reason, want)
		}
	}
	for _, name := range d.m.ReplyNames() {
		if r := d.m.Replies[name]; r.Outcome == "" {
			d.fail("reply %s never got an outcome in the model", name)
		}
	}
	var questions hitlv1.UserQuestionList
	if err := d.c.List(d.ctx, &questions, client.InNamespace(d.ns)); err != nil {
		d.fail("listing questions: %v", err)
	}
	for _, q := range questions.Items {
		want := d.m.Questions[q.Name]
		if want == nil || want.Deleted {
			d.fail("question %s exists in a fresh list; the model has %+v", q.Name, want)
		}
		if diffs := d.rec.freshDiff(d.m, want, &q); len(diffs) > 0 {
			d.fail("%s", strings.Join(diffs, "\n"))
		}
	}
}

// run performs one operation on the API and the model.
func (d *driver) run(o *op) {
	d.t.Helper()
	d.kinds[o.Kind]++
	switch o.Kind {
	case kAsk:
		d.ask(o)
	case kAskClaimed:
		for _, name := range o.Claims {
			c := op{Kind: kClaim, Q: o.Q, Claim: name, By: d.gen.pick(holders), Seconds: 120}
			d.claim(&c)
		}
		// The manager sees the claims, for a question it does not know
		// yet, before the question itself.
		d.waitQuiet()
		d.ask(o)
	case kReply, kBadReply, kOutsider, kSelfReply, kReuse, kVote, kDupVote, kWrongDigest:
		d.reply(o)
	case kPolicy, kPolicyAttack:
		d.policy(o)
	case kClaim, kOutsiderClaim:
		d.claim(o)
	case kRenew:
		d.renew(o)
	case kUnclaim:
		d.unclaim(o)
	case kForeignClaim:
		if o.Change == changeRenew {
			d.renew(o)
		} else {
			d.unclaim(o)
		}
	case kAdmit, kAdmitWrong:
		d.update(o, func() error { return d.m.Admit(o.Q, o.R, o.By) }, func(q *hitlv1.UserQuestion) { q.Spec.AdmittedReply = o.R })
	case kCancel:
		d.update(o, func() error { return d.m.Cancel(o.Q, o.By) }, func(q *hitlv1.UserQuestion) { q.Spec.Cancelled = true })
	case kForeignChange:
		switch o.Change {
		case changeCancel:
			d.update(o, func() error { return d.m.Cancel(o.Q, o.By) }, func(q *hitlv1.UserQuestion) { q.Spec.Cancelled = true })
		case changeAdmit:
			d.update(o, func() error { return d.m.Admit(o.Q, o.R, o.By) }, func(q *hitlv1.UserQuestion) { q.Spec.AdmittedReply = o.R })
		case changeLabel:
			d.update(o, func() error { return d.m.Relabel(o.Q, o.By) }, func(q *hitlv1.UserQuestion) {
				if q.Labels == nil {
					q.Labels = map[string]string{}
				}
				q.Labels[takenLabel] = o.By
			})
		}
	case kWithdraw, kDeleteReply, kForeignWithdraw:
		d.deleteReply(o)
	case kStep:
		if !d.m.Down() {
			// Whatever the controller was told before the step, it sees
			// at the time before the step (claims' renewals above all).
			d.waitQuiet()
		}
		pokes := d.pokes()
		d.m.Step(o.Slots)
		d.clock.SetTime(d.m.Now())
		if !d.m.Down() {
			d.poke(pokes)
		}
	case kRestart:
		d.restart(o)
	}
}

func (d *driver) key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: d.ns, Name: name}
}

func (d *driver) must(err error) {
	d.t.Helper()
	if err != nil {
		d.fail("operation %d: %v", d.index, err)
	}
}

// client is the client of the identity an operation runs as.
func (d *driver) client(by string) client.Client {
	r, ok := d.as[by]
	if !ok {
		d.fail("operation %d: no identity %q", d.index, by)
	}
	return r.c
}

// errRBAC is the refusal RBAC gives before any admission policy looks: an
// identity without the verb on the resource.
var errRBAC = errors.New("forbidden by RBAC")

// want records the model's prediction for a request in the report: the
// error the model gives, and the policy that gives its code.
func want(o *op, err error, policy string) {
	switch {
	case err == nil:
		o.Want = ""
	case errors.Is(err, model.ErrNotOwner), errors.Is(err, model.ErrForbidden):
		o.Want = fmt.Sprintf("%s from hitl-%s", err, policy)
	default:
		o.Want = err.Error()
	}
}

// expect fails unless the API server answered a request as the model
// predicts: accepted, or refused in the same way. A refusal by an
// admission policy must come from the policy that gives the code, with the
// code at the start of its message.
func (d *driver) expect(o *op, predicted error, policy string, got error) {
	d.t.Helper()
	want(o, predicted, policy)
	var ok bool
	switch {
	case predicted == nil:
		ok = got == nil
	case errors.Is(predicted, model.ErrInvalid):
		ok = apierrors.IsInvalid(got)
	case errors.Is(predicted, model.ErrNotFound):
		ok = apierrors.IsNotFound(got)
	case errors.Is(predicted, errRBAC):
		ok = apierrors.IsForbidden(got) && !strings.Contains(got.Error(), "AdmissionPolicy")
	case errors.Is(predicted, model.ErrNotOwner), errors.Is(predicted, model.ErrForbidden):
		ok = apierrors.IsForbidden(got) && strings.Contains(got.Error(),
			fmt.Sprintf("ValidatingAdmissionPolicy 'hitl-%s' with binding 'hitl-%s' denied request: %s: ", policy, policy, predicted))
	}
	if !ok {
		d.fail("operation %d (%s): the API server answered %v; the model predicts %v", d.index, o, got, predicted)
	}
	if predicted != nil {
		d.refused[o.Kind+": "+o.Want]++
	}
}

func (d *driver) ask(o *op) {
	q := builders.Question(o.Q, d.ns).Agent(agent).Label(hitlv1.AgentLabel, agent).Obj()
	q.Spec.Questions = append([]hitlv1.Question(nil), shapes[o.Shape]...)
	if o.Timeout > 0 {
		q.Spec.Timeout = &metav1.Duration{Duration: o.Timeout}
	}
	q.Spec.TTLSecondsAfterFinished = o.TTL
	switch o.AskedAt {
	case "now":
		q.Spec.AskedAt = &metav1.MicroTime{Time: time.Now()}
	case "stale":
		q.Spec.AskedAt = &metav1.MicroTime{Time: time.Now().Add(-10 * time.Minute)}
	}
	var own *model.RuleSpec
	if o.Own > 0 {
		own = &ownRules[o.Own-1]
		rule := ruleSpec(own)
		q.Spec.Approval = &rule
	}
	d.must(d.client(o.By).Create(d.ctx, q))
	d.lastWrite = time.Now()
	d.digests[o.Q] = hitlv1.SpecDigest(&q.Spec)
	a := model.Ask{Name: o.Q, Created: q.CreationTimestamp.Time, TTL: o.TTL, NeedsOtherApprover: needsOtherApprover(o.Shape),
		Agent: agent, Intents: intentsOf(o.Shape), Labels: map[string]string{hitlv1.AgentLabel: agent}, Own: own}
	if q.Spec.AskedAt != nil {
		a.AskedAt = &q.Spec.AskedAt.Time
	}
	if q.Spec.Timeout != nil {
		a.Timeout = &q.Spec.Timeout.Duration
	}
	d.m.Ask(a)
}

// reply creates a reply as its author sends it: no spec.answeredBy, which
// admission stamps, and the agent label when o is labelled.
func (d *driver) reply(o *op) {
	r := builders.Reply(o.R, d.ns, o.Q).Anonymous().Obj()
	if o.Labelled {
		r.Labels = map[string]string{hitlv1.AgentLabel: agent}
	}
	r.Spec.Answers = o.Answers
	switch o.Digest {
	case digestRight:
		r.Spec.QuestionRef.SpecDigest = d.digests[o.Q]
	case digestWrong:
		r.Spec.QuestionRef.SpecDigest = wrongDigest
	}
	d.rec.noteSending(o.R, sent{answers: o.Answers, by: d.as[o.By].username})
	err := d.client(o.By).Create(d.ctx, r)
	d.lastWrite = time.Now()
	if err == nil {
		d.rec.noteSent(o.R, r.UID)
	} else {
		d.rec.noteRefused(o.R)
	}
	shape, asked := d.gen.shapeOf[o.Q]
	_, predicted := d.m.Reply(model.Sent{Name: o.R, Question: o.Q, By: o.By, Valid: o.Valid, Labelled: o.Labelled,
		Approves: asked && approves(shape, o.Answers), WrongDigest: o.Digest == digestWrong})
	d.expect(o, predicted, "reply-identity", err)
}

// policy creates, edits or deletes an ApprovalPolicy as o.By: the
// platform team, or (kPolicyAttack) an identity RBAC refuses.
func (d *driver) policy(o *op) {
	shape := policyShapes[o.PolicyShape]
	obj := &hitlv1.ApprovalPolicy{ObjectMeta: metav1.ObjectMeta{Name: o.Policy, Namespace: d.ns}, Spec: policySpec(&shape)}
	c := d.client(o.By)
	var err error
	switch o.Change {
	case policyCreate:
		err = c.Create(d.ctx, obj)
	case policyEdit:
		for range 20 {
			cur := &hitlv1.ApprovalPolicy{}
			if o.Kind == kPolicyAttack {
				cur = obj.DeepCopy()
			} else if err = c.Get(d.ctx, d.key(o.Policy), cur); err != nil {
				break
			}
			cur.Spec = obj.Spec
			if err = c.Update(d.ctx, cur); !apierrors.IsConflict(err) {
				obj = cur
				break
			}
		}
	case policyDelete:
		err = c.Delete(d.ctx, obj)
	}
	if o.Kind == kPolicyAttack {
		d.expect(o, errRBAC, "", err)
		return
	}
	d.expect(o, nil, "", err)
	if o.Change == policyDelete {
		d.m.DeletePolicy(o.Policy)
		return
	}
	shape.Name = o.Policy
	if gen := d.m.PutPolicy(shape); obj.Generation != gen {
		d.fail("operation %d (%s): policy %s is at generation %d, the model says %d", d.index, o, o.Policy, obj.Generation, gen)
	}
}

// claim creates a QuestionClaim on o.Q, which may not exist yet (so the
// claim names it by name only, and has no owner). Admission stamps its
// holder.
func (d *driver) claim(o *op) {
	q := builders.Question(o.Q, d.ns).Agent(agent).Obj()
	c := builders.Claim(o.Claim, q).For(time.Duration(o.Seconds) * time.Second).Obj()
	err := d.client(o.By).Create(d.ctx, c)
	d.lastWrite = time.Now()
	d.expect(o, d.m.Claim(o.Claim, o.Q, o.By), "claim-identity", err)
}

// renew renews a claim as the answerer SDK does: a merge patch of
// spec.renewTime.
func (d *driver) renew(o *op) {
	predicted := d.m.Renew(o.Claim, o.By)
	renew := fmt.Sprintf(`{"spec":{"renewTime":%q}}`, metav1.NewMicroTime(time.Now()).Format(metav1.RFC3339Micro))
	err := d.client(o.By).Patch(d.ctx, &hitlv1.QuestionClaim{ObjectMeta: metav1.ObjectMeta{Name: o.Claim, Namespace: d.ns}},
		client.RawPatch(types.MergePatchType, []byte(renew)))
	d.lastWrite = time.Now()
	d.expect(o, predicted, "claim-identity", err)
}

func (d *driver) unclaim(o *op) {
	predicted := d.m.Unclaim(o.Claim, o.By)
	err := d.client(o.By).Delete(d.ctx, &hitlv1.QuestionClaim{ObjectMeta: metav1.ObjectMeta{Name: o.Claim, Namespace: d.ns}})
	d.lastWrite = time.Now()
	d.expect(o, predicted, "claim-owner", err)
}

func (d *driver) deleteReply(o *op) {
	predicted := d.m.DeleteReply(o.R, o.By)
	if predicted == nil {
		d.rec.noteDeleting(o.R)
	}
	err := d.client(o.By).Delete(d.ctx, &hitlv1.QuestionReply{ObjectMeta: metav1.ObjectMeta{Name: o.R, Namespace: d.ns}})
	d.lastWrite = time.Now()
	d.expect(o, predicted, "reply-owner", err)
}

// update is a change of a question by o.By, read and guarded by the
// resourceVersion it read; the model predicts whether the API server
// accepts it, unless RBAC refuses it first.
func (d *driver) update(o *op, predict func() error, change func(*hitlv1.UserQuestion)) {
	predicted := errRBAC
	if updatesQuestions(o.By) {
		predicted = predict()
	}
	var got error
	for range 20 {
		q := &hitlv1.UserQuestion{}
		if got = d.client(o.By).Get(d.ctx, d.key(o.Q), q); got == nil {
			change(q)
			got = d.client(o.By).Update(d.ctx, q)
		}
		if !apierrors.IsConflict(got) {
			break
		}
	}
	d.lastWrite = time.Now()
	d.expect(o, predicted, "question-owner", got)
}

// pokes are the questions to look at after a clock step, chosen before
// it: every question that exists and is not finished, every finished one
// with a TTL, and a few others, to check that they do not change.
func (d *driver) pokes() []string {
	var pokes, quiet []string
	for _, name := range d.m.QuestionNames() {
		q := d.m.Questions[name]
		switch {
		case q.Deleted:
		case !terminal(q.State) || q.TTL != nil:
			pokes = append(pokes, name)
		default:
			quiet = append(quiet, name)
		}
	}
	for range min(5, len(quiet)) {
		pokes = append(pokes, d.gen.pick(quiet))
	}
	return pokes
}

// poke makes the controller look at questions again at the new fake time.
func (d *driver) poke(names []string) {
	d.lastPoke++
	for _, name := range names {
		d.pokeOne(name)
	}
	d.lastWrite = time.Now()
}

func (d *driver) pokeOne(name string) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, pokeAnnotation, d.lastPoke)
	q := &hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.ns}}
	err := d.c.Patch(d.ctx, q, client.RawPatch(types.MergePatchType, []byte(patch)))
	if apierrors.IsNotFound(err) && d.m.Questions[name].Deleted {
		// The step took it past its TTL, and the controller, woken by
		// something else at the new time, deleted it before this poke.
		return
	}
	d.must(err)
}

// restart stops the manager, does what downtime chooses, and starts a new
// manager with the same fake clock.
func (d *driver) restart(o *op) {
	d.stopManager()
	d.m.Stop()
	dt := d.gen.downtime()
	for {
		sub, ok := dt.next()
		if !ok {
			break
		}
		d.run(&sub)
		o.Sub = append(o.Sub, sub)
	}
	before, _ := controllerActivity()
	d.startManager()
	d.m.Start()
	// The new manager lists everything and looks at each question once;
	// until it has, claims it has not seen yet would count as renewed at
	// the wrong time.
	if d.anything() {
		deadline := time.Now().Add(30 * time.Second)
		for n, _ := controllerActivity(); n == before; n, _ = controllerActivity() {
			if time.Now().After(deadline) {
				d.fail("the restarted manager reconciled nothing in 30s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	d.lastWrite = time.Now()
	d.waitQuiet()
}

// anything reports whether any object the controller reconciles exists.
func (d *driver) anything() bool {
	for _, q := range d.m.Questions {
		if !q.Deleted {
			return true
		}
	}
	for _, r := range d.m.Replies {
		if !r.Deleted {
			return true
		}
	}
	return len(d.m.Claims) > 0
}

// waitQuiet waits until the controller has had nothing to do for a while:
// no reconcile under way and none started, since the last write.
func (d *driver) waitQuiet() {
	d.t.Helper()
	const samples, every, minQuiet = 6, 25 * time.Millisecond, 250 * time.Millisecond
	deadline := time.Now().Add(30 * time.Second)
	last, stable := -1.0, 0
	for time.Now().Before(deadline) {
		n, active := controllerActivity()
		if active == 0 && n == last {
			stable++
		} else {
			stable = 0
		}
		last = n
		if stable >= samples && time.Since(d.lastWrite) >= minQuiet {
			return
		}
		time.Sleep(every)
	}
	d.fail("the controller did not go quiet within 30s (operation %d)", d.index)
}

// controllerActivity reads from controller-runtime's metrics how many
// reconciles the question controller has done, and how many are under way.
func controllerActivity() (reconciles, active float64) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return -1, -1
	}
	for _, f := range families {
		name := f.GetName()
		if name != "controller_runtime_reconcile_total" && name != "controller_runtime_active_workers" {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() != "userquestion" {
					continue metric
				}
			}
			if name == "controller_runtime_reconcile_total" {
				reconciles += m.GetCounter().GetValue()
			} else {
				active += m.GetGauge().GetValue()
			}
		}
	}
	return reconciles, active
}
