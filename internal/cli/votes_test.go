package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

// governedOpen is an Open Approval question that needs two approvals, one
// of them from the set prod/sre; alice has approved, outside the set.
func governedOpen() *hitlv1.UserQuestion {
	q := at(builders.Question("gate", "agents").Agent("release-bot").Ask("a", "May I roll out v2 to prod?", "Allow", "Deny").
		Approval("Allow", "Deny", "").Obj(), t0.Add(-2*time.Minute))
	q.UID = "uid-gate"
	q.Status = hitlv1.UserQuestionStatus{State: hitlv1.StateOpen, Tally: "1/2",
		SpecDigest: "sha256:" + strings.Repeat("ab", 32),
		Approval: &hitlv1.EffectiveApproval{Approvals: 2, Veto: true, ExcludeRequester: true,
			From: []hitlv1.ApproverSet{{Name: "prod/sre", Groups: []string{"sre"}, Minimum: 1}}},
		Votes: []hitlv1.Vote{{Reply: "gate-alice", By: hitlv1.UserInfo{Username: "alice"}, Choice: hitlv1.VoteApprove,
			At: metav1.NewMicroTime(t0.Add(-time.Minute))}}}
	return q
}

// governedSettled is governedOpen settled by carol's approval for prod/sre.
func governedSettled() *hitlv1.UserQuestion {
	q := governedOpen()
	carol := hitlv1.Vote{Reply: "gate-carol", By: hitlv1.UserInfo{Username: "carol"}, Choice: hitlv1.VoteApprove,
		Sets: []string{"prod/sre"}, At: metav1.NewMicroTime(t0)}
	q.Status.State, q.Status.Tally = hitlv1.StateSettled, "2/2"
	q.Status.Votes = append(q.Status.Votes, carol)
	q.Status.Answers = []hitlv1.AnswerItem{{ID: "a", Selected: []string{"Allow"}}}
	q.Status.Settlement = &hitlv1.Settlement{Reply: "gate-carol", AnsweredBy: &carol.By, At: carol.At, Votes: q.Status.Votes}
	return q
}

func TestPrintCardOfAGovernedQuestion(t *testing.T) {
	for name, q := range map[string]*hitlv1.UserQuestion{
		"card-governed-open.golden":    governedOpen(),
		"card-governed-settled.golden": governedSettled(),
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			printCard(&out, q, t0)
			golden(t, name, out.String())
		})
	}
	var out bytes.Buffer
	printCard(&out, timedOpen(), t0)
	if strings.Contains(out.String(), "votes") {
		t.Errorf("an ungoverned question's card shows votes:\n%s", out.String())
	}
}

// runAs runs kubectl hitl against a fake cluster holding objs, whose API
// server says the user is username (a SelfSubjectReview); it returns the
// fake client, to read what was created.
func runAs(t *testing.T, username string, objs []client.Object, args ...string) (client.Client, string, error) {
	t.Helper()
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).Build(), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if r, ok := obj.(*authenticationv1.SelfSubjectReview); ok {
				r.Status.UserInfo.Username = username
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	cmd := newRootCommand(&common{flags: genericclioptions.NewConfigFlags(true), streams: streams, client: c, namespace: "agents"})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return c, out.String() + errOut.String(), err
}

func TestASecondVoteIsRefusedBeforeAnythingIsCreated(t *testing.T) {
	for _, args := range [][]string{
		{"approve", "gate"},
		{"deny", "gate"},
		{"answer", "gate", "--select", "a=Deny"},
		{"answer", "gate"}, // interactive: refused before the prompt
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			c, out, err := runAs(t, "alice", []client.Object{governedOpen()}, args...)
			if validation.CodeOf(err) != hitlv1.CodeDuplicateVote {
				t.Fatalf("a second vote of alice: got %v, want DUPLICATE_VOTE\n%s", err, out)
			}
			if want := "DUPLICATE_VOTE: alice has already voted Approve on question gate with reply gate-alice"; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("the error says %q, want it to start with %q", err, want)
			}
			if strings.Contains(out, "May I roll out") {
				t.Errorf("the question was shown for a vote:\n%s", out)
			}
			var replies hitlv1.QuestionReplyList
			if err := c.List(context.Background(), &replies); err != nil {
				t.Fatal(err)
			}
			if len(replies.Items) != 0 {
				t.Errorf("a reply was created: %v", replies.Items)
			}
		})
	}
}

