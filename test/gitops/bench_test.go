package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// hitlTarget is issue 32's target for hitl's part of an answer through
// Git, at p99.
const hitlTarget = 100 * time.Millisecond

// burstSize is how many replies the merge of the burst workload carries.
const burstSize = 25

// TestGitOpsBench measures the time from `git push` to the question
// Settled, split into Flux's part (from the push to the reply created by
// kustomize-controller) and hitl's (from the reply created to the question
// Settled: the controller's judgement, with the reads of the Kustomization
// and its GitRepository, and the status write). It runs only when
// HITL_GITOPS_BENCH gives the number of pushes (`make bench-gitops`), and
// writes its figures as JSON to HITL_BENCH_OUT when set.
//
// Two workloads, one tenant as test/gitops sets one up: pushes one after
// another, each a commit with one reply, each followed by the request a
// push webhook makes (Flux's Receiver asks the GitRepository to reconcile
// at once, so that Flux's part is not the poll interval), the next push
// once the Kustomization is Ready at the commit; then one merge of
// burstSize replies, one commit. Both ends of hitl's part are read off one
// watch of the agents' namespace, so that it counts what a watcher sees.
// Admission's share of the reply's create is on neither side of that
// difference (it is in Flux's): `make bench` measures it.
func TestGitOpsBench(t *testing.T) {
	pushes, _ := strconv.Atoi(os.Getenv("HITL_GITOPS_BENCH"))
	if pushes <= 0 {
		t.Skip("a benchmark: set HITL_GITOPS_BENCH to the number of pushes (make bench-gitops)")
	}
	ctx, w := startWorld(t)
	team := newTenant(ctx, t, w, "bench", "hitl-gitops-answerer")
	seen := watchAgents(ctx, t, w)
	bot := agentClient(ctx, t, w, "release-bot")
	newQuestion := func(name string) {
		t.Helper()
		q := &hitlv1.UserQuestion{
			ObjectMeta: metav1.ObjectMeta{Namespace: agents, Name: name, Labels: map[string]string{hitlv1.AgentLabel: "release-bot"}},
			Spec:       hitlv1.UserQuestionSpec{Agent: "release-bot", Questions: deployQuestions},
		}
		if err := bot.Create(ctx, q); err != nil {
			t.Fatal(err)
		}
		waitOpen(ctx, t, w, name)
	}

	var one gitopsRun
	for i := range pushes {
		name := fmt.Sprintf("push-%03d", i)
		newQuestion(name)
		reply := team.answer(t, name, "env=prod")
		sha := team.repo.commit("Answer " + name)
		pushed := time.Now()
		team.repo.push()
		team.requestFetch(ctx, t)
		one.add(seen.await(t, reply, name, pushed))
		waitApplied(ctx, t, team, sha)
	}

	var burst gitopsRun
	names := make([]string, burstSize)
	replies := make([]string, burstSize)
	for i := range names {
		names[i] = fmt.Sprintf("merge-%03d", i)
		newQuestion(names[i])
		replies[i] = team.answer(t, names[i], "env=staging")
	}
	sha := team.repo.commit(fmt.Sprintf("Answer %d questions", burstSize))
	pushed := time.Now()
	team.repo.push()
	team.requestFetch(ctx, t)
	for i := range names {
		burst.add(seen.await(t, replies[i], names[i], pushed))
	}
	waitApplied(ctx, t, team, sha)

	report := map[string]gitopsFigures{
		"one reply per push":                             one.figures(),
		fmt.Sprintf("%d replies in one push", burstSize): burst.figures(),
	}
	for _, name := range []string{"one reply per push", fmt.Sprintf("%d replies in one push", burstSize)} {
		f := report[name]
		t.Logf("%s, %d samples:\n  Flux (push to reply created): %s\n  hitl (reply created to Settled): %s\n    to the decision: %s\n    decision to Settled seen: %s\n  push to Settled: %s\n  hitl p99 %s: target ≤ %s %s",
			name, f.Samples, f.Flux, f.Hitl, f.Decide, f.Seen, f.Total, ms(f.Hitl.P99), ms(hitlTarget), verdict(f.Hitl.P99 <= hitlTarget))
	}
	if out := os.Getenv("HITL_BENCH_OUT"); out != "" {
		data, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "NOT met"
}

// requestFetch asks source-controller to fetch the tenant's repository
// now, as Flux's notification-controller does when a Receiver gets the
// Git server's push webhook.
func (k *tenant) requestFetch(ctx context.Context, t *testing.T) {
	t.Helper()
	requestReconcile(ctx, t, k.w.admin, gitRepositoryGVK, k.ns, answers)
}

// waitApplied waits until the tenant's Kustomization is Ready at commit
// sha.
func waitApplied(ctx context.Context, t *testing.T, k *tenant, sha string) {
	t.Helper()
	NewWithT(t).Eventually(k.applied(ctx), time.Minute, 50*time.Millisecond).Should(Equal(revision(sha)), "the Kustomization is Ready at the commit")
}

// agentsWatch records when one watch of the agents' namespace first saw
// each reply and each question Settled.
type agentsWatch struct {
	mu      sync.Mutex
	created map[string]time.Time // reply name → first seen
	settled map[string]time.Time // question name → first seen Settled
	decided map[string]time.Time // question name → its settlement's time
	// changed is closed, and replaced, on every record.
	changed chan struct{}
	// err is why a watch ended, if it did.
	err error
}

// watchAgents starts the watches of replies and questions in the agents'
// namespace, as admin; they end with ctx.
func watchAgents(ctx context.Context, t *testing.T, w *world) *agentsWatch {
	t.Helper()
	a := &agentsWatch{created: map[string]time.Time{}, settled: map[string]time.Time{}, decided: map[string]time.Time{}, changed: make(chan struct{})}
	c, err := client.NewWithWatch(w.cfg, client.Options{Scheme: w.admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, list := range []client.ObjectList{&hitlv1.QuestionReplyList{}, &hitlv1.UserQuestionList{}} {
		events, err := c.Watch(ctx, list, client.InNamespace(agents))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(events.Stop)
		go a.follow(ctx, events)
	}
	return a
}

func (a *agentsWatch) follow(ctx context.Context, events watch.Interface) {
	for e := range events.ResultChan() {
		now := time.Now()
		a.mu.Lock()
		switch o := e.Object.(type) {
		case *hitlv1.QuestionReply:
			if _, ok := a.created[o.Name]; !ok && e.Type != watch.Deleted {
				a.created[o.Name] = now
			}
		case *hitlv1.UserQuestion:
			if _, ok := a.settled[o.Name]; !ok && o.Status.State == hitlv1.StateSettled {
				a.settled[o.Name] = now
				if o.Status.Settlement != nil {
					a.decided[o.Name] = o.Status.Settlement.At.Time
				}
			}
		}
		close(a.changed)
		a.changed = make(chan struct{})
		a.mu.Unlock()
	}
	a.mu.Lock()
	if ctx.Err() == nil && a.err == nil {
		a.err = fmt.Errorf("a watch of the agents' namespace ended")
	}
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

// await waits until the watch has seen reply created and question
// Settled, and returns the sample, measured from pushed.
func (a *agentsWatch) await(t *testing.T, reply, question string, pushed time.Time) gitopsSample {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		a.mu.Lock()
		created, ok1 := a.created[reply]
		settled, ok2 := a.settled[question]
		decided := a.decided[question]
		changed, err := a.changed, a.err
		a.mu.Unlock()
		switch {
		case ok1 && ok2:
			return gitopsSample{flux: created.Sub(pushed), hitl: settled.Sub(created), total: settled.Sub(pushed),
				decide: decided.Sub(created), seen: settled.Sub(decided)}
		case err != nil:
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("question %s not seen Settled by reply %s within a minute of the push (reply seen: %t)", question, reply, ok1)
		}
	}
}

// gitopsSample is one answer through Git. hitl's part is split at the
// settlement's time (status.settlement.at, the controller's clock, this
// machine's): decide is from the reply seen to the controller's decision
// (its judgement, with the reads of the engine's objects), seen from the
// decision to the question seen Settled (the status write and the watch).
type gitopsSample struct{ flux, hitl, total, decide, seen time.Duration }

// gitopsRun is a workload's samples.
type gitopsRun struct{ flux, hitl, total, decide, seen []time.Duration }

func (r *gitopsRun) add(s gitopsSample) {
	r.flux = append(r.flux, s.flux)
	r.hitl = append(r.hitl, s.hitl)
	r.total = append(r.total, s.total)
	r.decide = append(r.decide, s.decide)
	r.seen = append(r.seen, s.seen)
}

// gitopsFigures is what the bench reports of a workload.
type gitopsFigures struct {
	Samples int         `json:"samples"`
	Flux    percentiles `json:"flux"`
	Hitl    percentiles `json:"hitl"`
	Total   percentiles `json:"pushToSettled"`
	// Decide and Seen split Hitl at the settlement's time.
	Decide percentiles `json:"toDecision"`
	Seen   percentiles `json:"decisionToSeen"`
}

func (r *gitopsRun) figures() gitopsFigures {
	return gitopsFigures{Samples: len(r.hitl), Flux: percentilesOf(r.flux), Hitl: percentilesOf(r.hitl), Total: percentilesOf(r.total),
		Decide: percentilesOf(r.decide), Seen: percentilesOf(r.seen)}
}

// percentiles are nearest-rank percentiles of a sample.
type percentiles struct {
	P50 time.Duration `json:"p50"`
	P90 time.Duration `json:"p90"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

func percentilesOf(d []time.Duration) percentiles {
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p float64) time.Duration {
		if len(s) == 0 {
			return 0
		}
		return s[max(0, int(math.Ceil(p*float64(len(s))))-1)]
	}
	return percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: at(1)}
}

func (p percentiles) String() string {
	return strings.Join([]string{"p50 " + ms(p.P50), "p90 " + ms(p.P90), "p99 " + ms(p.P99), "max " + ms(p.Max)}, ", ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
