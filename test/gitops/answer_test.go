package gitops

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/agent"
)

// deployQuestions is what the agents ask.
var deployQuestions = []hitlv1.Question{{
	ID:       "env",
	Question: "Where should I deploy v2?",
	Options:  []hitlv1.QuestionOption{{Label: "staging"}, {Label: "prod"}},
}}

// testAnswerByCommit: release-bot asks with the Go SDK, alice writes her
// answer to a file with kubectl hitl, the file is committed and pushed,
// and the tenant's Kustomization applies it as the tenant's
// ServiceAccount: the question settles, with where the answer came from.
func testAnswerByCommit(ctx context.Context, t *testing.T, w *world) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	team := newTenant(ctx, t, w, "team-a", "hitl-gitops-answerer")
	checkGrants(ctx, t, w, team)

	bot := agent.New(agentClient(ctx, t, w, "release-bot"), agents, "release-bot")
	type asked struct {
		res agent.Result
		err error
	}
	answered := make(chan asked, 1)
	go func() {
		res, err := bot.Ask(t.Context(), agent.Request{Name: "deploy-v2", Questions: deployQuestions})
		answered <- asked{res, err}
	}()
	waitOpen(ctx, t, w, "deploy-v2")

	reply := team.answer(t, "deploy-v2", "env=prod")
	sha := team.repo.commit("Answer deploy-v2: prod")
	pushed := time.Now()
	team.repo.push()
	applied, settled := waitSettled(ctx, t, w, "deploy-v2", reply, pushed)
	g.Eventually(team.applied(ctx)).Should(Equal(revision(sha)), "the Kustomization is Ready at the commit")
	ready := time.Since(pushed)
	t.Logf("git push to the reply applied: %s; applied to the question Settled (hitl): %s; push to Settled: %s; push to the Kustomization Ready at the commit: %s",
		applied.Round(time.Millisecond), (settled - applied).Round(time.Millisecond), settled.Round(time.Millisecond), ready.Round(time.Millisecond))

	var a asked
	g.Eventually(answered).Should(Receive(&a), "the agent's Ask returns")
	g.Expect(a.err).NotTo(HaveOccurred())
	g.Expect(a.res.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}))

	source := &hitlv1.ReplySource{
		Engine:   hitlv1.EngineReference{Kind: "Kustomization", Namespace: team.ns, Name: answers},
		Revision: revision(sha),
		Verified: false, // the commit is not signed, and the GitRepository verifies nothing
	}
	r := &hitlv1.QuestionReply{}
	g.Eventually(func() (hitlv1.ReplyOutcome, error) {
		err := w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: reply}, r)
		return r.Status.Outcome, err
	}).Should(Equal(hitlv1.OutcomeApplied))
	g.Expect(r.Spec.AnsweredBy.Username).To(Equal(team.username()), "the API server stamps the identity Flux applies as")
	g.Expect(r.Labels).To(HaveKeyWithValue("kustomize.toolkit.fluxcd.io/name", answers))
	g.Expect(r.Status.Source).To(Equal(source))
	q := &hitlv1.UserQuestion{}
	g.Expect(w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: "deploy-v2"}, q)).To(Succeed())
	g.Expect(q.Status.State).To(Equal(hitlv1.StateSettled))
	g.Expect(q.Status.Settlement.Reply).To(Equal(reply))
	g.Expect(q.Status.Settlement.AnsweredBy.Username).To(Equal(team.username()))
	g.Expect(q.Status.Settlement.Source).To(Equal(source))
	g.Expect(r.Spec.QuestionRef).To(Equal(hitlv1.QuestionReference{Name: q.Name, UID: q.UID, SpecDigest: q.Status.SpecDigest}),
		"the file binds the reply to the question alice read")

	ks, err := team.kustomization(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	healthy, _ := condition(ks, "Healthy")
	g.Expect(healthy).To(Equal("True"), "every reply it applied passed kstatus's health check")
}