func TestADryRunReplyIsBoundToTheQuestionRead(t *testing.T) {
	// A manifest is applied later by whoever applies it: it is not checked
	// against alice's vote, but it is bound to the question she read.
	_, out, err := runAs(t, "alice", []client.Object{governedOpen()}, "approve", "gate", "--name", "r", "--dry-run=client")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var reply hitlv1.QuestionReply
	if err := yaml.UnmarshalStrict([]byte(out), &reply); err != nil {
		t.Fatalf("the manifest does not read back: %v\n%s", err, out)
	}
	ref := reply.Spec.QuestionRef
	if ref.UID != "uid-gate" || ref.SpecDigest != governedOpen().Status.SpecDigest {
		t.Errorf("the reply is not bound to the question read: questionRef %+v", ref)
	}
}

// kubectlHitl runs kubectl hitl in-process with a kubeconfig, in ns.
func kubectlHitl(ctx context.Context, config, ns string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", config, "-n", ns}, args...))
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// TestVotingFromTheCLI asks a question that needs two approvals with
// `ask`, lets alice and bob vote with `approve`, and checks what `show`,
// `inbox` and `ask` tell of the votes, and that alice cannot vote twice.
func TestVotingFromTheCLI(t *testing.T) {
	k := startCluster(t)
	ns := newNamespace(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	asker := adminKubeconfig(t, k)
	alice, bob := "alice-"+ns, "bob-"+ns
	aliceConfig := kubeconfig(t, k, envtest.User{Name: alice, Groups: []string{"system:masters"}})
	bobConfig := kubeconfig(t, k, envtest.User{Name: bob, Groups: []string{"system:masters"}})
	file := filepath.Join(t.TempDir(), "q.yaml")
	if err := os.WriteFile(file, []byte(`agent: release-bot
approval:
  approvals: 2
questions:
  - id: rollout
    question: May I roll out v2 to prod?
    options: [{label: Allow}, {label: Deny}]
    intent: {type: Approval, approval: {approve: Allow, reject: Deny}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		stdout, stderr string
		err            error
	}
	asked := make(chan result, 1)
	go func() {
		out, errOut, err := kubectlHitl(ctx, asker, ns, "ask", "-f", file, "--name", "gate")
		asked <- result{out, errOut, err}
	}()
	eventually(t, 30*time.Second, func() bool {
		q, err := getQuestion(t, k, ns, "gate")
		return err == nil && q.Status.Approval != nil
	}, func() string { return "the question was not asked, or no rule governs it" })

	show := func() string {
		t.Helper()
		out, errOut, err := kubectlHitl(ctx, aliceConfig, ns, "show", "gate")
		if err != nil {
			t.Fatalf("show: %v\n%s", err, errOut)
		}
		return out
	}
	if out := show(); !strings.Contains(out, "votes 0/2: settles with 2 approvals; a rejection vetoes; the asker may not vote\n") ||
		!strings.Contains(out, "still needed: 2 more approvals\n") {
		t.Errorf("show before any vote:\n%s", out)
	}

	out, errOut, err := kubectlHitl(ctx, aliceConfig, ns, "approve", "gate")
	if err != nil {
		t.Fatalf("alice's approve: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, ": Counted — ") || !strings.Contains(out, "Your vote is counted; the question needs more approvals.") {
		t.Errorf("alice's vote was not reported as counted:\n%s", out)
	}
	var replies hitlv1.QuestionReplyList
	if err := k.Client.List(ctx, &replies, client.InNamespace(ns)); err != nil || len(replies.Items) != 1 {
		t.Fatalf("replies after alice's vote: %v, %v", replies.Items, err)
	}
	q, _ := getQuestion(t, k, ns, "gate")
	if got := replies.Items[0].Spec.QuestionRef; got.UID != q.UID || got.SpecDigest == "" || got.SpecDigest != q.Status.SpecDigest {
		t.Errorf("the reply is not bound to the question read: questionRef %+v, question uid %s digest %s", got, q.UID, q.Status.SpecDigest)
	}

	_, errOut, err = kubectlHitl(ctx, aliceConfig, ns, "approve", "gate")
	if validation.CodeOf(err) != hitlv1.CodeDuplicateVote {
		t.Errorf("alice's second vote: got %v, want DUPLICATE_VOTE\n%s", err, errOut)
	}
	if err := k.Client.List(ctx, &replies, client.InNamespace(ns)); err != nil || len(replies.Items) != 1 {
		t.Errorf("alice's second vote created a reply: %v, %v", replies.Items, err)
	}

	if out := show(); !strings.Contains(out, "votes 1/2: ") || !strings.Contains(out, "  "+alice+": Approve\n") ||
		!strings.Contains(out, "still needed: 1 more approval\n") {
		t.Errorf("show after alice's vote:\n%s", out)
	}

	// alice's inbox does not offer her the question again.
	var inboxOut, inboxErr testenv.Output
	ictx, stop := context.WithCancel(ctx)
	inbox := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &inboxOut, ErrOut: &inboxErr})
	inbox.SetArgs([]string{"--kubeconfig", aliceConfig, "-n", ns, "inbox", "--agent", "release-bot"})
	inboxDone := make(chan error, 1)
	go func() { inboxDone <- inbox.ExecuteContext(ictx) }()
	eventually(t, 20*time.Second, func() bool { return strings.Contains(inboxErr.String(), "you voted Approve") },
		func() string { return "the inbox did not say alice voted:\n" + inboxErr.String() })
	stop()
	if err := <-inboxDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("inbox: %v", err)
	}
	if want := ns + "/gate: you voted Approve (votes 1/2); it still needs 1 more approval"; !strings.Contains(inboxErr.String(), want) {
		t.Errorf("the inbox says:\n%s\nwant %q", inboxErr.String(), want)
	}
	if strings.Contains(inboxErr.String(), "May I roll out") {
		t.Errorf("the inbox showed alice the question to vote on again:\n%s", inboxErr.String())
	}
	var claims hitlv1.QuestionClaimList
	if err := k.Client.List(ctx, &claims, client.InNamespace(ns)); err != nil || len(claims.Items) != 0 {
		t.Errorf("the inbox claimed the question alice voted on: %v, %v", claims.Items, err)
	}

	out, errOut, err = kubectlHitl(ctx, bobConfig, ns, "approve", "gate")
	if err != nil || !strings.Contains(out, ": Applied — ") {
		t.Fatalf("bob's approve: %v\n%s%s", err, out, errOut)
	}

	var got result
	select {
	case got = <-asked:
	case <-ctx.Done():
		t.Fatal("ask did not return")
	}
	if got.err != nil {
		t.Fatalf("ask: %v\n%s", got.err, got.stderr)
	}
	var res struct {
		Answers  []hitlv1.AnswerItem `json:"answers"`
		Approval struct {
			Rule  hitlv1.EffectiveApproval `json:"rule"`
			Tally string                   `json:"tally"`
			Votes []hitlv1.Vote            `json:"votes"`
		} `json:"approval"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &res); err != nil {
		t.Fatalf("ask printed %q: %v", got.stdout, err)
	}
	if res.Approval.Rule.Approvals != 2 || res.Approval.Tally != "2/2" || len(res.Approval.Votes) != 2 ||
		res.Approval.Votes[0].By.Username != alice || res.Approval.Votes[1].By.Username != bob ||
		res.Approval.Votes[1].Choice != hitlv1.VoteApprove {
		t.Errorf("ask's result does not hold the rule and the votes:\n%s", got.stdout)
	}
	if len(res.Answers) != 1 || res.Answers[0].Selected[0] != "Allow" {
		t.Errorf("ask's answers: %v", res.Answers)
	}
	for _, want := range []string{"votes 2/2: settles with 2 approvals", "  " + alice + ": Approve\n", "  " + bob + ": Approve\n"} {
		if !strings.Contains(got.stderr, want) {
			t.Errorf("ask's stderr does not say %q:\n%s", want, got.stderr)
		}
	}
}