// checkGrants shows that the tenant holds hitl-gitops-answerer and no
// more: none of cluster-admin's rights on hitl's objects.
func checkGrants(ctx context.Context, t *testing.T, w *world, k *tenant) {
	t.Helper()
	g := NewWithT(t)
	may := func(verb, resource, sub, name string) bool {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: k.username(), Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + k.ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: agents, Group: "hitl.dev", Resource: resource, Subresource: sub, Verb: verb, Name: name},
		}}
		g.Expect(w.admin.Create(ctx, review)).To(Succeed())
		return review.Status.Allowed
	}
	g.Expect(may("answer", "agents", "", "release-bot")).To(BeTrue())
	for _, denied := range [][4]string{
		{"answer", "agents", "", "office-bot"},
		{"manage", "agents", "", "release-bot"},
		{"ask", "agents", "", "release-bot"},
		{"update", "questionreplies", "", ""},
		{"patch", "questionreplies", "status", ""},
		{"list", "questionreplies", "", ""},
		{"create", "userquestions", "", ""},
		{"get", "userquestions", "", ""},
		{"create", "questionclaims", "", ""},
	} {
		g.Expect(may(denied[0], denied[1], denied[2], denied[3])).To(BeFalse(), "%s may %v", k.username(), denied)
	}
}

// ask creates a question of deployQuestions as the agent's ServiceAccount
// and waits until the controller has looked at it.
func ask(ctx context.Context, t *testing.T, w *world, agentName, name string, ttl *int32) {
	t.Helper()
	q := &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Namespace: agents, Name: name, Labels: map[string]string{hitlv1.AgentLabel: agentName}},
		Spec:       hitlv1.UserQuestionSpec{Agent: agentName, Questions: deployQuestions, TTLSecondsAfterFinished: ttl},
	}
	if err := agentClient(ctx, t, w, agentName).Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	waitOpen(ctx, t, w, name)
}

// waitOpen waits until the controller has looked at a question: Open, with
// the spec digest a reply file binds to.
func waitOpen(ctx context.Context, t *testing.T, w *world, name string) {
	t.Helper()
	NewWithT(t).Eventually(func() (string, error) {
		q := &hitlv1.UserQuestion{}
		err := w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: name}, q)
		if q.Status.SpecDigest == "" {
			return "no spec digest yet", err
		}
		return string(q.Status.State), err
	}, time.Minute, 20*time.Millisecond).Should(Equal(string(hitlv1.StateOpen)))
}

// answer has alice write her answer to a question to
// answers/<question>.yaml of the tenant's worktree, as `kubectl hitl answer
// --to-file` does, and returns the reply's name.
func (k *tenant) answer(t *testing.T, question string, selections ...string) string {
	t.Helper()
	file := filepath.Join("answers", question+".yaml")
	args := []string{"answer", question}
	for _, s := range selections {
		args = append(args, "--select", s)
	}
	if out, err := k.w.aliceHitl(t, k.repo.dir, append(args, "--to-file", file)...); err != nil {
		t.Fatalf("kubectl hitl answer: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(k.repo.dir, file))
	if err != nil {
		t.Fatal(err)
	}
	r := &hitlv1.QuestionReply{}
	if err := yaml.Unmarshal(data, r); err != nil {
		t.Fatal(err)
	}
	return r.Name
}

// waitSettled waits until the reply exists and the question is Settled,
// and returns how long after start (the push) each happened: the first is
// Flux's part (the new artifact, the build, the apply), the difference
// hitl's (admission, the controller's judgement, the status writes).
func waitSettled(ctx context.Context, t *testing.T, w *world, question, reply string, start time.Time) (applied, settled time.Duration) {
	t.Helper()
	deadline := start.Add(time.Minute)
	for time.Now().Before(deadline) {
		if applied == 0 {
			err := w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: reply}, &hitlv1.QuestionReply{})
			if err == nil {
				applied = time.Since(start)
			} else if !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		if applied != 0 {
			q := &hitlv1.UserQuestion{}
			if err := w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: question}, q); err != nil {
				t.Fatal(err)
			}
			if q.Status.State == hitlv1.StateSettled {
				return applied, time.Since(start)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("question %s not Settled by reply %s within a minute (reply applied after %s)", question, reply, applied)
	return 0, 0
}
